// build_workbench: the cheap checks of every configuration, then each distinct schedule and cost
// model built once, in parallel. A sweep over tp, seq, mbs, sp and recompute shares one schedule
// per (name, pp, vpp, m); 1f1b-i with vpp 2 and the V schedules share one cost model.
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

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

void finish_row(Evaluation& e, const Workbench& wb, int i, double cap,
                const ExploreOptions& options) {
  try {
    finish(e, wb.prepared[i]->study, wb.schedule(i), wb.cost(i), cap, options);
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

}  // namespace braid::explore
