// Report: the metrics of one simulated iteration, exactly as DESIGN §5 defines them — iteration
// time; per rank busy / tp_exposed / cp_exposed / ep_exposed / dp_exposed / optimizer / pp_idle /
// offload_stall (their sum is the iteration time);
// bubble rates, MFU, throughput; peak memory per rank (static + activation peak, OOM flag); the
// critical path summary. Plus its renderings: JSON (units in the field names), CSV, and the
// terminal tables of `simulate` and `compare`. Trace and SVG outputs live in timeline_output.hpp.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"

namespace braid {

// A half-open time interval [begin_s, end_s) of the iteration.
struct TimeInterval {
  double begin_s = 0, end_s = 0;
  bool operator==(const TimeInterval&) const = default;
};

// One piece of a rank's exposed collective time: the collective op (an index into the Dag's ops)
// that held the rank's compute stream during [start_s, end_s) of an idle gap, and its stream (the
// group it runs over: tp, cp, ep or dp). Where collectives overlap, the group first in that order
// holds the time, then within a group the one that started first (then the lower op index).
struct ExposedPiece {
  int op = 0;
  StreamKind stream = StreamKind::Tp;
  double start_s = 0, end_s = 0;
  bool operator==(const ExposedPiece&) const = default;
};

struct RankReport {
  int rank = 0;
  double busy_s = 0;           // compute stream executing
  double tp_exposed_s = 0;     // compute idle while what it waits for is held by a TP collective
  double cp_exposed_s = 0;     // ... by a context-parallel collective
  double ep_exposed_s = 0;     // ... by an expert-parallel collective (all-to-all)
  double pp_idle_s = 0;        // idle for any other reason: other stages, P2P, start-up, drain
  double offload_stall_s = 0;  // idle while what it waits for is an offload/reload copy
  double dp_exposed_s = 0;     // idle while what it waits for is a data-parallel sync op
  double optimizer_s = 0;      // the optimizer step (Adam, gradient norm, zeroing)
  double static_bytes = 0;     // weights + grads + optimizer of its chunks + fixed overhead
  // static_bytes by part (a tied embedding pair held once): sums to static_bytes.
  double static_layers_bytes = 0, static_embeddings_bytes = 0, static_other_bytes = 0;
  double static_fixed_bytes = 0;
  double activation_peak_bytes = 0;
  double activation_peak_ma = 0;  // activation peak / M_a
  double peak_memory_bytes = 0;   // static + activation peak
  double peak_memory_gib = 0;
  bool oom = false;
  double over_bytes = 0;  // peak - hbm when oom
  // What attribute_idle() counted as exposed collective time (tp, cp, ep, and dp for collectives
  // of a unit over a data-parallel group), piece by piece with the collective that held it,
  // disjoint and in time order; each stream's widths add up to its exposed time (up to rounding;
  // dp_exposed_s also holds the DP sync ops' share, which has no pieces). The pictures draw their
  // union per stream (exposed_intervals), `theory --explain` sorts them by collective.
  std::vector<ExposedPiece> exposed_pieces;
};

// The exposed time of a rank's collectives on `stream` as disjoint intervals in time order: its
// pieces on that stream, joined where they touch. The SVG and HTML pictures draw exactly these.
std::vector<TimeInterval> exposed_intervals(const RankReport& rank, StreamKind stream);

// Where the critical path runs: time on it per op kind and per rank, in path order.
struct CriticalPathSummary {
  int ops = 0;
  double compute_s = 0, collective_s = 0, p2p_s = 0, copy_s = 0;
  double wait_s = 0;               // path time not covered by its ops (0 when exact)
  std::vector<double> rank_s;      // per rank: time of path ops on that rank
  std::vector<int> rank_sequence;  // ranks in path order, consecutive repeats collapsed
  std::string text;                // "r0 F 1.2ms -> r1 F ... " compact description
};

struct Report {
  std::string study;     // study name, or "uniform"
  std::string schedule;  // schedule name
  bool uniform = false;  // uniform (theory) unit costs: times are symbolic, no memory/FLOP data
  int pp = 1, vpp = 1, tp = 1, microbatches = 1, gpus = 1;
  int ops = 0;
  double iteration_time_s = 0;
  std::vector<RankReport> ranks;
  double tp_bubble_rate = 0;      // sum_r tp_exposed / (p * iteration_time)
  double cp_exposed_rate = 0;     // sum_r cp_exposed / (p * iteration_time)
  double ep_exposed_rate = 0;     // sum_r ep_exposed / (p * iteration_time)
  double pp_bubble_rate = 0;      // sum_r pp_idle / (p * iteration_time)
  double offload_stall_rate = 0;  // sum_r offload_stall / (p * iteration_time)
  double dp_exposed_rate = 0;     // sum_r dp_exposed / (p * iteration_time)
  double optimizer_rate = 0;      // sum_r optimizer / (p * iteration_time)
  // sum_r (time of TP collectives on r) / (p * iteration_time): the share papers quote; the
  // TP bubble is the exposed part of it. Likewise for the cp, ep and dp streams (the last with
  // the gradient sync, parameter gather and tied-embedding ops).
  double tp_comm_rate = 0;
  double cp_comm_rate = 0, ep_comm_rate = 0, dp_comm_rate = 0;
  double mfu = 0;  // model_flops / (iteration_time * gpus * peak_flops)
  double hfu = 0;  // hardware_flops (recomputation included) / the same
  double tokens_per_s = 0;
  double samples_per_s = 0;
  double tflops_per_gpu = 0;  // model TFLOP/s per GPU
  double ma_bytes = 0;        // M_a: mean activation bytes of one microbatch on one chunk
  double max_peak_memory_gib = 0;
  bool oom = false;
  int oom_rank = -1;  // the rank most over the cap
  double oom_over_gib = 0;
  double hbm_gib = 0;
  // The memory cap the peak is compared to (the HBM until a study's cap is applied: explore.hpp,
  // MemoryCap), what is left under it, and whether that margin is thin (under thin_under_gib).
  double cap_gib = 0, margin_gib = 0, thin_under_gib = 0;
  bool thin_margin = false;
  CriticalPathSummary critical_path;
};

// One field of a report as the field visitors below name it: its member name; its key in the
// JSON report ("" when the JSON leaves it out, "a/b" for key b of the nested object a), and
// whether the JSON shows its bytes as GiB; whether the sweep rows carry it.
struct FieldInfo {
  const char* name;
  const char* json;
  bool json_gib = false;
  bool in_rows = true;
};

// The field visitors: f(FieldInfo, member) for every member, in JSON order. This one list is the
// JSON writer's, the sweep row codec's (MPI exchange, shard files) and their round-trip test's,
// so a new field is in all of them or the test fails (it counts the struct's members).
template <typename R, typename F>
requires std::is_same_v<std::remove_const_t<R>, ExposedPiece>
void visit_fields(R& p, F&& f) {
  f(FieldInfo{"op", "op"}, p.op);
  f(FieldInfo{"stream", "stream"}, p.stream);
  f(FieldInfo{"start_s", "start_s"}, p.start_s);
  f(FieldInfo{"end_s", "end_s"}, p.end_s);
}

template <typename R, typename F>
requires std::is_same_v<std::remove_const_t<R>, RankReport>
void visit_fields(R& r, F&& f) {
  f(FieldInfo{"rank", "rank"}, r.rank);
  f(FieldInfo{"busy_s", "busy_s"}, r.busy_s);
  f(FieldInfo{"tp_exposed_s", "tp_exposed_s"}, r.tp_exposed_s);
  f(FieldInfo{"cp_exposed_s", "cp_exposed_s"}, r.cp_exposed_s);
  f(FieldInfo{"ep_exposed_s", "ep_exposed_s"}, r.ep_exposed_s);
  f(FieldInfo{"dp_exposed_s", "dp_exposed_s"}, r.dp_exposed_s);
  f(FieldInfo{"optimizer_s", "optimizer_s"}, r.optimizer_s);
  f(FieldInfo{"pp_idle_s", "pp_idle_s"}, r.pp_idle_s);
  f(FieldInfo{"offload_stall_s", "offload_stall_s"}, r.offload_stall_s);
  f(FieldInfo{"static_bytes", "static_gib", true}, r.static_bytes);
  f(FieldInfo{"static_layers_bytes", "static_parts_gib/layers", true}, r.static_layers_bytes);
  f(FieldInfo{"static_embeddings_bytes", "static_parts_gib/embeddings", true},
    r.static_embeddings_bytes);
  f(FieldInfo{"static_other_bytes", "static_parts_gib/other", true}, r.static_other_bytes);
  f(FieldInfo{"static_fixed_bytes", "static_parts_gib/fixed", true}, r.static_fixed_bytes);
  f(FieldInfo{"activation_peak_bytes", "activation_peak_gib", true}, r.activation_peak_bytes);
  f(FieldInfo{"activation_peak_ma", "activation_peak_ma"}, r.activation_peak_ma);
  f(FieldInfo{"peak_memory_bytes", ""}, r.peak_memory_bytes);
  f(FieldInfo{"peak_memory_gib", "peak_memory_gib"}, r.peak_memory_gib);
  f(FieldInfo{"oom", "oom"}, r.oom);
  f(FieldInfo{"over_bytes", "over_gib", true}, r.over_bytes);
  // Op indices into this run's Dag, for the pictures and `theory --explain`: not sweep data.
  f(FieldInfo{"exposed_pieces", "", false, false}, r.exposed_pieces);
}

template <typename R, typename F>
requires std::is_same_v<std::remove_const_t<R>, CriticalPathSummary>
void visit_fields(R& p, F&& f) {
  f(FieldInfo{"ops", "ops"}, p.ops);
  f(FieldInfo{"compute_s", "compute_s"}, p.compute_s);
  f(FieldInfo{"collective_s", "collective_s"}, p.collective_s);
  f(FieldInfo{"p2p_s", "p2p_s"}, p.p2p_s);
  f(FieldInfo{"copy_s", "copy_s"}, p.copy_s);
  f(FieldInfo{"wait_s", "wait_s"}, p.wait_s);
  f(FieldInfo{"rank_s", "rank_s"}, p.rank_s);
  f(FieldInfo{"rank_sequence", "rank_sequence"}, p.rank_sequence);
  f(FieldInfo{"text", "text"}, p.text);
}

// oom_rank is written as null in the JSON when the report is not out of memory.
template <typename R, typename F>
requires std::is_same_v<std::remove_const_t<R>, Report>
void visit_fields(R& r, F&& f) {
  f(FieldInfo{"study", "study"}, r.study);
  f(FieldInfo{"schedule", "schedule"}, r.schedule);
  f(FieldInfo{"uniform", ""}, r.uniform);
  f(FieldInfo{"pp", "pp"}, r.pp);
  f(FieldInfo{"vpp", "vpp"}, r.vpp);
  f(FieldInfo{"tp", "tp"}, r.tp);
  f(FieldInfo{"microbatches", "microbatches"}, r.microbatches);
  f(FieldInfo{"gpus", "gpus"}, r.gpus);
  f(FieldInfo{"ops", "ops"}, r.ops);
  f(FieldInfo{"iteration_time_s", "iteration_time_s"}, r.iteration_time_s);
  f(FieldInfo{"tp_bubble_rate", "tp_bubble_rate"}, r.tp_bubble_rate);
  f(FieldInfo{"tp_comm_rate", "tp_comm_rate"}, r.tp_comm_rate);
  f(FieldInfo{"cp_exposed_rate", "cp_exposed_rate"}, r.cp_exposed_rate);
  f(FieldInfo{"cp_comm_rate", "cp_comm_rate"}, r.cp_comm_rate);
  f(FieldInfo{"ep_exposed_rate", "ep_exposed_rate"}, r.ep_exposed_rate);
  f(FieldInfo{"ep_comm_rate", "ep_comm_rate"}, r.ep_comm_rate);
  f(FieldInfo{"pp_bubble_rate", "pp_bubble_rate"}, r.pp_bubble_rate);
  f(FieldInfo{"offload_stall_rate", "offload_stall_rate"}, r.offload_stall_rate);
  f(FieldInfo{"dp_exposed_rate", "dp_exposed_rate"}, r.dp_exposed_rate);
  f(FieldInfo{"dp_comm_rate", "dp_comm_rate"}, r.dp_comm_rate);
  f(FieldInfo{"optimizer_rate", "optimizer_rate"}, r.optimizer_rate);
  f(FieldInfo{"mfu", "mfu"}, r.mfu);
  f(FieldInfo{"hfu", "hfu"}, r.hfu);
  f(FieldInfo{"tokens_per_s", "tokens_per_s"}, r.tokens_per_s);
  f(FieldInfo{"samples_per_s", "samples_per_s"}, r.samples_per_s);
  f(FieldInfo{"tflops_per_gpu", "tflops_per_gpu"}, r.tflops_per_gpu);
  f(FieldInfo{"ma_bytes", "ma_gib", true}, r.ma_bytes);
  f(FieldInfo{"max_peak_memory_gib", "max_peak_memory_gib"}, r.max_peak_memory_gib);
  f(FieldInfo{"hbm_gib", "hbm_gib"}, r.hbm_gib);
  // Set from the cap: a row carries what its cap gives again (sweep_from_rows).
  f(FieldInfo{"cap_gib", "cap_gib", false, false}, r.cap_gib);
  f(FieldInfo{"margin_gib", "margin_gib", false, false}, r.margin_gib);
  f(FieldInfo{"thin_under_gib", "thin_under_gib", false, false}, r.thin_under_gib);
  f(FieldInfo{"thin_margin", "thin_margin", false, false}, r.thin_margin);
  f(FieldInfo{"oom", "oom"}, r.oom);
  f(FieldInfo{"oom_rank", "oom_rank"}, r.oom_rank);
  f(FieldInfo{"oom_over_gib", "oom_over_gib"}, r.oom_over_gib);
  f(FieldInfo{"ranks", "ranks"}, r.ranks);
  f(FieldInfo{"critical_path", "critical_path"}, r.critical_path);
}

// A type the visitors above list (for generic writers: a member that is one is written field by
// field, a std::vector of them element by element).
struct IgnoreField {
  template <typename V>
  void operator()(const FieldInfo&, V&) const {}
};
template <typename T>
concept HasFields = requires(T& t) {
  visit_fields(t, IgnoreField{});
};
template <typename T>
concept ListOfFields = requires {
  requires HasFields<typename T::value_type>;
};

// Computes the report. `study` names the study in the outputs. Of the schedule it reads the name,
// sizes and placement only (the Dag holds the program): a caller may have freed its instructions.
Report make_report(const std::string& study, const Schedule& schedule, const CostModel& cost,
                   const Dag& dag, const Timeline& timeline);

// make_report's figures that rank a layout and hold it against a memory cap, for a search that
// keeps only its fastest: the step time and throughputs (tokens, samples, MFU, HFU, TFLOP/s per
// GPU) and each rank's static, activation and peak memory, equal to make_report's bit for bit;
// no idle attribution (every busy, exposed and idle time and the rates of them stay 0), no
// critical path, no finiteness check.
Report report_figures(const std::string& study, const Schedule& schedule, const CostModel& cost,
                      const Dag& dag, const Timeline& timeline);

// Per-rank attribution of the compute stream's idle time (DESIGN §5), exposed for tests and the
// theory command: fills busy_s, tp_exposed_s, cp_exposed_s, ep_exposed_s, dp_exposed_s,
// optimizer_s, pp_idle_s, offload_stall_s and exposed_pieces of `ranks` (size p). pp_idle_s is
// the remainder of the iteration time.
void attribute_idle(const Dag& dag, const Timeline& timeline, std::vector<RankReport>& ranks);

// pp_idle per rank measured directly, independently of attribute_idle's remainder: the length of
// each idle gap of the compute stream (and the drain after its last op) less the union of the
// intervals of every op of the rank, off the compute stream, that the gap's op waits for
// (collectives, DP sync, copies). A plain walk per gap with none of attribute_idle's short cuts:
// slow, for checks (the two must agree to rounding on every schedule).
std::vector<double> measured_pp_idle_s(const Dag& dag, const Timeline& timeline);

// Renderings. JSON field names carry units (_s, _gib, _bytes); output is byte-stable.
std::string report_json(const Report& report);
// The same with an MoE study's routing as the object "moe" after the report's fields (none:
// report_json's text).
std::string report_json(const Report& report, const std::optional<MoeLoadReport>& moe);
// "MoE routing      skew:1.2, busiest EP rank 0 at 1.41x balanced, ..." and a line break.
std::string moe_load_line(const MoeLoadReport& moe);
std::string reports_json(const std::vector<Report>& reports);  // {"reports":[...]} for compare
// The same with an MoE study's routing as the object "moe" after "reports" (none: the text above).
std::string reports_json(const std::vector<Report>& reports,
                         const std::optional<MoeLoadReport>& moe);
std::string reports_csv(const std::vector<Report>& reports);  // one row per report
std::string ranks_csv(const Report& report);                  // one row per rank
std::string simulate_table(const Report& report);             // summary + per-rank detail
// The same with an MoE study's routing line after the EP line.
std::string simulate_table(const Report& report, const std::optional<MoeLoadReport>& moe);
// One row per report, speed-up relative to the report named `baseline` (if present), best marked.
std::string compare_table(const std::vector<Report>& reports,
                          const std::string& baseline = "1f1b-i");

}  // namespace braid
