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
#include "braid/explore.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "braid/timeline_output.hpp"
#include "schedule_options.hpp"
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
  double mem_cap_gib = -1, mem_margin_gib = -1;  // the memory cap (explore.hpp, MemoryCap)
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
  MemoryCap cap;             // study mode: a rank over it is reported oom
  std::string job_defaults;  // job_defaults_text: the settings taken from the job defaults
};
// `use`: whether the command runs a Mixture-of-Experts model (simulate, compare) or refuses it
// (design; study_options.hpp, ModelUse).
SimulationContext resolve_context(const SimulationArgs& args, ModelUse use = ModelUse::Explore);

// One schedule simulated on the context: everything a command may print or write. The schedule
// itself is not kept: once lowered, its program lives on in the Dag.
struct SimulationResult {
  CostModel cost;
  Dag dag;
  Timeline timeline;
  Report report;
};
ScheduleOptions schedule_options(const SimulationContext& ctx, const SimulationArgs& args);
// The schedule options the user gave (--vpp, --group-size, --offload-fraction, --offload).
GivenOptions given_schedule_options(const SimulationArgs& args);
// The context's cost model (uniform costs or the study's) for that many virtual stages.
CostModel cost_model_for(const SimulationContext& ctx, int virtual_stages);
// `generated`: the schedule is braid's own (make_schedule), so a lowering failure or a deadlock
// is a bug (InternalError); for an imported one (a CSV) it is the file's fault (InputError).
// Pass the schedule with std::move where the caller is done with it (a schedule of thousands of
// instructions is not copied then).
SimulationResult simulate_schedule(const SimulationContext& ctx, Schedule schedule,
                                   bool generated = true);

// A schedule read from a file (--schedule-csv; another file kind can reuse this): in study mode
// the study takes pp and microbatches from it (re-validated: dp follows), so that the file alone
// is enough; an option given on the command line that disagrees is an InputError naming the
// option, the file and the value to give. In uniform-cost mode the sizes must match --pp and
// --microbatches. `option` names the file's option in messages.
// The option checks of adopt_file_schedule() alone, for use before the context is resolved (so
// that a conflicting --pp is named as such, not as a study that does not divide).
void check_file_schedule(const SimulationArgs& args, const Schedule& schedule,
                         const std::string& option, const std::string& file);
void adopt_file_schedule(SimulationContext& ctx, const SimulationArgs& args,
                         const Schedule& schedule, const std::string& option,
                         const std::string& file);
// Reads and validates a PyTorch compute-only CSV (microbatches inferred from the file), run by
// `runtime` (the name add_p2p_runtime_option accepts).
Schedule read_schedule_csv(const std::string& path, const std::string& runtime);
// --p2p-runtime given without a --schedule-csv to apply to: an InputError.
void check_p2p_runtime_applies(const CLI::Option* runtime, bool has_csv);

// Study mode: "setting: <study_setting>" and the memory cap line, for the text headers.
std::string setting_header(const SimulationContext& ctx);

}  // namespace braid::cli

namespace braid::cli {

// --trace / --svg / --html / --report-data and the SVG's --width, --from, --to, --detail, --labels
// (src/cli/timeline_files.cpp): the paths are checked writable and the options parsed before any
// work; after the simulation the files are written atomically (empty paths: not asked for).
struct TimelineFiles {
  std::string trace, svg, html, report_data;
  std::string from, to, labels = "mb", detail = "auto";
  SvgOptions svg_options;
  bool any() const;
};
void add_timeline_options(CLI::App& cmd, TimelineFiles& files);
void check_timeline_outputs(TimelineFiles& files);  // also fills svg_options
void write_timeline_outputs(const SimulationResult& result, const TimelineFiles& files);

}  // namespace braid::cli
