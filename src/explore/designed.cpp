// design_schedules(): one braid design run per distinct (sizes, cost model) among the designed
// configurations, in parallel, each with a fixed seed and candidate count, so that the same sweep
// gives the same rows whenever the candidate count, not the wall-clock budget, ends each design.
#include "designed.hpp"

#include <algorithm>
#include <exception>
#include <limits>
#include <map>
#include <memory>

#include "braid/cost_model.hpp"
#include "braid/design.hpp"
#include "braid/error.hpp"

namespace braid::explore {

namespace {

// What a design depends on: the cost model at the designed number of virtual stages, whose key
// holds the prepared study's parallel and training settings whole (chunks per rank,
// microbatches, offload share).
using DesignKey = CostKey;

DesignProblem design_problem(const Prepared& prepared, const Configuration& c,
                             const Profile& profile, const ExploreOptions& options) {
  DesignProblem problem;
  problem.study = prepared.study.name;
  problem.pp = c.pp;
  problem.vpp = c.vpp;
  problem.microbatches = c.microbatches;
  problem.offload = prepared.study.training.offload;
  problem.lower = options.lower;
  problem.sim = options.sim;
  const Study study = prepared.study;
  problem.cost = [study, profile](int stages) { return build_cost_model(study, profile, stages); };
  return problem;
}

// The least, over the layouts a design may return, of the largest static memory of a rank: when
// it is over the cap, nothing the design could find fits, and the design (which would simulate
// its whole candidate budget to learn that) is not run.
double least_static_bytes(const Prepared& prepared, const Configuration& c,
                          const Profile& profile) {
  double least = std::numeric_limits<double>::infinity();
  std::map<int, CostModel> costs;  // by virtual stages: V and the loop at vpp 2 share one
  for (const DesignLayout& layout : design_layouts({}, c.vpp)) {
    Schedule shape;  // the layout alone: max_static_bytes reads no programs
    shape.pp = c.pp;
    shape.vpp = layout.vpp;
    shape.placement = layout.placement;
    const int stages = shape.virtual_stages();
    auto it = costs.find(stages);
    if (it == costs.end())
      it = costs.emplace(stages, build_cost_model(prepared.study, profile, stages)).first;
    least = std::min(least, max_static_bytes(it->second, shape));
  }
  return least;
}

}  // namespace

bool is_designed(const std::string& schedule) { return schedule == kDesignedName; }

int designed_min_microbatches(const ScheduleOptions& options) {
  int least = 0;
  for (const std::string& name : default_design_seeds()) {
    ScheduleOptions o = options;
    o.vpp = chunks_per_rank(name, o.vpp);
    const int m = min_microbatches(name, o);
    least = least == 0 ? m : std::min(least, m);
  }
  return least;
}

void design_schedules(Workbench& wb, const Profile& profile,
                      const std::vector<Configuration>& configs, const ExploreOptions& options,
                      std::vector<Evaluation>& rows) {
  const int n = static_cast<int>(configs.size());
  std::map<DesignKey, int> index;
  std::vector<int> owner, design_of(n, -1);
  for (int i = 0; i < n; ++i) {
    if (!wb.prepared[i] || !is_designed(configs[i].schedule)) continue;
    const DesignKey key = cost_key(wb.prepared[i]->study, configs[i].pp * configs[i].vpp);
    auto [it, added] = index.emplace(key, static_cast<int>(owner.size()));
    if (added) owner.push_back(i);
    design_of[i] = it->second;
  }
  if (owner.empty()) return;
  std::vector<std::unique_ptr<Schedule>> schedules(owner.size());
  std::vector<std::unique_ptr<CostModel>> costs(owner.size());
  std::vector<std::string> errors(owner.size());
  std::vector<char> over_cap(owner.size(), 0);  // char: written from several threads
  const double cap = memory_cap(profile, options).cap_bytes;
  parallel_for(static_cast<int>(owner.size()), options.jobs, [&](int d) {
    const int i = owner[d];
    const Prepared& prepared = *wb.prepared[i];
    try {
      if (const double least = least_static_bytes(prepared, configs[i], profile); least > cap) {
        errors[d] = "designed: " + static_over_cap_reason(least, cap, "designed");
        over_cap[d] = 1;
        return;
      }
      const DesignProblem problem = design_problem(prepared, configs[i], profile, options);
      DesignOptions o;
      o.mem_cap_bytes = cap;
      o.max_candidates = kDesignCandidates;
      o.budget_s = options.design_budget_s;
      o.seed = 1;
      DesignResult result = design(problem, o);
      costs[d] = std::make_unique<CostModel>(
          build_cost_model(prepared.study, profile, result.schedule.virtual_stages()));
      schedules[d] = std::make_unique<Schedule>(std::move(result.schedule));
    } catch (const InputError& e) {
      errors[d] = "designed: " + reason_of(e);
    } catch (const std::exception& e) {
      internal_error(configs[i], e);
    }
  });
  // Appended after the workbench's own schedules and cost models.
  const int schedule_base = static_cast<int>(wb.schedules.size());
  const int cost_base = static_cast<int>(wb.costs.size());
  for (std::size_t d = 0; d < owner.size(); ++d) {
    wb.schedules.push_back(std::move(schedules[d]));
    wb.costs.push_back(std::move(costs[d]));
  }
  for (int i = 0; i < n; ++i) {
    if (design_of[i] < 0) continue;
    if (!wb.schedules[schedule_base + design_of[i]]) {
      rows[i].reason = errors[design_of[i]];
      wb.static_over_cap[i] = over_cap[design_of[i]] != 0;
      continue;
    }
    wb.schedule_of[i] = schedule_base + design_of[i];
    wb.cost_of[i] = cost_base + design_of[i];
  }
}

}  // namespace braid::explore
