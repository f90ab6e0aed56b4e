#include "schedule_options.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "../util/input_file.hpp"
#include "braid/config.hpp"
#include "braid/error.hpp"
#include "braid/size_limit.hpp"
#include "option_values.hpp"

namespace braid::cli {

namespace {

// Shortest form of a user-given number (2, 0.25), as it was typed.
std::string number_text(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

std::string known() {
  std::string out;
  for (const std::string& n : schedule_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool given(const CLI::Option* o) { return o != nullptr && o->count() > 0; }

}  // namespace

void add_schedule_options(CLI::App& cmd, ScheduleArgs& args) {
  cmd.add_option("--schedule", args.name, "schedule name: " + known());
  cmd.add_option("--schedule-csv", args.csv,
                 "PyTorch compute-only schedule CSV to use instead of --schedule");
  cmd.add_option("--schedule-file", args.file,
                 "schedule JSON file (braid schedule --json, braid design -o) to use instead of "
                 "--schedule");
  args.runtime = add_p2p_runtime_option(cmd, args.p2p_runtime);
  args.pp = cmd.add_option("--pp", args.options.pp, "pipeline-parallel size p (ranks)");
  args.microbatches =
      cmd.add_option("--microbatches", args.options.microbatches, "microbatches m per iteration");
  args.vpp = cmd.add_option("--vpp", args.options.vpp,
                            "chunks per rank for 1f1b-i and combined-1f1b (default 2)");
  args.group_size =
      cmd.add_option("--group-size", args.options.group_size,
                     "1f1b-i, combined-1f1b: Megatron's microbatch group size N (default p)")
          ->check(at_least_one());
  args.offload_fraction =
      cmd.add_option("--offload-fraction", args.options.offload_fraction,
                     "stp-offload: share of microbatches whose chunk-0 activations are offloaded "
                     "(default 1)");
  args.offload = cmd.add_option("--offload", args.options.offload,
                                "every schedule but stp-offload: share of microbatches whose "
                                "chunk-0 activations are offloaded (default 0 = off)");
}

CLI::Option* add_p2p_runtime_option(CLI::App& cmd, std::string& runtime) {
  return cmd
      .add_option("--p2p-runtime", runtime,
                  "with --schedule-csv: the runtime that runs the CSV's order, posted-ahead "
                  "(receives posted before their consumer needs them, braid's own rule) or "
                  "megatron (Megatron's rendezvous: a send waits for its receiver to post); "
                  "default posted-ahead")
      ->check(CLI::IsMember({name(P2pRuntime::PostedAhead), name(P2pRuntime::Megatron)}));
}

Schedule read_schedule_file(const std::string& path) {
  std::istringstream in(util::read_input_file(path, util::kScheduleJsonFile, "--schedule-file"));
  return read_schedule_json(in, path);
}

Schedule resolve_schedule(const ScheduleArgs& args) {
  if (given(args.runtime) && args.csv.empty())
    throw InputError("--p2p-runtime", args.p2p_runtime,
                     "applies to --schedule-csv only (a schedule file records its runtime, a "
                     "generated schedule has its own)");
  if (!args.file.empty()) {
    if (!args.name.empty() || !args.csv.empty())
      throw InputError("--schedule-file", args.file,
                       "give one of --schedule, --schedule-csv and --schedule-file");
    Schedule s = read_schedule_file(args.file);
    // The file fixes every size; a size given as well must agree with it.
    const std::pair<const CLI::Option*, int> sizes[] = {
        {args.pp, s.pp}, {args.microbatches, s.microbatches}, {args.vpp, s.vpp}};
    const int wanted[] = {args.options.pp, args.options.microbatches, args.options.vpp};
    for (int i = 0; i < 3; ++i)
      if (given(sizes[i].first) && wanted[i] != sizes[i].second)
        throw InputError(sizes[i].first->get_name(), std::to_string(wanted[i]),
                         args.file + " has " + std::to_string(sizes[i].second));
    if (given(args.group_size) || given(args.offload_fraction) || given(args.offload))
      throw InputError("--schedule-file", args.file,
                       "--group-size, --offload-fraction and --offload apply to generated "
                       "schedules only");
    return s;
  }
  if (args.name.empty() == args.csv.empty())
    throw InputError("--schedule", args.name.empty() ? "missing" : args.name,
                     "give either a schedule name (" + known() + ") or --schedule-csv FILE");
  if (!args.csv.empty()) {
    if (given(args.group_size) || given(args.offload_fraction) || given(args.offload))
      throw InputError(given(args.group_size)         ? "--group-size"
                       : given(args.offload_fraction) ? "--offload-fraction"
                                                      : "--offload",
                       "given", "applies to generated schedules, not to --schedule-csv");
    std::istringstream in(
        util::read_input_file(args.csv, util::kScheduleCsvFile, "--schedule-csv"));
    Schedule s =
        read_pytorch_csv(in, args.csv, given(args.microbatches) ? args.options.microbatches : 0);
    if (given(args.pp) && args.options.pp != s.pp)
      throw InputError("--pp", std::to_string(args.options.pp),
                       args.csv + " has " + std::to_string(s.pp) + " rows (ranks)");
    if (given(args.vpp) && args.options.vpp != s.vpp)
      throw InputError("--vpp", std::to_string(args.options.vpp),
                       args.csv + " places " + std::to_string(s.vpp) + " stages on each rank");
    s.p2p_runtime = *parse_p2p_runtime(args.p2p_runtime);  // checked by the option's validator
    return s;
  }

  parse_schedule_kind(args.name);  // rejects an unknown name, listing the known ones
  if (!given(args.pp)) throw InputError("--pp", "missing", "required with --schedule");
  if (!given(args.microbatches))
    throw InputError("--microbatches", "missing", "required with --schedule");
  ScheduleOptions options = args.options;
  check_options_apply(
      args.name, options,
      {given(args.vpp), given(args.group_size), given(args.offload_fraction), given(args.offload)});
  options.vpp = chunks_per_rank(args.name, options.vpp);
  check_at_most(options.pp, kMaxPp, "--pp", "");
  check_at_most(options.vpp, kMaxVpp, "--vpp", "");
  check_at_most(options.microbatches, kMaxMicrobatches, "--microbatches", "");
  check_schedule_size(options.pp, std::max(options.vpp, 2), options.microbatches, "--microbatches");
  return make_schedule(args.name, options);
}

void check_options_apply(const std::string& name, const ScheduleOptions& options,
                         const GivenOptions& given) {
  const ScheduleTraits& t = traits(parse_schedule_kind(name));
  const int fixed = t.vpp;
  if (fixed != 0 && given.vpp && options.vpp != fixed)
    throw InputError("--vpp", std::to_string(options.vpp),
                     name + " always has " + std::to_string(fixed) +
                         (fixed == 1 ? " chunk" : " chunks") +
                         " per rank; --vpp chooses the chunks of 1f1b-i and combined-1f1b only",
                     InputKind::Value);
  if (given.group_size && !t.group_size)
    throw InputError("--group-size", std::to_string(options.group_size),
                     "applies to 1f1b-i and combined-1f1b only (Megatron's microbatch group size)",
                     InputKind::Value);
  if (given.offload_fraction && !t.own_offload)
    throw InputError("--offload-fraction", number_text(options.offload_fraction),
                     "applies to stp-offload only", InputKind::Value);
  if (given.offload && t.own_offload)
    throw InputError("--offload", number_text(options.offload),
                     "stp-offload offloads by --offload-fraction; --offload is for the others",
                     InputKind::Value);
}

void check_options_apply_to_any(const std::vector<std::string>& names,
                                const ScheduleOptions& options, const GivenOptions& given) {
  // Each given option on its own: an error when no schedule of the list uses it.
  const GivenOptions each[] = {{given.vpp, false, false, false},
                               {false, given.group_size, false, false},
                               {false, false, given.offload_fraction, false},
                               {false, false, false, given.offload}};
  for (const GivenOptions& one : each) {
    if (!one.vpp && !one.group_size && !one.offload_fraction && !one.offload) continue;
    std::optional<InputError> first;
    for (const std::string& name : names) {
      try {
        check_options_apply(name, options, one);
        first.reset();
        break;
      } catch (const InputError& e) {
        if (!first) first = e;
      }
    }
    if (first)
      throw InputError(first->where, first->field,
                       "no schedule compared uses it (" + first->problem + ")", InputKind::Value);
  }
}

}  // namespace braid::cli
