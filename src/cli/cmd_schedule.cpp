// `braid schedule`: prints a schedule's per-rank instruction lists — DESIGN §3's text notation or
// DESIGN §8's JSON — and its peak in-flight activations per rank.
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

#include "braid/schedule.hpp"
#include "commands.hpp"
#include "schedule_options.hpp"

namespace braid::cli {

namespace {

std::string join(const std::vector<int>& values) {
  std::string out;
  for (int v : values) out += (out.empty() ? "" : " ") + std::to_string(v);
  return out;
}

}  // namespace

void register_schedule(CLI::App& app) {
  auto args = std::make_shared<ScheduleArgs>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "schedule", "print a pipeline schedule: per-rank instructions and peak activations");
  cmd->footer(
      "Examples:\n"
      "  braid schedule --schedule stp --pp 4 --microbatches 12\n"
      "  braid schedule --schedule 1f1b-i --pp 4 --vpp 2 --microbatches 16 --json\n"
      "See docs/schedules.md.");
  add_schedule_options(*cmd, *args);
  cmd->add_flag("--json", *json,
                "print the per-rank instructions as JSON (schema in docs/schedules.md)");
  cmd->callback([args, json] {
    Schedule s = resolve_schedule(*args);
    ValidationResult check = validate(s);
    if (!check.ok()) throw std::logic_error("generated schedule is invalid: " + check.error);
    if (*json) {
      std::cout << to_json(s) << "\n";
      return;
    }
    std::cout << "schedule " << s.name << ": pp " << s.pp << ", vpp " << s.vpp << ", microbatches "
              << s.microbatches << ", placement " << (s.placement == Placement::V ? "V" : "loop")
              << "\n";
    for (const RankProgram& rank : s.ranks)
      std::cout << "rank " << rank.rank << ": " << format_program(rank) << "\n";
    std::cout << "peak in-flight activations per rank (chunk-microbatches): "
              << join(check.peak_in_flight) << "\n";
    if (check.peak_on_device != check.peak_in_flight)
      std::cout << "peak on-device activations per rank after offloading: "
                << join(check.peak_on_device) << "\n";
  });
}

}  // namespace braid::cli
