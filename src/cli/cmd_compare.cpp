// `braid compare`: every schedule on the same study, side by side — iteration time, speed-up
// relative to 1f1b-i, TP and PP bubble rates, MFU, throughput and peak memory, the best marked.
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/html_report.hpp"
#include "commands.hpp"
#include "option_values.hpp"
#include "output.hpp"
#include "simulation.hpp"

namespace braid::cli {

namespace {

// Used when the study names none: the schedules the README compares, those that exist.
const std::vector<std::string> kDefaultSchedules = {"1f1b-i", "zb-v", "stp", "stp-offload",
                                                    "dualpipe-v"};

struct CompareArgs {
  SimulationArgs sim;
  std::vector<std::string> schedules;
  std::vector<std::string> schedule_csv;    // the user's own schedules, beside the named ones
  std::vector<std::string> schedule_files;  // likewise, schedule JSON files (braid design -o)
  bool json = false;
  bool csv = false;
  std::string html;  // --html FILE: the runs side by side on one time axis
  std::string p2p_runtime = name(P2pRuntime::PostedAhead);  // of the --schedule-csv files
  CLI::Option* runtime = nullptr;
};

bool known(const std::string& name) {
  for (const std::string& n : schedule_names())
    if (n == name) return true;
  return false;
}

}  // namespace

void register_compare(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "simulate several schedules on the same study and compare them side by side");
  add_simulation_options(*cmd, args->sim);
  cmd->add_option("--schedules", args->schedules,
                  "comma-separated schedule names (default: the study's list, else "
                  "1f1b-i,zb-v,stp,stp-offload,dualpipe-v)")
      ->delimiter(',');
  cmd->add_option("--schedule-file", args->schedule_files,
                  "schedule JSON file(s) (braid design -o) compared after the named schedules");
  auto* json = cmd->add_flag("--json", args->json, "print the reports as JSON");
  cmd->add_flag("--csv", args->csv, "print one CSV row per schedule")->excludes(json);
  cmd->add_option("--schedule-csv", args->schedule_csv,
                  "a PyTorch compute-only schedule CSV to compare beside the named schedules "
                  "(repeatable); the study takes pp and microbatches from the first file");
  args->runtime = add_p2p_runtime_option(*cmd, args->p2p_runtime);
  cmd->add_option("--html", args->html,
                  "write an interactive HTML report: the schedules' timelines on one time axis, "
                  "per-rank breakdowns, memory over time")
      ->check(file_name());
  cmd->footer(
      "Examples:\n"
      "  braid compare --study default\n"
      "  braid compare --study default --schedules 1f1b-i,stp --seq 8192 --sp on\n"
      "  braid compare --study default --schedules stp,zb-v --schedule-csv my-schedule.csv\n"
      "See docs/schedules.md and docs/outputs.md.");
  cmd->callback([args] {
    if (!args->html.empty()) check_writable("--html", args->html);
    // The user's own schedules fix pp and m (the first file); later files must agree.
    std::vector<Schedule> own;
    std::vector<std::pair<std::string, std::string>> own_files;  // (option, path)
    auto add_own = [&](Schedule s, const char* option, const std::string& file) {
      if (own.empty()) {
        check_file_schedule(args->sim, s, option, file);
      } else if (s.pp != own.front().pp || s.microbatches != own.front().microbatches) {
        throw InputError(option, file,
                         "has pp " + std::to_string(s.pp) + " and " +
                             std::to_string(s.microbatches) + " microbatches but " +
                             own_files.front().second + " has pp " +
                             std::to_string(own.front().pp) + " and " +
                             std::to_string(own.front().microbatches) +
                             "; the schedules of one comparison share pp and m");
      }
      own.push_back(std::move(s));
      own_files.emplace_back(option, file);
    };
    check_p2p_runtime_applies(args->runtime, !args->schedule_csv.empty());
    for (const std::string& file : args->schedule_csv)
      add_own(read_schedule_csv(file, args->p2p_runtime), "--schedule-csv", file);
    for (const std::string& file : args->schedule_files)
      add_own(read_schedule_file(file), "--schedule-file", file);
    SimulationContext ctx = resolve_context(args->sim, ModelUse::Simulate);
    if (!own.empty())
      adopt_file_schedule(ctx, args->sim, own.front(), own_files.front().first,
                          own_files.front().second);
    ctx.sim.record_memory = !args->html.empty();
    ctx.lower.fold_zero_time = !ctx.sim.record_memory;
    std::vector<std::string> html_runs;
    const bool explicit_list = !args->schedules.empty() || !own.empty();
    std::vector<std::string> names = args->schedules;
    if (names.empty() && own.empty() && ctx.study) names = ctx.study->schedules;
    if (names.empty() && own.empty()) names = kDefaultSchedules;
    check_options_apply_to_any(names, schedule_options(ctx, args->sim),
                               given_schedule_options(args->sim));
    std::vector<Report> reports;
    // The routing is the cost model's, the same for every schedule of the study.
    std::optional<MoeLoadReport> moe_load;
    for (const std::string& name : names) {
      if (!known(name)) {
        if (explicit_list) make_schedule(name, schedule_options(ctx, args->sim));  // names them
        continue;  // a default that this build does not have
      }
      // With --offload (training.offload) every schedule but stp-offload runs twice: without
      // and with offloading ("<name>+offload"), so peak memory and throughput show side by side.
      ScheduleOptions options = schedule_options(ctx, args->sim);
      std::vector<double> offloads{0.0};
      if (options.offload > 0 && !traits(parse_schedule_kind(name)).own_offload)
        offloads.push_back(options.offload);
      for (double offload : offloads) {
        options.offload = offload;
        Schedule schedule;
        try {
          schedule = make_schedule(name, options);
        } catch (const InputError& e) {
          if (explicit_list) throw;
          std::cerr << "braid compare: skipping " << name << ": " << e.what() << "\n";
          break;
        }
        const SimulationResult result = simulate_schedule(ctx, schedule);
        if (!args->html.empty())
          html_runs.push_back(html_run_data(result.dag, result.timeline, result.report));
        reports.push_back(result.report);
        moe_load = result.cost.moe_load;
      }
    }
    for (const Schedule& s : own) {
      const SimulationResult result = simulate_schedule(ctx, s, false);
      moe_load = result.cost.moe_load;
      if (!args->html.empty())
        html_runs.push_back(html_run_data(result.dag, result.timeline, result.report));
      reports.push_back(result.report);
    }
    if (reports.empty())
      throw InputError("--schedules", "default", "no schedule applies to this study");
    if (!args->html.empty())
      write_file("--html", args->html,
                 html_report(html_report_data("braid compare: " + ctx.study_name, html_runs)));
    if (args->json)
      std::cout << reports_json(reports, moe_load);
    else if (args->csv)
      std::cout << reports_csv(reports);
    else
      std::cout << setting_header(ctx) << (moe_load ? moe_load_line(*moe_load) + "\n" : "")
                << compare_table(reports);
  });
}

}  // namespace braid::cli
