// `designed` in a sweep or search schedule list: per configuration, braid design's schedule
// under the sweep's memory cap, within ExploreOptions::design_budget_s. Not a registry schedule
// (make_schedule does not know it): it needs the configuration's cost model, so the workbench
// designs it after the checks, and shares one design among configurations with the same sizes
// and cost model. Internal to src/explore.
#pragma once

#include <string>
#include <vector>

#include "braid/error.hpp"  // pipeline.hpp names InputError
#include "braid/explore.hpp"
#include "braid/schedule.hpp"
#include "pipeline.hpp"

namespace braid::explore {

bool is_designed(const std::string& schedule);
// Chunks per rank of a designed schedule (its V and loop seeds both use 2).
inline constexpr int kDesignedVpp = 2;
// Candidates a design may simulate: the deterministic budget (the wall-clock one is
// design_budget_s).
inline constexpr int kDesignCandidates = 300;
// The fewest microbatches a designed schedule needs: the least of its seeds'.
int designed_min_microbatches(const ScheduleOptions& options);

// Designs the schedule of every configuration of `configs` whose schedule is `designed` and that
// passed prepare(), and gives it its schedule and cost model in `wb`; a design that finds nothing
// under the cap leaves the row Invalid with the reason.
void design_schedules(Workbench& wb, const Profile& profile,
                      const std::vector<Configuration>& configs, const ExploreOptions& options,
                      std::vector<Evaluation>& rows);

}  // namespace braid::explore
