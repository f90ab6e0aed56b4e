// `braid simulate`: one schedule on one study (or on uniform unit costs): the iteration time and
// where every rank's time and memory go, as a table, JSON or CSV.
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "braid/error.hpp"
#include "commands.hpp"
#include "simulation.hpp"

namespace braid::cli {

namespace {

struct SimulateArgs {
  SimulationArgs sim;
  std::string schedule;
  std::string schedule_csv;
  std::string schedule_file;
  bool json = false;
  bool csv = false;
  std::string trace;
  std::string svg;
};

Schedule resolve_schedule(const SimulateArgs& args, const SimulationContext& ctx) {
  if (!args.schedule_file.empty()) {
    if (!args.schedule.empty() || !args.schedule_csv.empty())
      throw InputError("--schedule-file", args.schedule_file,
                       "give one of --schedule, --schedule-csv and --schedule-file");
    return schedule_file_for(ctx, args.schedule_file);
  }
  if (args.schedule.empty() == args.schedule_csv.empty())
    throw InputError("--schedule", args.schedule.empty() ? "missing" : args.schedule,
                     "give either a schedule name or --schedule-csv FILE");
  if (args.schedule.empty()) {
    std::ifstream in(args.schedule_csv);
    if (!in) throw InputError("--schedule-csv", args.schedule_csv, "cannot open the file");
    Schedule s = read_pytorch_csv(in, args.schedule_csv, ctx.microbatches);
    const ValidationResult check = validate(s);
    if (!check.ok()) throw InputError("--schedule-csv", args.schedule_csv, check.error);
    if (s.pp != ctx.pp)
      throw InputError("--schedule-csv", args.schedule_csv,
                       "has " + std::to_string(s.pp) + " ranks but pp is " +
                           std::to_string(ctx.pp) + "; give --pp " + std::to_string(s.pp));
    return s;
  }
  return make_schedule(args.schedule, schedule_options(ctx, args.sim));
}

}  // namespace

void register_simulate(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "simulate one schedule: iteration time, TP/PP bubbles, memory per rank");
  add_simulation_options(*cmd, args->sim);
  cmd->add_option("--schedule", args->schedule, "schedule name (see braid schedule --help)");
  cmd->add_option("--schedule-csv", args->schedule_csv,
                  "PyTorch compute-only schedule CSV to simulate instead of --schedule");
  cmd->add_option("--schedule-file", args->schedule_file,
                  "schedule JSON (braid schedule --json, braid design -o) to simulate instead of "
                  "--schedule");
  auto* json = cmd->add_flag("--json", args->json, "print the report as JSON");
  cmd->add_flag("--csv", args->csv, "print the per-rank report as CSV")->excludes(json);
  cmd->add_option("--trace", args->trace,
                  "write a Chrome trace / Perfetto JSON timeline (one process per rank)");
  cmd->add_option("--svg", args->svg, "write an SVG timeline picture");
  cmd->callback([args] {
    // Output paths are checked before any work so a bad path fails fast and leaves nothing.
    check_timeline_outputs(args->trace, args->svg);
    SimulationContext ctx = resolve_context(args->sim);
    ctx.sim.record_memory = !args->trace.empty() || !args->svg.empty();
    const Schedule schedule = resolve_schedule(*args, ctx);
    const SimulationResult result = simulate_schedule(ctx, schedule);
    write_timeline_outputs(result, args->trace, args->svg);
    if (args->json)
      std::cout << report_json(result.report);
    else if (args->csv)
      std::cout << ranks_csv(result.report);
    else {
      std::cout << simulate_table(result.report);
      if (!result.cost.uniform) std::cout << "\n" << stage_times_table(stage_times(result.cost));
    }
  });
}

}  // namespace braid::cli
