// `braid simulate`: one schedule on one study (or on uniform unit costs): the iteration time and
// where every rank's time and memory go, as a table, JSON or CSV.
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
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
  bool json = false;
  bool csv = false;
  std::string trace;
  std::string svg;
};

// The schedule from --schedule-csv (read before the context, whose pp and m it then sets), else
// by name.
Schedule resolve_schedule(const SimulateArgs& args, SimulationContext& ctx,
                          const std::optional<Schedule>& from_file) {
  if (from_file) {
    adopt_file_schedule(ctx, args.sim, *from_file, "--schedule-csv", args.schedule_csv);
    return *from_file;
  }
  return make_schedule(args.schedule, schedule_options(ctx, args.sim));
}

}  // namespace

void register_simulate(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "simulate one schedule: iteration time, TP/PP bubbles, memory per rank");
  cmd->footer(
      "Examples:\n"
      "  braid simulate --study default --schedule stp\n"
      "  braid simulate --study default --schedule 1f1b-i --seq 8192 --sp on --trace t.json\n"
      "  braid simulate --study default --schedule-csv my-schedule.csv --json\n"
      "See docs/simulator.md and docs/outputs.md.");
  add_simulation_options(*cmd, args->sim);
  cmd->add_option("--schedule", args->schedule, "schedule name (see braid schedule --help)");
  cmd->add_option("--schedule-csv", args->schedule_csv,
                  "PyTorch compute-only schedule CSV to simulate instead of --schedule; pp and "
                  "microbatches come from the file");
  auto* json = cmd->add_flag("--json", args->json, "print the report as JSON");
  cmd->add_flag("--csv", args->csv, "print the per-rank report as CSV")->excludes(json);
  cmd->add_option("--trace", args->trace,
                  "write a Chrome trace / Perfetto JSON timeline (one process per rank)");
  cmd->add_option("--svg", args->svg, "write an SVG timeline picture");
  cmd->callback([args] {
    // Output paths are checked before any work so a bad path fails fast and leaves nothing.
    check_timeline_outputs(args->trace, args->svg);
    if (args->schedule.empty() == args->schedule_csv.empty())
      throw InputError("--schedule", args->schedule.empty() ? "missing" : args->schedule,
                       "give either a schedule name or --schedule-csv FILE");
    std::optional<Schedule> from_file;
    if (!args->schedule_csv.empty()) {
      from_file = read_schedule_csv(args->schedule_csv);
      check_file_schedule(args->sim, *from_file, "--schedule-csv", args->schedule_csv);
    }
    SimulationContext ctx = resolve_context(args->sim);
    ctx.sim.record_memory = !args->trace.empty() || !args->svg.empty();
    const Schedule schedule = resolve_schedule(*args, ctx, from_file);
    const SimulationResult result = simulate_schedule(ctx, schedule);
    write_timeline_outputs(result, args->trace, args->svg);
    if (args->json)
      std::cout << report_json(result.report);
    else if (args->csv)
      std::cout << ranks_csv(result.report);
    else {
      std::cout << setting_header(ctx) << simulate_table(result.report);
      if (!result.cost.uniform) std::cout << "\n" << stage_times_table(stage_times(result.cost));
    }
  });
}

}  // namespace braid::cli
