// The shared path of `simulate` and `compare`: options that pick the cost model (a study, or
// uniform unit costs) and the engine settings, then schedule -> cost model -> DAG -> timeline ->
// report for one schedule name. Thin glue over the library; all checks raise InputError.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "study_options.hpp"

namespace braid::cli {

struct SimulationArgs {
  StudyArgs study;
  std::string unit_costs;  // "tf,tb,tw,tar[,ma]": uniform-cost mode, no study
  std::string p2p;         // "", "blocking" or "async"
  bool no_contention = false;
  int group_size = 0;
  double offload_fraction = 1.0;
  bool force = false;  // run even above the size guard's memory limit (size_limit.hpp)
  CLI::Option* study_option = nullptr;
  CLI::Option* group_size_option = nullptr;
  CLI::Option* offload_fraction_option = nullptr;
};

// --unit-costs, --p2p, --no-contention, --group-size, --offload-fraction and the study options.
void add_simulation_options(CLI::App& cmd, SimulationArgs& args);

// The cost side, resolved once per command: the study (or uniform costs) and its profile. Refuses
// (InputError) a request whose simulation is estimated beyond the size limits (size_limit.hpp)
// unless --force.
struct SimulationContext {
  std::string study_name;  // "uniform" in uniform-cost mode
  std::optional<Study> study;
  std::optional<Profile> profile;
  std::optional<UniformCosts> uniform;
  int pp = 1, vpp = 2, microbatches = 1;
  LowerOptions lower;
  SimOptions sim;
};
SimulationContext resolve_context(const SimulationArgs& args);

// One schedule simulated on the context: everything a command may print or write.
struct SimulationResult {
  Schedule schedule;
  CostModel cost;
  Dag dag;
  Timeline timeline;
  Report report;
};
ScheduleOptions schedule_options(const SimulationContext& ctx, const SimulationArgs& args);
SimulationResult simulate_schedule(const SimulationContext& ctx, const Schedule& schedule);

// A --schedule-file for this context: read, validated, and its pp and microbatches checked against
// the study's (or --pp / --microbatches in uniform-cost mode). Throws InputError.
Schedule schedule_file_for(const SimulationContext& ctx, const std::string& path);

// Parses "tf,tb,tw,tar[,ma]"; throws InputError naming --unit-costs.
UniformCosts parse_unit_costs(const std::string& text);

}  // namespace braid::cli

namespace braid::cli {

// --trace / --svg (src/cli/timeline_files.cpp): the paths are checked writable before any work;
// after the simulation the trace and SVG are written atomically (empty paths: not asked for).
void check_timeline_outputs(const std::string& trace, const std::string& svg);
void write_timeline_outputs(const SimulationResult& result, const std::string& trace,
                            const std::string& svg);

}  // namespace braid::cli
