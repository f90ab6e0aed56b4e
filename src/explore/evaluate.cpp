// One configuration through the chain `braid simulate` uses (build_cost_model -> make_schedule ->
// lower -> simulate -> make_report), with the explorer's validity checks and memory cap.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../util/format.hpp"
#include "../util/units.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "braid/simulator.hpp"
#include "braid/size_limit.hpp"
#include "designed.hpp"
#include "format.hpp"
#include "pipeline.hpp"

namespace braid::explore {

namespace {

std::string gib(double bytes) { return util::format("%.2f GiB", bytes / kGiB); }

}  // namespace

void check_rows_kept(const std::string& command, double ops, std::size_t rows,
                     const std::string& rows_text, const std::string& way_out) {
  const double kept = ops * kKeptBytesPerOp + static_cast<double>(rows) * kKeptBytesPerRow;
  if (kept > kDefaultMaxSimulationBytes)
    throw InputError(command, "size",
                     "its " + rows_text + " would keep about " + gib(kept) + " (" +
                         util::format("%.3g", ops) + " ops simulated in all), over the " +
                         gib(kDefaultMaxSimulationBytes) + " limit; " + way_out);
}

int resolve_jobs(int jobs) {
  if (jobs > 0) return jobs;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::string reason_of(const InputError& e) {
  // Study rules name a YAML field ("parallel.tp"); schedule rules name an option and its value.
  switch (e.kind) {
    case InputKind::Value:
      return e.where + " " + e.field + ": " + e.problem;
    case InputKind::Field:
      break;
  }
  return e.field.empty() ? e.problem : e.field + ": " + e.problem;
}

void internal_error(const Configuration& c, const std::exception& e) {
  throw InternalError(std::string(e.what()) + " (configuration: " + describe(c) + ")");
}

std::optional<Prepared> prepare(const Study& base, const Configuration& c,
                                const ExploreOptions& options, std::string& reason) {
  if (!options.tp_across_nodes && c.tp > base.cluster.gpus_per_node) {
    reason = "tp " + std::to_string(c.tp) + " > " + std::to_string(base.cluster.gpus_per_node) +
             " GPUs per node of cluster " + base.cluster.name +
             " (TP across nodes is off; --tp-across-nodes allows it)";
    return std::nullopt;
  }
  Prepared p;
  // At a fixed global batch, microbatches 0 says the batch does not divide: the layout's own
  // rules are checked first (with a stand-in count), then that is the reason.
  const bool undivided = options.fixed_global_batch > 0 && c.microbatches == 0;
  try {
    Configuration sized = c;
    if (undivided) sized.microbatches = 1;
    p.study = configure(base, sized);
  } catch (const InputError& e) {
    reason = reason_of(e);
    return std::nullopt;
  }
  if (undivided) {
    reason = "global batch " + std::to_string(options.fixed_global_batch) +
             " is not a multiple of mbs x dp = " +
             std::to_string(std::int64_t{c.mbs} * p.study.parallel.dp);
    return std::nullopt;
  }
  p.schedule.pp = c.pp;
  p.schedule.vpp = c.vpp;
  p.schedule.microbatches = c.microbatches;
  p.schedule.offload = p.study.training.offload;  // the study's --offload (0 = off)
  try {
    const int minimum = is_designed(c.schedule) ? designed_min_microbatches(p.schedule)
                                                : min_microbatches(c.schedule, p.schedule);
    if (c.microbatches < minimum) {
      reason = "microbatches " + std::to_string(c.microbatches) + " below the minimum " +
               std::to_string(minimum) + " of " + c.schedule + " at pp " + std::to_string(c.pp);
      return std::nullopt;
    }
    // The size guard, before a schedule is built: a configuration beyond it is a row that says
    // what to reduce, never an allocation that fills the machine.
    check_size(configuration_size(p.study, c), kDefaultMaxSimulationBytes, false, "size",
               "fewer microbatches or stages", false);
  } catch (const InputError& e) {
    reason = reason_of(e);
    return std::nullopt;
  }
  return p;
}

SizeEstimate configuration_size(const Study& study, const Configuration& c) {
  return estimate_study_size(study, static_cast<double>(c.pp) * c.vpp, c.microbatches);
}

double max_static_bytes(const CostModel& cost, const Schedule& schedule) {
  double worst = 0;
  for (int r = 0; r < schedule.pp; ++r)
    worst = std::max(worst, total(rank_static_parts(cost, schedule.virtual_stages_of(r))));
  return worst + cost.fixed_overhead_bytes;
}

std::string static_over_cap_reason(double static_bytes, double cap, const std::string& what) {
  return "static memory (weights, gradients, optimizer state, fixed overhead) " +
         util::format("%.2f GiB", static_bytes / kGiB) + " over the " +
         util::format("%.2f GiB", cap / kGiB) + " cap; not " + what;
}

ScheduleKey schedule_key(const Configuration& c, const ScheduleOptions& o) {
  return {c.schedule, o.pp, o.vpp, o.microbatches};
}

CostKey cost_key(const Study& study, int virtual_stages) {
  return {study.parallel, study.training, virtual_stages};
}

namespace {

// simulate -> make_report (`figures_only`: report_figures) -> the status against the cap, for a
// lowered DAG.
void finish_lowered(Evaluation& e, const Study& study, const Schedule& schedule,
                    const CostModel& cost, const MemoryCap& cap, const ExploreOptions& options,
                    const Dag& dag, bool figures_only = false) {
  Timeline timeline;
  try {
    timeline = simulate(dag, options.sim);
  } catch (const InputError& err) {
    internal_error(e.config, err);
  }
  e.report = figures_only ? report_figures(study.name, schedule, cost, dag, timeline)
                          : make_report(study.name, schedule, cost, dag, timeline);
  apply_memory_cap(e.report, cap);  // the report's oom agrees
  // A row keeps the report's figures, not the material of a timeline picture: no sweep or
  // search output draws the exposed pieces, and they grow with every op, for every row kept.
  for (RankReport& r : e.report.ranks) std::vector<ExposedPiece>().swap(r.exposed_pieces);
  double peak = 0, stat = 0;
  int worst = 0;
  for (const RankReport& r : e.report.ranks) {
    if (r.peak_memory_bytes > peak) {
      peak = r.peak_memory_bytes;
      worst = r.rank;
    }
    stat = std::max(stat, r.static_bytes);
  }
  e.static_gib = stat / kGiB;
  const double model_peak = peak - cost.fixed_overhead_bytes;
  e.model_peak_gib = model_peak / kGiB;
  if (e.report.oom) {
    e.status = RowStatus::Oom;
    e.reason = "rank " + std::to_string(worst) + " needs " + gib(peak) + ", " +
               gib(-cap.margin_bytes(peak)) + " over the " + gib(cap.cap_bytes) + " cap";
  } else {
    e.status = RowStatus::Ok;
    e.reason.clear();
  }
}

// A peak this far over the cap is over it whatever order its terms were added in.
constexpr double kUntimedSlackBytes = 1 << 20;

// The worst rank's peak (static memory, as the report adds it, plus its activation peak) when the
// DAG's activation peaks are known before timing it and that peak is over the cap.
struct OverCap {
  int rank = 0;
  double peak_bytes = 0;
};
std::optional<OverCap> untimed_over_cap(const Dag& dag, const Schedule& schedule,
                                        const CostModel& cost, const MemoryCap& cap) {
  const std::optional<std::vector<double>> activations = untimed_activation_peaks(dag);
  if (!activations) return std::nullopt;
  std::optional<OverCap> worst;
  for (int r = 0; r < schedule.pp; ++r) {
    const StaticParts parts = rank_static_parts(cost, schedule.virtual_stages_of(r));
    const double peak = parts.layers_bytes + parts.embeddings_bytes + parts.other_bytes +
                        cost.fixed_overhead_bytes + (*activations)[r];
    if (-cap.margin_bytes(peak) > kUntimedSlackBytes && (!worst || peak > worst->peak_bytes))
      worst = OverCap{r, peak};
  }
  return worst;
}

}  // namespace

void finish(Evaluation& e, const Study& study, const Schedule& schedule, const CostModel& cost,
            const MemoryCap& cap, const ExploreOptions& options, Reused* reuse) {
  e.dp = study.parallel.dp;
  e.gpus = study.cluster.gpus();
  // The schedule is braid's own (make_schedule accepted the sizes): a lowering failure or a
  // deadlock is a bug in its generator, not bad input.
  Dag own;
  Dag& dag = reuse ? reuse->dag : own;
  try {
    const bool retimed = reuse && options.retime && !dag.ops.empty() &&
                         retime(dag, schedule, cost, options.lower, &reuse->memo);
    if (!retimed) {
      dag = Dag{};  // freed first, so that the new one reuses its memory
      dag = lower(schedule, cost, options.lower);
    }
  } catch (const InputError& err) {
    internal_error(e.config, err);
  }
  finish_lowered(e, study, schedule, cost, cap, options, dag);
}

bool finish_if_fits(Evaluation& e, const Study& study, const Schedule& schedule,
                    const CostModel& cost, const MemoryCap& cap, const ExploreOptions& options) {
  e.dp = study.parallel.dp;
  e.gpus = study.cluster.gpus();
  Dag dag;
  try {
    dag = lower(schedule, cost, options.lower);
  } catch (const InputError& err) {
    internal_error(e.config, err);
  }
  if (const std::optional<OverCap> over = untimed_over_cap(dag, schedule, cost, cap)) {
    e.status = RowStatus::Oom;
    e.reason = "rank " + std::to_string(over->rank) + " needs " + gib(over->peak_bytes) + ", " +
               gib(-cap.margin_bytes(over->peak_bytes)) + " over the " + gib(cap.cap_bytes) +
               " cap before timing; not simulated";
    return false;
  }
  finish_lowered(e, study, schedule, cost, cap, options, dag, /*figures_only=*/true);
  return true;
}

}  // namespace braid::explore

namespace braid {

void check_memory_in_flight(const Study& base, const std::vector<Configuration>& configs,
                            const ExploreOptions& options) {
  // The largest configurations run first and together, one per job: their estimates add up.
  std::vector<SizeEstimate> sizes;
  for (const Configuration& c : configs) {
    std::string reason;
    const std::optional<explore::Prepared> p = explore::prepare(base, c, options, reason);
    if (p) sizes.push_back(explore::configuration_size(p->study, c));
  }
  // What the rows keep grows with every configuration (a long --microbatches list is quadratic
  // in its length): refused before the first is simulated, not when the memory is gone.
  double ops = 0;
  for (const SizeEstimate& e : sizes) ops += e.ops;
  explore::check_rows_kept("sweep", ops, configs.size(), std::to_string(configs.size()) + " rows",
                           "give fewer values (--microbatches, --pp, --tp, --seq, --schedules), "
                           "or run the grid as several sweeps");
  std::sort(sizes.begin(), sizes.end(),
            [](const SizeEstimate& a, const SizeEstimate& b) { return a.bytes > b.bytes; });
  const std::size_t jobs = std::min<std::size_t>(explore::resolve_jobs(options.jobs), sizes.size());
  if (jobs < 2) return;  // one at a time: prepare() has checked each
  SizeEstimate together;
  for (std::size_t i = 0; i < jobs; ++i) together = combined(together, sizes[i]);
  check_size(together, kDefaultMaxSimulationBytes, false, "--jobs",
             "fewer --jobs (the " + std::to_string(jobs) +
                 " largest configurations run at once), or fewer microbatches or stages",
             false);
}

Evaluation evaluate(const Study& base, const Profile& profile, const Configuration& config,
                    const ExploreOptions& options) {
  Evaluation e;
  e.config = config;
  e.gpus = base.cluster.gpus();
  std::string reason;
  std::optional<explore::Prepared> p = explore::prepare(base, config, options, reason);
  if (!p) {
    e.reason = reason;
    return e;
  }
  try {
    const Schedule schedule = make_schedule(config.schedule, p->schedule);
    const CostModel cost = build_cost_model(p->study, profile, schedule.virtual_stages());
    explore::finish(e, p->study, schedule, cost, memory_cap(profile, options), options);
  } catch (const InputError& err) {
    e.status = RowStatus::Invalid;
    e.reason = explore::reason_of(err);
    e.report = Report{};
  } catch (const InternalError&) {
    throw;
  } catch (const std::exception& err) {
    explore::internal_error(config, err);
  }
  return e;
}

}  // namespace braid
