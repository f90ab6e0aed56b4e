// `braid export`: writes a schedule as a file another tool runs. Today one format: PyTorch
// torch.distributed.pipelining's compute-only CSV (docs/schedules.md says which versions read it).
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "braid/error.hpp"
#include "braid/schedule.hpp"
#include "commands.hpp"
#include "option_values.hpp"
#include "output.hpp"
#include "schedule_options.hpp"

namespace braid::cli {

void register_export(CLI::App& app) {
  struct Args {
    ScheduleArgs schedule;
    std::string format;
    std::string output;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("export", "write a schedule for a training framework");
  cmd->footer(
      "Examples:\n"
      "  braid export --format pytorch-csv --schedule zb-v --pp 4 --microbatches 8 -o zbv.csv\n"
      "  braid export --format pytorch-csv --schedule-file designed.json -o designed.csv\n"
      "See docs/schedules.md.");
  add_schedule_options(*cmd, args->schedule);
  cmd->add_option("--format", args->format, "output format: pytorch-csv")->required();
  cmd->add_option("-o,--output", args->output, "output file")->required()->check(file_name());
  cmd->callback([args] {
    if (args->format != "pytorch-csv")
      throw InputError("--format", args->format, "unknown format; known: pytorch-csv");
    check_writable("--output", args->output);
    Schedule s = resolve_schedule(args->schedule);
    ValidationResult check = validate(s);
    if (!check.ok()) throw std::logic_error("generated schedule is invalid: " + check.error);
    std::ostringstream out;
    write_pytorch_csv(s, out);
    write_file("--output", args->output, out.str());
  });
}

}  // namespace braid::cli
