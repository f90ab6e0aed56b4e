// Report: the metrics of one simulated iteration, exactly as DESIGN §5 defines them — iteration
// time; per rank busy / tp_exposed / dp_exposed / optimizer / pp_idle / offload_stall (their sum
// is the iteration time);
// bubble rates, MFU, throughput; peak memory per rank (static + activation peak, OOM flag); the
// critical path summary. Plus its renderings: JSON (units in the field names), CSV, and the
// terminal tables of `simulate` and `compare`. Trace and SVG outputs live in timeline_output.hpp.
#pragma once

#include <string>
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

// One piece of a rank's exposed TP time: the collective op (an index into the Dag's ops) that
// held the rank's compute stream during [start_s, end_s) of an idle gap. Where two collectives
// overlap, the one that started first (then the lower op index) holds the time.
struct ExposedPiece {
  int op = 0;
  double start_s = 0, end_s = 0;
  bool operator==(const ExposedPiece&) const = default;
};

struct RankReport {
  int rank = 0;
  double busy_s = 0;           // compute stream executing
  double tp_exposed_s = 0;     // compute idle while what it waits for is held by a TP collective
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
  // What attribute_idle() counted as tp_exposed, piece by piece with the collective that held
  // it, disjoint and in time order; the widths add up to tp_exposed_s (up to rounding). The
  // pictures draw their union (tp_exposed_intervals), `theory --explain` sorts them by collective.
  std::vector<ExposedPiece> tp_exposed_pieces;
};

// The exposed TP time of a rank as disjoint intervals in time order: its pieces, joined where
// they touch. The SVG and HTML pictures draw exactly these.
std::vector<TimeInterval> tp_exposed_intervals(const RankReport& rank);

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
  double pp_bubble_rate = 0;      // sum_r pp_idle / (p * iteration_time)
  double offload_stall_rate = 0;  // sum_r offload_stall / (p * iteration_time)
  double dp_exposed_rate = 0;     // sum_r dp_exposed / (p * iteration_time)
  double optimizer_rate = 0;      // sum_r optimizer / (p * iteration_time)
  // sum_r (time of TP collectives on r) / (p * iteration_time): the share papers quote; the
  // TP bubble is the exposed part of it.
  double tp_comm_rate = 0;
  double mfu = 0;  // model_flops / (iteration_time * gpus * peak_flops)
  double hfu = 0;  // hardware_flops (recomputation included) / the same
  double tokens_per_s = 0;
  double samples_per_s = 0;
  double tflops_per_gpu = 0;  // model TFLOP/s per GPU
  double ma_bytes = 0;        // M_a: mean activation bytes of one microbatch on one chunk
  double max_peak_memory_gib = 0;
  bool oom = false;
  int oom_rank = -1;  // the rank most over hbm
  double oom_over_gib = 0;
  double hbm_gib = 0;
  CriticalPathSummary critical_path;
};

// Computes the report. `study` names the study in the outputs.
Report make_report(const std::string& study, const Schedule& schedule, const CostModel& cost,
                   const Dag& dag, const Timeline& timeline);

// Per-rank attribution of the compute stream's idle time (DESIGN §5), exposed for tests and the
// theory command: fills busy_s, tp_exposed_s, dp_exposed_s, optimizer_s, pp_idle_s,
// offload_stall_s and tp_exposed_pieces of `ranks` (size p).
void attribute_idle(const Dag& dag, const Timeline& timeline, std::vector<RankReport>& ranks);

// Renderings. JSON field names carry units (_s, _gib, _bytes); output is byte-stable.
std::string report_json(const Report& report);
std::string reports_json(const std::vector<Report>& reports);  // {"reports":[...]} for compare
std::string reports_csv(const std::vector<Report>& reports);   // one row per report
std::string ranks_csv(const Report& report);                   // one row per rank
std::string simulate_table(const Report& report);              // summary + per-rank detail
// One row per report, speed-up relative to the report named `baseline` (if present), best marked.
std::string compare_table(const std::vector<Report>& reports,
                          const std::string& baseline = "1f1b-i");

}  // namespace braid
