// `braid simulate`: one schedule on one study (or on uniform unit costs): the iteration time and
// where every rank's time and memory go, as a table, JSON or CSV.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "braid/error.hpp"
#include "commands.hpp"
#include "emit_options.hpp"
#include "simulation.hpp"

namespace braid::cli {

namespace {

struct SimulateArgs {
  SimulationArgs sim;
  std::string schedule;
  std::string schedule_csv;
  std::string schedule_file;
  std::string p2p_runtime = name(P2pRuntime::PostedAhead);
  CLI::Option* runtime = nullptr;
  bool json = false;
  bool csv = false;
  TimelineFiles files;
  EmitArgs emit;
};

// The schedule from --schedule-csv (read before the context, whose pp and m it then sets), else
// by name.
Schedule resolve_schedule(const SimulateArgs& args, SimulationContext& ctx,
                          const std::optional<Schedule>& from_file) {
  if (from_file) {
    const bool csv = !args.schedule_csv.empty();
    adopt_file_schedule(ctx, args.sim, *from_file, csv ? "--schedule-csv" : "--schedule-file",
                        csv ? args.schedule_csv : args.schedule_file);
    return *from_file;
  }
  const ScheduleOptions options = schedule_options(ctx, args.sim);
  check_options_apply(args.schedule, options, given_schedule_options(args.sim));
  return make_schedule(args.schedule, options);
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
      "  braid simulate --study default --schedule 1f1b-i --emit megatron\n"
      "See docs/simulator.md and docs/outputs.md.");
  add_simulation_options(*cmd, args->sim);
  cmd->add_option("--schedule", args->schedule, "schedule name (see braid schedule --help)");
  cmd->add_option("--schedule-csv", args->schedule_csv,
                  "PyTorch compute-only schedule CSV to simulate instead of --schedule; pp and "
                  "microbatches come from the file");
  cmd->add_option("--schedule-file", args->schedule_file,
                  "schedule JSON (braid schedule --json, braid design -o) to simulate instead of "
                  "--schedule; pp and microbatches come from the file");
  args->runtime = add_p2p_runtime_option(*cmd, args->p2p_runtime);
  auto* json = cmd->add_flag("--json", args->json, "print the report as JSON");
  cmd->add_flag("--csv", args->csv, "print the per-rank report as CSV")->excludes(json);
  add_timeline_options(*cmd, args->files);
  add_emit_options(*cmd, args->emit);
  cmd->callback([args] {
    // Output paths are checked before any work so a bad path fails fast and leaves nothing.
    check_timeline_outputs(args->files);
    check_emit(args->emit, args->json || args->csv, args->json ? "--json" : "--csv");
    const int given = static_cast<int>(!args->schedule.empty()) +
                      static_cast<int>(!args->schedule_csv.empty()) +
                      static_cast<int>(!args->schedule_file.empty());
    if (given != 1)
      throw InputError("--schedule", args->schedule.empty() ? "missing" : args->schedule,
                       "give one of a schedule name, --schedule-csv FILE and --schedule-file FILE");
    check_p2p_runtime_applies(args->runtime, !args->schedule_csv.empty());
    std::optional<Schedule> from_file;
    if (!args->schedule_csv.empty()) {
      from_file = read_schedule_csv(args->schedule_csv, args->p2p_runtime);
      check_file_schedule(args->sim, *from_file, "--schedule-csv", args->schedule_csv);
    } else if (!args->schedule_file.empty()) {
      from_file = read_schedule_file(args->schedule_file);
      check_file_schedule(args->sim, *from_file, "--schedule-file", args->schedule_file);
    }
    SimulationContext ctx = resolve_context(args->sim, ModelUse::Simulate);
    ctx.sim.record_memory = args->files.any();
    ctx.lower.fold_zero_time = !ctx.sim.record_memory;
    if (!args->emit.format.empty() && !ctx.study)
      throw InputError("--emit", args->emit.format,
                       "needs a study: uniform unit costs have no model to launch");
    Schedule schedule = resolve_schedule(*args, ctx, from_file);
    // The name asked for (not "<name>+offload"), and the chunks it runs with.
    const LaunchSchedule launch{args->schedule.empty() ? schedule.name : args->schedule,
                                schedule.vpp};
    const SimulationResult result =
        simulate_schedule(ctx, std::move(schedule), !from_file.has_value());
    write_timeline_outputs(result, args->files);
    if (args->json)
      std::cout << report_json(result.report, result.cost.moe_load);
    else if (args->csv)
      std::cout << ranks_csv(result.report);
    else {
      std::cout << setting_header(ctx) << simulate_table(result.report, result.cost.moe_load);
      if (!result.cost.uniform) std::cout << "\n" << stage_times_table(stage_times(result.cost));
    }
    if (ctx.study) std::cout << emit_launch(args->emit, *ctx.study, launch);
  });
}

}  // namespace braid::cli
