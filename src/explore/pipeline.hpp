// The pieces of one evaluation, shared by sweep and search: the checks that need no cost model,
// the keys under which schedules and cost models are shared, the finish (lower -> simulate ->
// report -> memory cap), and a thread pool over indices. Internal to src/explore.
#pragma once

#include <compare>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "braid/schedule.hpp"
#include "braid/size_limit.hpp"

namespace braid::explore {

// A configuration that passed the cheap checks: its study and schedule options.
struct Prepared {
  Study study;
  ScheduleOptions schedule;
};

// The checks that need neither schedule nor cost model: TP across nodes, the study rules
// (divisibility, layers per virtual stage), the schedule's minimum microbatches, the size guard.
// Returns the reason in `reason` and nothing when the configuration is invalid.
std::optional<Prepared> prepare(const Study& base, const Configuration& config,
                                const ExploreOptions& options, std::string& reason);

// The size guard's estimate of one configuration (size_limit.hpp), from its study's shape.
SizeEstimate configuration_size(const Study& study, const Configuration& c);

// Largest static bytes of a rank (weights, gradients, optimizer state and the fixed overhead: the
// peak's part that is there from the start), by the report's rule (rank_static_parts: a tied
// embedding pair on one rank counted once).
double max_static_bytes(const CostModel& cost, const Schedule& schedule);
// "static memory (weights, gradients, optimizer state, fixed overhead) 30.12 GiB over the 24.00
// GiB cap; not <what>": the reason of a configuration ruled out by it without being simulated or
// designed.
std::string static_over_cap_reason(double static_bytes, double cap, const std::string& what);

// Everything a schedule depends on: its name and the sizes make_schedule reads.
struct ScheduleKey {
  std::string schedule;
  int pp = 0, vpp = 0, microbatches = 0;
  // NOLINT here, in CostKey and in ParallelConfig / TrainingConfig (config.hpp): clang-tidy 14
  // takes the 0 a defaulted <=> compares with for a null pointer (modernize-use-nullptr).
  auto operator<=>(const ScheduleKey&) const = default;  // NOLINT(modernize-use-nullptr)
};
// Everything build_cost_model reads that varies between configurations: the prepared study's
// parallel and training settings (whole, so a new field cannot be left out) and the number of
// virtual stages. Model, cluster and layout are the base study's, the same for every row.
struct CostKey {
  ParallelConfig parallel;
  TrainingConfig training;
  int virtual_stages = 0;
  auto operator<=>(const CostKey&) const = default;  // NOLINT(modernize-use-nullptr)
};
ScheduleKey schedule_key(const Configuration& c, const ScheduleOptions& o);
CostKey cost_key(const Study& study, int virtual_stages);

// lower -> simulate -> make_report, then the status against the cap. Fills e.report, e.status,
// e.reason, e.static_gib, e.model_peak_gib, e.dp, e.gpus.
// What a configuration passes on to the next of its run (same Schedule object): its DAG and
// what re-timing keeps of the schedule.
struct Reused {
  Dag dag;
  RetimeMemo memo;
};
// `reuse`, when given, holds the DAG of an earlier configuration: re-timed when its structure
// fits (ExploreOptions::retime), else replaced by a fresh lowering; it holds this one's DAG after.
void finish(Evaluation& e, const Study& study, const Schedule& schedule, const CostModel& cost,
            const MemoryCap& cap, const ExploreOptions& options, Reused* reuse = nullptr);

// finish() for a search that needs only the configurations that fit: false, with status Oom and
// nothing timed, when the lowered DAG's activation peaks, known without timing it
// (untimed_activation_peaks), put a rank over the cap; else true and finish()'s row, its report
// only the figures that rank it (report_figures: step time, throughput, memory and the status
// against the cap as finish() finds them, no attribution). A row that is shown is finished again
// with finish().
bool finish_if_fits(Evaluation& e, const Study& study, const Schedule& schedule,
                    const CostModel& cost, const MemoryCap& cap, const ExploreOptions& options);

// The reason text of an InputError raised while evaluating a configuration.
std::string reason_of(const InputError& e);
// Anything but an InputError while evaluating a configuration is a bug in braid: throws
// InternalError with e's message and the configuration that triggered it.
[[noreturn]] void internal_error(const Configuration& c, const std::exception& e);

// The shared work of many configurations: each distinct schedule and cost model built once (in
// parallel), and per configuration which ones it uses. A configuration is ready when both built.
struct Workbench {
  std::vector<std::optional<Prepared>> prepared;
  std::vector<std::unique_ptr<Schedule>> schedules;  // nullptr: failed (the row has the reason)
  std::vector<std::unique_ptr<CostModel>> costs;
  std::vector<int> schedule_of, cost_of;  // per configuration, -1 when not built
  // Per configuration: a designed one not designed, its static memory over the cap under every
  // layout a design may return (design_layouts); its row holds the reason.
  std::vector<bool> static_over_cap;
  bool ready(int i) const { return cost_of[i] >= 0 && costs[cost_of[i]] != nullptr; }
  const Schedule& schedule(int i) const { return *schedules[schedule_of[i]]; }
  const CostModel& cost(int i) const { return *costs[cost_of[i]]; }
};
// Sets rows[i].config, gpus and, for the configurations that fail a check or whose schedule or
// cost model cannot be built, the reason (status Invalid).
Workbench build_workbench(const Study& base, const Profile& profile,
                          const std::vector<Configuration>& configs, const ExploreOptions& options,
                          std::vector<Evaluation>& rows);
// finish() for configuration i of the workbench; an InputError makes the row Invalid; anything
// else is a bug (InternalError naming the configuration), which ends the whole job.
void finish_row(Evaluation& e, const Workbench& wb, int i, const MemoryCap& cap,
                const ExploreOptions& options, Reused* reuse = nullptr);

// finish_if_fits() for configuration i of the workbench, as finish_row: true when the row is
// final (simulated, or Invalid), false when it is over the cap before timing.
bool finish_row_if_fits(Evaluation& e, const Workbench& wb, int i, const MemoryCap& cap,
                        const ExploreOptions& options);

struct Ticker;
// finish_row for the configurations `todo` (workbench indices) into rows[k], on options.jobs
// threads, largest first. With options.retime the configurations of one schedule form runs, each
// taken by one thread and evaluated in turn, re-timing the DAG of the one before it.
void finish_rows(std::vector<Evaluation>& rows, const Workbench& wb, const std::vector<int>& todo,
                 const MemoryCap& cap, const ExploreOptions& options, Ticker& ticker);

// Sharing among processes (distribute.cpp). The ops estimate behind estimated_cost (no checks).
double estimated_ops(const Study& base, const Configuration& c);
// The indices (into `costs`) this process evaluates.
std::vector<int> share(const ProcessGroup& group, const std::vector<double>& costs);
// The least of every process's value.
double min_all(const ProcessGroup& group, double value);
// rows[indices[k]] is evaluated by the process assign_by_cost(costs, size)[k]; afterwards every
// process holds every one of them. A no-op for one process.
void exchange_rows(const ProcessGroup& group, const std::vector<double>& costs,
                   const std::vector<int>& indices, std::vector<Evaluation>& rows);

// Runs f(i) for i in [0, n) on `jobs` threads (0 = all cores); each index exactly once. The first
// exception (lowest index) is rethrown after all threads finish.
template <typename F>
void parallel_for(int n, int jobs, F&& f);

int resolve_jobs(int jobs);

// The size guard on what rows keep until a sweep or search ends (size_limit.hpp: kKeptBytesPerOp
// per estimated op, kKeptBytesPerRow per row): throws InputError(command, "size", ...) naming
// `rows_text` ("5000 rows") and `way_out` when they exceed kDefaultMaxSimulationBytes.
void check_rows_kept(const std::string& command, double ops, std::size_t rows,
                     const std::string& rows_text, const std::string& way_out);

// Calls options.progress (if set) once per finished task, one call at a time, from any thread.
struct Ticker {
  const ExploreOptions& options;
  int total = 0;
  std::mutex mutex{};
  int done = 0;
  void tick() {
    if (!options.progress) return;
    std::lock_guard<std::mutex> lock(mutex);
    options.progress(++done, total);
  }
};

}  // namespace braid::explore

#include "parallel_for.inl"
