// Explorer: many configurations of one study — a configuration is the study with its sizes
// (tp, cp, pp, vpp, seq, micro-batch size, microbatches, sequence parallelism, recomputation)
// replaced,
// plus a schedule — each checked for validity (invalid ones keep their reason), evaluated through
// the same chain as `braid simulate` (build_cost_model -> make_schedule -> lower -> simulate ->
// make_report) on a thread pool, flagged against a memory cap, ranked and rendered (table, CSV,
// JSON, SVG chart). `search` picks the best layout for a GPU count and global batch (and, when
// nothing fits, which lever would make it fit); a sweep splits into shards that merge back into
// the unsharded result, byte for byte. It is not a simulator: every number comes from the modules
// below it; results do not depend on --jobs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "braid/config.hpp"
#include "braid/dag.hpp"
#include "braid/profile.hpp"
#include "braid/report.hpp"
#include "braid/simulator.hpp"

namespace braid {

// One point of the space: the sizes that replace the study's, and the schedule.
struct Configuration {
  std::string schedule;
  int tp = 1, pp = 1;
  int vpp = 2;  // chunks per rank; the schedule's fixed value unless it is chosen (1f1b-i)
  int seq = 0;
  int mbs = 1;           // samples per microbatch
  int microbatches = 1;  // per data-parallel replica and iteration
  bool sp = false;       // sequence parallelism
  Recompute recompute = Recompute::None;
  // Context parallelism (parallel.cp). Declared last so that the positional initialisers written
  // before it keep their meaning; the visitor lists it after tp (Megatron's order tp-cp-dp-pp).
  int cp = 1;
  // The context-parallel communication type (parallel.cp_comm_type), only where the sweep or
  // search varies it (SweepAxes::cp_comm_types holds more than one): unset, the row runs the
  // study's type and no output names it, so outputs of studies that do not vary it are as before.
  std::optional<CpCommType> cp_comm_type{};
  // Expert parallelism (parallel.ep) and expert tensor parallelism (parallel.etp, resolved: the
  // dense tp where the study follows it), only for a Mixture-of-Experts model (SweepAxes::ep not
  // empty): ep 0, the row runs the study's (a dense model's 1) and no output names them, so
  // outputs of dense studies are as before.
  int ep = 0;
  int etp = 0;
  bool operator==(const Configuration&) const = default;
};

// One field of a Configuration as its visitor names it: the key of its CSV column and JSON member
// ("microbatches"), and its label in text and table headers ("m").
struct ConfigField {
  const char* key;
  const char* label;
};

// The field visitor: f(ConfigField, member) for every member, in this order. This one list is
// the row codec's (MPI exchange, shard files), describe()'s, differences()', the sweep and
// search tables', CSV's and JSON's, so a new field is in all of them (explore_test counts the
// members). cross_product() and configure() are the two places that cannot use it: the first
// runs its axes in its own order (schedule innermost), the second maps each field onto the study
// member it replaces.
template <typename C, typename F>
requires std::is_same_v<std::remove_const_t<C>, Configuration>
void visit_config_fields(C& c, F&& f) {
  f(ConfigField{"schedule", "schedule"}, c.schedule);
  f(ConfigField{"tp", "tp"}, c.tp);
  f(ConfigField{"cp", "cp"}, c.cp);
  if (c.cp_comm_type) f(ConfigField{"cp_comm_type", "cp comm"}, *c.cp_comm_type);
  if (c.ep > 0) {  // Megatron's order tp-cp-ep-dp-pp
    f(ConfigField{"ep", "ep"}, c.ep);
    f(ConfigField{"etp", "etp"}, c.etp);
  }
  f(ConfigField{"pp", "pp"}, c.pp);
  f(ConfigField{"vpp", "vpp"}, c.vpp);
  f(ConfigField{"seq", "seq"}, c.seq);
  f(ConfigField{"mbs", "mbs"}, c.mbs);
  f(ConfigField{"microbatches", "m"}, c.microbatches);
  f(ConfigField{"sp", "sp"}, c.sp);
  f(ConfigField{"recompute", "recompute"}, c.recompute);
}

// The values of each dimension; the cross product is taken in this field order (schedule last,
// so the schedules of one set of sizes sit together). Lists are used as given (no sorting). Not
// on the field visitor: the axes' order is the sweep's row order (schedule innermost), not the
// Configuration's, and a new Configuration field needs its axis here and its loop in
// cross_product() by hand.
struct SweepAxes {
  std::vector<int> tp, pp, vpp, seq, mbs, microbatches;
  // Context-parallel sizes, looped right inside tp; empty is {1} (no context parallelism), so
  // axes written before cp was an axis keep their meaning.
  std::vector<int> cp;
  // Context-parallel communication types, looped right inside cp: with more than one each row
  // names its type (Configuration::cp_comm_type); with one or none the rows run the study's.
  std::vector<CpCommType> cp_comm_types;
  // Expert-parallel sizes, looped right inside the cp comm types, and expert tensor-parallel
  // sizes right inside them; empty ep: the rows name none and run the study's (what a dense model
  // gets, whatever --ep says). An etp of 0 is the row's tp (Megatron's default), as is an empty
  // etp list.
  std::vector<int> ep, etp;
  std::vector<bool> sp;
  std::vector<Recompute> recompute;
  std::vector<std::string> schedules;
};
// Every combination, in order. A schedule with a fixed number of chunks per rank (all but
// 1f1b-i) takes that value and appears once whatever the vpp list holds.
std::vector<Configuration> cross_product(const SweepAxes& axes);
// The configurations at one global batch of `global_batch` samples: each one's microbatches per
// replica = global_batch / (mbs x dp), dp = the GPUs of `base`'s cluster / (tp x cp x pp); 0 where
// that is not a whole number of 1 or more (or the layout does not divide the GPUs), for the
// evaluation to mark invalid with ExploreOptions::fixed_global_batch set to the same batch.
std::vector<Configuration> at_global_batch(std::vector<Configuration> configs, const Study& base,
                                           int global_batch);

// The processes a sweep or search is shared among. The library moves no bytes between processes
// itself: the caller (braid's MPI layer, src/cli/distributed.cpp; or a test's threads) supplies
// all_gather. With size > 1 every process calls sweep() or search() with the same arguments; each
// evaluates its share of the configurations (split by estimated cost) and every one returns the
// full result, identical to a single process's.
struct ProcessGroup {
  int rank = 0, size = 1;
  // Every process passes its bytes; every process gets every process's bytes, in rank order.
  std::function<std::vector<std::string>(const std::string&)> all_gather;
};

struct ExploreOptions {
  // Memory a GPU may use in all (its peak, the fixed overhead included); < 0: the definition of
  // memory_cap() (HBM less the allocator margin).
  double mem_cap_bytes = -1;
  // The allocator margin of memory_cap(); < 0: kDefaultMarginShare of the GPU's memory.
  double mem_margin_bytes = -1;
  bool tp_across_nodes =
      false;          // allow tp > GPUs per node (TP collectives over the inter-node link)
  int jobs = 0;       // worker threads; 0 = all cores
  bool cache = true;  // build each distinct schedule and cost model once (results are identical)
  // With the cache: configurations that share a schedule run one after another on a thread and
  // re-time the DAG lowered before them (retime() in dag.hpp) where its structure fits, instead of
  // lowering again (results are identical). Needs lower.fold_zero_time off. Off by default: a
  // lowering that copies stamped instructions is now faster than re-timing, which re-emits every
  // op (the 1,080-row default sweep: 0.78 against 1.01 ms per configuration; docs/explore.md).
  bool retime = false;
  LowerOptions lower;
  SimOptions sim;
  // Called after each evaluated configuration (done of total), one call at a time, from any
  // thread. May be empty.
  std::function<void(int done, int total)> progress;
  ProcessGroup group;  // one process unless set
  // `designed` in the schedule list: the wall-clock seconds each configuration's design may take
  // (a fixed candidate count ends it first unless the machine is slow; docs/design-search.md).
  double design_budget_s = 60;
  // --fixed-global-batch: the samples per iteration every configuration runs, its microbatches
  // set by at_global_batch(); a configuration with microbatches 0 (the batch does not divide into
  // mbs x dp) is invalid with that reason. 0: the configurations' microbatches as given.
  int fixed_global_batch = 0;
};

// The memory cap, one definition for search, sweep, compare, simulate and the charts: what a GPU
// may use in all (its peak: weights, gradients, optimizer state, activations and the profile's
// fixed overhead for CUDA context, workspaces and NCCL buffers) is its HBM less an allocator margin
// (memory the caching allocator holds but cannot hand out: fragmentation). A rank is over the cap
// when its peak exceeds it. --mem-cap replaces the whole formula (still compared to the peak).
// Every output prints and draws cap_bytes and the margin that margin_bytes() gives, never a
// figure of its own.
struct MemoryCap {
  double hbm_bytes = 0, fixed_overhead_bytes = 0;
  double allocator_margin_bytes = 0;  // taken off the HBM (0 when --mem-cap is given)
  double cap_bytes = 0;               // the peak a rank may reach, fixed overhead included
  bool given = false;                 // set by --mem-cap (the formula does not apply)

