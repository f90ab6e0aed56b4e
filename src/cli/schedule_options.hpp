// The options that pick a schedule on the command line: --schedule NAME with its sizes (--pp,
// --microbatches, --vpp, --group-size, --offload-fraction), or --schedule-csv FILE (a PyTorch
// compute-only CSV). Parsed into ScheduleArgs, then resolved into a validated Schedule; every
// misuse is an InputError naming the option.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "braid/schedule.hpp"

namespace braid::cli {

struct ScheduleArgs {
  std::string name;  // --schedule
  std::string csv;   // --schedule-csv
  std::string file;  // --schedule-file (DESIGN §8 JSON)
  std::string p2p_runtime = braid::name(P2pRuntime::PostedAhead);  // --p2p-runtime (--schedule-csv)
  ScheduleOptions options;
  // Set by add_schedule_options, read after parsing to tell given options from defaults.
  CLI::Option* pp = nullptr;
  CLI::Option* microbatches = nullptr;
  CLI::Option* vpp = nullptr;
  CLI::Option* group_size = nullptr;
  CLI::Option* offload_fraction = nullptr;
  CLI::Option* offload = nullptr;
  CLI::Option* runtime = nullptr;
};

void add_schedule_options(CLI::App& cmd, ScheduleArgs& args);
// --p2p-runtime NAME: the runtime that runs the order of a --schedule-csv (the CSV holds compute
// only); `runtime` holds its name, checked against the known ones.
CLI::Option* add_p2p_runtime_option(CLI::App& cmd, std::string& runtime);
// Builds (or imports) the schedule; throws InputError on bad input.
Schedule resolve_schedule(const ScheduleArgs& args);
// Reads a --schedule-file (DESIGN §8 JSON), validated; InputError when it cannot be opened or read.
Schedule read_schedule_file(const std::string& path);

// Which schedule options the user gave (not their defaults).
struct GivenOptions {
  bool vpp = false, group_size = false, offload_fraction = false, offload = false;
};
// The same rule in every command: an option the schedule `name` does not use is an error naming
// it (--vpp on a schedule with fixed chunks, --group-size off 1f1b-i, --offload-fraction off
// stp-offload, --offload on stp-offload).
void check_options_apply(const std::string& name, const ScheduleOptions& options,
                         const GivenOptions& given);
// compare: an option no schedule of the list uses is an error.
void check_options_apply_to_any(const std::vector<std::string>& names,
                                const ScheduleOptions& options, const GivenOptions& given);

}  // namespace braid::cli
