// --emit megatron|torchtitan and --emit-file on `simulate` and `search`: the layout as launch
// arguments of another trainer (launch_args.hpp; docs/megatron.md, "Launch arguments out").
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "braid/config.hpp"
#include "braid/launch_args.hpp"

namespace braid::cli {

struct EmitArgs {
  std::string format;  // "" (none), megatron or torchtitan
  std::string file;    // "": printed after the report
};

void add_emit_options(CLI::App& cmd, EmitArgs& args);
// Before any work: --emit-file needs --emit and a writable path; with `machine_output` (--json,
// --csv) the fragment needs --emit-file, so that stdout stays one format. Throws InputError.
void check_emit(const EmitArgs& args, bool machine_output, const char* machine_option);
// The fragment of `study` run by `schedule`: written to --emit-file (returns ""), or returned to
// be printed after the report (with a blank line before it). "" when no --emit was given.
std::string emit_launch(const EmitArgs& args, const Study& study, const LaunchSchedule& schedule);

}  // namespace braid::cli