  // What is left under the cap at `peak_bytes` (negative: over it).
  double margin_bytes(double peak_bytes) const { return cap_bytes - peak_bytes; }
  // A fitting peak with less margin than this is "thin": kThinMarginShare of the HBM, whatever
  // made the cap (so a shard's cap needs no field for it).
  double thin_bytes() const;
  // A peak that fits with a margin under thin_bytes: an estimate error or a busier allocator
  // than assumed may turn it into an out-of-memory failure (docs/configuration.md, Memory cap).
  bool thin(double peak_bytes) const {
    const double m = margin_bytes(peak_bytes);
    return m >= 0 && m < thin_bytes();
  }
};
// 5% of the GPU's memory (docs/configuration.md, "Memory cap", gives the reasoning): an
// assumption, not a measurement.
inline constexpr double kDefaultMarginShare = 0.05;
// A margin under 5% of the GPU's memory is flagged thin (docs/configuration.md, "Memory cap").
inline constexpr double kThinMarginShare = 0.05;
MemoryCap memory_cap(const Profile& profile, const ExploreOptions& options);
// "memory cap 70.78 GiB = HBM 74.51 - allocator margin 3.73 GiB, for the peak (fixed overhead
// 2.00 GiB included); a margin under 3.73 GiB is thin": the same words in every header.
std::string memory_cap_text(const MemoryCap& cap);
// Marks the report's out-of-memory fields against the cap (instead of the bare HBM): a rank is
// oom when its peak exceeds `cap.cap_bytes`; over_bytes is by how much. Sets the report's cap,
// margin and thin flag from `cap` for the outputs.
void apply_memory_cap(Report& report, const MemoryCap& cap);

// "model qwen2-12.1b on a800x16 (2 x 8 GPUs): tp 8, pp 2, dp 1, seq 6144, mbs 1, m 64, global
// batch 64, sp off, recompute none, offload 0, distributed optimizer on": the full setting of one
// study, for the headers of simulate and compare.
std::string study_setting(const Study& study);

enum class RowStatus : std::uint8_t { Ok, Oom, Invalid };
const char* name(RowStatus s);

// The evaluation of one configuration.
struct Evaluation {
  Configuration config;
  int dp = 0;
  int gpus = 0;
  RowStatus status = RowStatus::Invalid;
  std::string reason;         // Invalid: why (the field and the rule it breaks); Oom: by how much
  Report report;              // Ok and Oom rows: the report `braid simulate` prints
  double static_gib = 0;      // largest static memory of a rank (incl. the fixed overhead)
  double model_peak_gib = 0;  // largest peak of a rank less the fixed overhead (not the cap's)
  double speedup = 0;         // tokens/s over 1f1b-i at the same sizes; 0 when there is none
  bool group_best = false;    // fastest row that fits of its (tp, pp, seq) group
};

// The study with the configuration's sizes, validated (throws InputError naming the rule broken).
Study configure(const Study& base, const Configuration& config);

// The size guard of a sweep: the rows it keeps must fit the memory limit together (throws
// InputError naming the sweep's size), and the configurations that run at once (the --jobs
// largest) too (size_limit.hpp; throws InputError naming --jobs). Each
// configuration alone is checked by the evaluation (an Invalid row naming what to reduce).
void check_memory_in_flight(const Study& base, const std::vector<Configuration>& configs,
                            const ExploreOptions& options);

// Evaluates one configuration, the plain way (nothing shared with other configurations). Never
// throws InputError: invalid configurations come back as Invalid rows with their reason.
Evaluation evaluate(const Study& base, const Profile& profile, const Configuration& config,
                    const ExploreOptions& options);

// Splitting the work among processes. The estimated cost of a configuration is proportional to
// the ops of its DAG (layers x microbatches x ops per layer and microbatch, plus the P2P sends);
// configurations that fail the cheap checks cost 1. The assignment is the greedy
// longest-processing-time rule (largest first, each to the least loaded part; ties: lowest index
// and lowest part), so every process computes the same one.
double estimated_cost(const Study& base, const Configuration& config,
                      const ExploreOptions& options);
std::vector<int> assign_by_cost(const std::vector<double>& costs, int parts);  // part of each

// Rows as bytes for the exchange between processes: every field, doubles bit for bit (the
// processes share one binary layout: one architecture and compiler). decode_rows throws
// std::runtime_error on truncated input.
std::string encode_rows(const std::vector<Evaluation>& rows);
std::vector<Evaluation> decode_rows(const std::string& bytes);

struct SweepResult {
  std::vector<Evaluation> rows;  // in configuration order
  std::vector<int> ranking;      // indices of Ok rows by tokens/s (ties: order), then Oom rows
  double mem_cap_gib = 0;        // the cap applied (cap.cap_bytes, the peak a rank may reach)
  double fixed_overhead_gib = 0;
  int valid = 0, oom = 0, invalid = 0;
  MemoryCap cap;  // how the cap was made (for the header)
};
// Evaluates every configuration on `options.jobs` threads; rows, ranking, speed-ups and group
// marks are identical for any number of jobs. Throws InputError for an empty list, a list where
// no combination is valid, and a cap below the static memory of every valid configuration.
SweepResult sweep(const Study& base, const Profile& profile,
                  const std::vector<Configuration>& configs, const ExploreOptions& options);

// The ranking, speed-ups, group marks and checks of sweep() applied to rows already evaluated
// (configuration order): what `braid merge` does with the rows of every shard. Throws InputError
// as sweep() does (no valid row, a cap below every static memory).
SweepResult sweep_from_rows(std::vector<Evaluation> rows, const MemoryCap& cap);

// Sharding a sweep for job arrays (Slurm, GNU parallel): shard i of N (1 <= i <= N) evaluates
// the configurations that assign_by_cost(estimated costs, N) gives to part i-1, the split MPI
// uses, so every shard computes the same assignment alone. The shard file holds those rows bit for
// bit; merge_shards() on all N files gives the SweepResult of the unsharded sweep.
struct SweepShard {
  int shard = 1, shards = 1;
  int configurations = 0;  // of the whole grid
  std::string grid;        // fingerprint of the grid, the study and the cap (shards must agree)
  std::string title;       // the SVG chart's title
  MemoryCap cap;
  std::vector<int> indices;      // configuration indices of the rows, ascending
  std::vector<Evaluation> rows;  // evaluated as sweep() evaluates them
};
SweepShard sweep_shard(const Study& base, const Profile& profile,
                       const std::vector<Configuration>& configs, const ExploreOptions& options,
                       int shard, int shards, const std::string& title);
// "2/8" -> {2, 8}; throws InputError naming `option`.
std::pair<int, int> parse_shard(const std::string& option, const std::string& text);
std::string encode_shard(const SweepShard& shard);
// Throws InputError naming `file` when the bytes are not a shard file.
SweepShard decode_shard(const std::string& bytes, const std::string& file);
// Every shard 1..N exactly once, all of the same grid; throws InputError naming the shard file
// (`files[k]` for shards[k]) that is missing, repeated or from another grid.
SweepResult merge_shards(const std::vector<SweepShard>& shards,
                         const std::vector<std::string>& files);

// Renderings (byte-stable). The table shows `top` ranked rows (0 = all), then the invalid ones:
// counted by reason, or each with its reason when `show_invalid` (CSV and JSON keep every row).
std::string sweep_table(const SweepResult& result, int top = 0, bool show_invalid = false);
std::string sweep_csv(const SweepResult& result);   // every row, every metric, %.17g numbers
std::string sweep_json(const SweepResult& result);  // {"cap_gib",...,"rows":[...]}
// Throughput against peak memory, one colour per schedule, the Pareto front of the rows that fit.
std::string sweep_svg(const SweepResult& result, const std::string& title);
// When the ranked rows (ok and oom) run more than one global batch, the note that says so:
// "rows span global batches 64..512 samples: tokens/s compares different batch sizes;
// --fixed-global-batch B compares at one"; "" when they all run one. The table prints it in its
// header, the JSON and the HTML report carry it as a field.
std::string global_batch_note(const SweepResult& result);

// Search: the best layout of `gpus` GPUs for a global batch of `global_batch` samples.
struct SearchSpace {
  int gpus = 0;
  int global_batch = 0;  // samples per iteration = dp x mbs x microbatches
  std::vector<std::string> schedules;
  std::vector<int> mbs = {1, 2, 4};  // micro-batch sizes tried
  std::vector<int> vpp;              // 1f1b-i chunks per rank; empty: the study's
  std::vector<bool> sp;              // sequence parallelism tried; empty: the study's
  std::vector<Recompute> recompute;  // recomputation modes tried; empty: the study's
  // Context-parallel sizes tried; empty: default_cp_values() (the study's cp, and more at long
  // sequences).
  std::vector<int> cp;
  // Context-parallel communication types tried (SweepAxes::cp_comm_types); one or none: the
  // study's.
  std::vector<CpCommType> cp_comm_types;
  // A Mixture-of-Experts model's expert-parallel sizes tried; empty: default_ep_values() at each
  // pipeline size. Expert tensor-parallel sizes tried (0: the row's tp); empty: {1}. A dense
  // model ignores both.
  std::vector<int> ep, etp;
  int top = 5;                // how many of the best to return
  int exhaustive_limit = 64;  // candidates (valid ones) up to which every one is simulated
  // When no layout fits: search again with each lever alone (SP, selective and full
  // recomputation, offloading, the distributed optimizer) and, if none is enough, all together.
  bool try_levers = true;
};
// The search's context-parallel sizes when --cp is not given: the study's cp and, when the
// sequence is at least kLongSequence tokens and the model can run CP (a fused attention kernel,
// no vision encoder), 2, 4 and 8 too — each only where the sequence splits into 2 x cp equal
// chunks. Ascending, no repeats.
inline constexpr int kLongSequence = 32768;
std::vector<int> default_cp_values(const Study& study);
// Why default_cp_values() tries CP, or does not, in a few words for the search's header.
std::string cp_rule_text(const Study& study);

// The search's expert-parallel sizes when --ep is not given, at pipeline size `pp` and expert
// tensor-parallel size `etp`: every divisor of the model's experts with etp x ep x pp dividing
// the study's GPUs (Megatron-Core's rank layout: edp = world / (etp x ep x pp)); ascending. Empty
// for a dense model.
std::vector<int> default_ep_values(const Study& study, int pp, int etp);

// Every (tp, cp, pp, dp, mbs, microbatches, sp, recompute, schedule) the search considers, in its
// order; throws InputError when gpus does not fit the cluster's node size or no layout divides
// the batch.
std::vector<Configuration> search_candidates(const Study& base, const SearchSpace& space);
// The study with the cluster resized to `gpus` GPUs (whole nodes, or one partial node).
Study with_gpus(const Study& base, int gpus);

// One way out when nothing fits: what was changed, and the best layout with it (if any fits).
struct Lever {
  std::string name;              // "--sp on", "--recompute full", ... (how to ask for it)
  bool fits = false;             // some layout fits with it
  std::string detail;            // when it does not apply or nothing fits: why
  std::vector<Evaluation> best;  // the fastest layout that fits with it (empty if none)
};

struct SearchResult {
  std::vector<Evaluation> best;  // up to space.top rows that fit, fastest first
  Evaluation fastest_oom;        // the fastest simulated row that does not fit (if faster)
  bool has_fastest_oom = false;
  bool exhaustive = false;
  int candidates = 0, invalid = 0, pruned_memory = 0, pruned_bound = 0, simulated = 0;
  double mem_cap_gib = 0;
  std::string why_runner_up;  // one sentence: why best[1] loses to best[0]
  MemoryCap cap;
  int gpus = 0, global_batch = 0;
  std::string setting;  // "h100x64 (8 x 8 GPUs), qwen2-72b, seq 8192, ..." for the header
  // Every candidate that was simulated, found invalid or ruled out by its static memory (reason
  // "static memory ..."), in candidate order; those skipped by the bound are not in it.
  std::vector<Evaluation> rows;
  std::vector<Lever> levers;  // when nothing fits and space.try_levers
};
// Shared among processes (options.group): every process builds every candidate's schedule and
// cost model (cheap) so that all prune alike; the simulations of each batch are split.
// options.progress is called once per simulated candidate (total: those left after the memory
// check, an upper bound when the search prunes).
SearchResult search(const Study& base, const Profile& profile, const SearchSpace& space,
                    const ExploreOptions& options);
// The invalid and ruled-out candidates counted by reason, or each listed when `show_invalid`.
std::string search_text(const SearchResult& result, bool show_invalid = false);
std::string search_json(const SearchResult& result);
// The rows (simulated and invalid) in the columns of sweep_csv, ranked the same way.
std::string search_csv(const SearchResult& result);
// "differs in tp 4 vs 8, mbs 2 vs 1": every field of `a` that differs from `b` (empty if none).
std::string differences(const Evaluation& a, const Evaluation& b);

// An upper bound on tokens/s without simulating: the iteration lasts at least as long as the
// busiest rank's compute alone (contention only slows it down). Exposed for tests.
double throughput_upper_bound(const CostModel& cost, const Schedule& schedule);

}  // namespace braid
