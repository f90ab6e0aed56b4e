// build_workbench: the cheap checks of every configuration, then each distinct schedule and cost
// model built once, in parallel. A sweep over tp, seq, mbs, sp and recompute shares one schedule
// per (name, pp, vpp, m); 1f1b-i with vpp 2 and the V schedules share one cost model.
// finish_rows: the configurations that are ready, one task each (with ExploreOptions::retime, as
// runs of one schedule that re-time one DAG).
#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "designed.hpp"
#include "pipeline.hpp"

namespace braid::explore {

Workbench build_workbench(const Study& base, const Profile& profile,
                          const std::vector<Configuration>& configs, const ExploreOptions& options,
                          std::vector<Evaluation>& rows) {
  const int n = static_cast<int>(configs.size());
  Workbench wb;
  wb.prepared.resize(n);
  wb.schedule_of.assign(n, -1);
  wb.cost_of.assign(n, -1);
  wb.static_over_cap.assign(n, false);
  for (int i = 0; i < n; ++i) {
    Evaluation& e = rows[i];
    e = Evaluation{};
    e.config = configs[i];
    e.gpus = base.cluster.gpus();
    wb.prepared[i] = prepare(base, configs[i], options, e.reason);
  }

  // Schedules.
  std::map<ScheduleKey, int> schedule_index;
  std::vector<int> owner;  // a configuration that needs each one
  for (int i = 0; i < n; ++i) {
    if (!wb.prepared[i] || is_designed(configs[i].schedule)) continue;  // designed below
    auto [it, added] = schedule_index.emplace(schedule_key(configs[i], wb.prepared[i]->schedule),
                                              static_cast<int>(schedule_index.size()));
    if (added) owner.push_back(i);
    wb.schedule_of[i] = it->second;
  }
  wb.schedules.resize(owner.size());
  std::vector<std::string> errors(owner.size());
  parallel_for(static_cast<int>(owner.size()), options.jobs, [&](int s) {
    const int i = owner[s];
    try {
      wb.schedules[s] =
          std::make_unique<Schedule>(make_schedule(configs[i].schedule, wb.prepared[i]->schedule));
    } catch (const InputError& e) {
      errors[s] = reason_of(e);
    } catch (const std::exception& e) {
      internal_error(configs[i], e);
    }
  });
  for (int i = 0; i < n; ++i) {
    if (wb.schedule_of[i] < 0 || wb.schedules[wb.schedule_of[i]]) continue;
    rows[i].reason = errors[wb.schedule_of[i]];
    wb.schedule_of[i] = -1;
  }

  // Cost models.
  std::map<CostKey, int> cost_index;
  owner.clear();
  for (int i = 0; i < n; ++i) {
    if (wb.schedule_of[i] < 0) continue;
    auto [it, added] =
        cost_index.emplace(cost_key(wb.prepared[i]->study, wb.schedule(i).virtual_stages()),
                           static_cast<int>(cost_index.size()));
    if (added) owner.push_back(i);
    wb.cost_of[i] = it->second;
  }
  wb.costs.resize(owner.size());
  errors.assign(owner.size(), "");
  parallel_for(static_cast<int>(owner.size()), options.jobs, [&](int c) {
    const int i = owner[c];
    try {
      wb.costs[c] = std::make_unique<CostModel>(
          build_cost_model(wb.prepared[i]->study, profile, wb.schedule(i).virtual_stages()));
    } catch (const InputError& e) {
      errors[c] = reason_of(e);
    } catch (const std::exception& e) {
      internal_error(configs[i], e);
    }
  });
  for (int i = 0; i < n; ++i) {
    if (wb.cost_of[i] < 0 || wb.costs[wb.cost_of[i]]) continue;
    rows[i].reason = errors[wb.cost_of[i]];
    wb.cost_of[i] = -1;
  }
  design_schedules(wb, profile, configs, options, rows);
  return wb;
}

namespace {

// Runs `finish` on row `e`: bad input marks the row invalid with its reason; a bug of ours stays
// one (InternalError), any other exception becomes one naming the row.
template <class Finish>
void guarded(Evaluation& e, Finish&& finish) {
  try {
    finish();
  } catch (const InputError& err) {
    e.status = RowStatus::Invalid;
    e.reason = reason_of(err);
    e.report = Report{};
  } catch (const InternalError&) {
    throw;
  } catch (const std::exception& err) {
    internal_error(e.config, err);
  }
}

}  // namespace

void finish_row(Evaluation& e, const Workbench& wb, int i, const MemoryCap& cap,
                const ExploreOptions& options, Reused* reuse) {
  guarded(e, [&] {
    finish(e, wb.prepared[i]->study, wb.schedule(i), wb.cost(i), cap, options, reuse);
  });
}

bool finish_row_if_fits(Evaluation& e, const Workbench& wb, int i, const MemoryCap& cap,
                        const ExploreOptions& options) {
  bool fits = true;  // an invalid row is finished: nothing to simulate later
  guarded(e, [&] {
    fits = finish_if_fits(e, wb.prepared[i]->study, wb.schedule(i), wb.cost(i), cap, options);
  });
  return fits;
}

namespace {

// The work of lowering and simulating a configuration, for the order of the tasks.
double size_of(const Schedule& s) { return static_cast<double>(s.microbatches) * s.pp * s.vpp; }

// Runs of configurations that share a schedule, in an order where the structure of the DAG
// (its collectives, recomputation, gradient buckets) changes least from one to the next:
// recomputation, sequence parallelism and tp outermost; seq and mbs change costs alone.
std::vector<std::vector<int>> retime_runs(const Workbench& wb, const std::vector<int>& todo,
                                          int threads) {
  std::vector<int> order = todo;
  auto key = [&](int k) {
    const Study& s = wb.prepared[k]->study;
    return std::tuple{wb.schedule_of[k], s.training.recompute, s.parallel.sequence_parallel,
                      s.parallel.tp, k};
  };
  std::sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  // Runs short enough to keep every thread busy: a run is one thread's.
  const std::size_t longest =
      threads <= 1 ? order.size()
                   : std::max<std::size_t>(1, (order.size() + 4 * threads - 1) / (4 * threads));
  std::vector<std::vector<int>> runs;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || wb.schedule_of[order[i]] != wb.schedule_of[order[i - 1]] ||
        runs.back().size() >= longest)
      runs.emplace_back();
    runs.back().push_back(order[i]);
  }
  std::stable_sort(runs.begin(), runs.end(), [&](const auto& a, const auto& b) {
    return size_of(wb.schedule(a[0])) * static_cast<double>(a.size()) >
           size_of(wb.schedule(b[0])) * static_cast<double>(b.size());
  });
  return runs;
}

}  // namespace

void finish_rows(std::vector<Evaluation>& rows, const Workbench& wb, const std::vector<int>& todo,
                 const MemoryCap& cap, const ExploreOptions& options, Ticker& ticker) {
  if (options.retime && !options.lower.fold_zero_time) {
    const std::vector<std::vector<int>> runs =
        retime_runs(wb, todo, std::min(resolve_jobs(options.jobs), static_cast<int>(todo.size())));
    parallel_for(static_cast<int>(runs.size()), options.jobs, [&](int r) {
      Reused reused;  // the DAG each configuration of the run re-times
      for (const int k : runs[r]) {
        finish_row(rows[k], wb, k, cap, options, &reused);
        ticker.tick();
      }
    });
    return;
  }
  // One task per configuration; the largest go first so that the last task to finish is short.
  std::vector<std::pair<double, int>> order;
  for (int k : todo) order.emplace_back(-size_of(wb.schedule(k)), k);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  parallel_for(static_cast<int>(order.size()), options.jobs, [&](int j) {
    const int k = order[j].second;
    finish_row(rows[k], wb, k, cap, options);
    ticker.tick();
  });
}

}  // namespace braid::explore
