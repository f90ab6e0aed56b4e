// --emit and --emit-file (emit_options.hpp).
#include "emit_options.hpp"

#include "braid/error.hpp"
#include "output.hpp"

namespace braid::cli {

void add_emit_options(CLI::App& cmd, EmitArgs& args) {
  cmd.add_option("--emit", args.format,
                 "print the layout as launch arguments after the report: megatron "
                 "(pretrain_gpt.py flags) or torchtitan (a job-config TOML fragment)")
      ->check(CLI::IsMember(launch_format_names()));
  cmd.add_option("--emit-file", args.file,
                 "write the --emit fragment to this file instead of printing it");
}

void check_emit(const EmitArgs& args, bool machine_output, const char* machine_option) {
  if (!args.file.empty() && args.format.empty())
    throw InputError("--emit-file", args.file, "needs --emit megatron or --emit torchtitan");
  if (args.format.empty()) return;
  if (args.file.empty() && machine_output)
    throw InputError("--emit", args.format,
                     std::string("with ") + machine_option +
                         " give --emit-file FILE, so that stdout stays one format");
  if (!args.file.empty()) check_writable("--emit-file", args.file);
}

std::string emit_launch(const EmitArgs& args, const Study& study, const LaunchSchedule& schedule) {
  const std::optional<LaunchFormat> format = parse_launch_format(args.format);
  if (!format) return "";
  const std::string fragment = launch_fragment(*format, study, schedule);
  if (args.file.empty()) return "\n" + fragment;
  write_file("--emit-file", args.file, fragment);
  return "";
}

}  // namespace braid::cli
