// libFuzzer target: the command-line options of the simulation commands (simulate, compare and
// the sweep to come share them: src/cli/simulation.hpp), parsed by CLI11 through the real option
// code, then resolved like a command would: the study with its overrides, the profile, the
// uniform costs, the size guard and the schedule (built only when small). Nothing is simulated.
// The input is argv, one argument per line. Bad input may only surface as a CLI11 ParseError or an
// InputError; any other exception, a crash or a sanitizer report is a bug. Seeds: tools/fuzz.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "braid/error.hpp"
#include "braid/schedule.hpp"
#include "simulation.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args = {"braid"};
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    args.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  if (args.size() > 64) return 0;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());

  braid::cli::SimulationArgs sim;
  std::string schedule = "1f1b";
  CLI::App app{"braid (fuzz)"};
  app.require_subcommand(1);
  for (const char* name : {"simulate", "compare"}) {
    CLI::App* cmd = app.add_subcommand(name);
    braid::cli::add_simulation_options(*cmd, sim);
    cmd->add_option("--schedule", schedule);
  }
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
    const braid::cli::SimulationContext ctx = braid::cli::resolve_context(sim);
    const braid::ScheduleOptions options = braid::cli::schedule_options(ctx, sim);
    if (static_cast<double>(options.pp) * options.vpp * options.microbatches <= 4096)
      braid::make_schedule(schedule, options);
  } catch (const CLI::ParseError&) {
  } catch (const braid::InputError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_cli: %s escaped: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
  return 0;
}
