// `braid compare`: every schedule on the same study, side by side — iteration time, speed-up
// relative to 1f1b-i, TP and PP bubble rates, MFU, throughput and peak memory, the best marked.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "commands.hpp"
#include "simulation.hpp"

namespace braid::cli {

namespace {

// Used when the study names none: the schedules the README compares, those that exist.
const std::vector<std::string> kDefaultSchedules = {"1f1b-i", "zb-v", "stp", "stp-offload",
                                                    "dualpipe-v"};

struct CompareArgs {
  SimulationArgs sim;
  std::vector<std::string> schedules;
  std::vector<std::string> schedule_files;
  bool json = false;
  bool csv = false;
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
  cmd->callback([args] {
    const SimulationContext ctx = resolve_context(args->sim);
    const bool explicit_list = !args->schedules.empty();
    std::vector<std::string> names = args->schedules;
    if (names.empty() && ctx.study) names = ctx.study->schedules;
    if (names.empty()) names = kDefaultSchedules;
    std::vector<Report> reports;
    for (const std::string& name : names) {
      if (!known(name)) {
        if (explicit_list) make_schedule(name, schedule_options(ctx, args->sim));  // names them
        continue;  // a default that this build does not have
      }
      // With --offload (training.offload) every schedule but stp-offload runs twice: without
      // and with offloading ("<name>+offload"), so peak memory and throughput show side by side.
      ScheduleOptions options = schedule_options(ctx, args->sim);
      std::vector<double> offloads{0.0};
      if (options.offload > 0 && name != "stp-offload") offloads.push_back(options.offload);
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
        reports.push_back(simulate_schedule(ctx, schedule).report);
      }
    }
    for (const std::string& file : args->schedule_files)
      reports.push_back(simulate_schedule(ctx, schedule_file_for(ctx, file)).report);
    if (reports.empty())
      throw InputError("--schedules", "default", "no schedule applies to this study");
    if (args->json)
      std::cout << reports_json(reports);
    else if (args->csv)
      std::cout << reports_csv(reports);
    else
      std::cout << compare_table(reports);
  });
}

}  // namespace braid::cli
