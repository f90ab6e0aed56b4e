#include "simulation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "../util/input_file.hpp"
#include "../util/pipeline_sizes.hpp"
#include "braid/error.hpp"
#include "braid/size_limit.hpp"
#include "explore_options.hpp"
#include "option_values.hpp"
#include "output.hpp"

namespace braid::cli {

void add_simulation_options(CLI::App& cmd, SimulationArgs& args) {
  add_study_options(cmd, args.study);
  args.study_option = cmd.get_option_no_throw("--study");
  cmd.add_option("--unit-costs", args.unit_costs,
                 "uniform-cost mode (no study): tf,tb,tw,tar[,ma] per chunk — forward, input "
                 "gradient, weight gradient, TP collectives of a forward (and of a backward), "
                 "activation memory; needs --pp and --microbatches");
  cmd.add_option("--p2p", args.p2p,
                 "P2P sends: batched (Megatron's batched isend/irecv with rendezvous; default "
                 "unless the study sets p2p_batched off), blocking (the sender's next compute op "
                 "waits for its sends) or async (fully overlapped); uniform-cost mode is async")
      ->check(CLI::IsMember({"batched", "blocking", "async"}));
  cmd.add_flag("--no-contention", args.no_contention,
               "compute and communication overlap without slowing each other");
  args.group_size_option =
      cmd.add_option("--group-size", args.group_size,
                     "1f1b-i, combined-1f1b: Megatron's microbatch group size N (default p)")
          ->check(at_least_one());
  args.offload_fraction_option =
      cmd.add_option("--offload-fraction", args.offload_fraction,
                     "stp-offload: share of microbatches whose chunk-0 activations are offloaded");
  add_memory_cap_options(cmd, args.mem_cap_gib, args.mem_margin_gib);
  cmd.add_flag("--force", args.force,
               "simulate even when the estimated memory is above the size limit (see "
               "docs/limits.md)");
}

namespace {

// The size guard, before any schedule is built: the op count of a unit does not depend on how
// layers are split, so the study's cost model is built for pp stages; the schedules' largest
// number of chunks per rank (vpp for loop placement, 2 for V) bounds the P2P sends and copies.
// Uniform costs are one layer per virtual stage: a one-chunk model repeated. Sizes that are not
// positive are left to the schedule builders, which name the option.
void check_context_size(const SimulationContext& ctx, const SimulationArgs& args) {
  if (ctx.pp <= 0 || ctx.vpp <= 0 || ctx.microbatches <= 0) return;
  const double virtual_stages = static_cast<double>(ctx.pp) * std::max(ctx.vpp, 2);
  check_virtual_stages(virtual_stages, "--vpp");
  SizeEstimate estimate;
  if (ctx.uniform) {
    estimate = estimate_size(uniform_cost_model(*ctx.uniform, 1), virtual_stages, virtual_stages,
                             ctx.microbatches);
  } else {
    // A hand-written split names one entry per virtual stage of the schedule, not per pp stage;
    // the shape model splits uniformly (the op count does not depend on the split).
    Study shape = *ctx.study;
    shape.layout.layers_per_stage.clear();
    shape.layout.balance = StageBalance::Uniform;
    estimate = estimate_size(build_cost_model(shape, *ctx.profile, ctx.pp), 1, virtual_stages,
                             ctx.microbatches);
  }
  check_size(estimate, kDefaultMaxSimulationBytes, args.force, "--microbatches");
}

MemoryCap memory_cap_of(const Profile& profile, const SimulationArgs& args) {
  ExploreOptions o;
  set_memory_cap(o, args.mem_cap_gib, args.mem_margin_gib);
  return memory_cap(profile, o);
}

}  // namespace

Schedule read_schedule_csv(const std::string& path, const std::string& runtime) {
  std::istringstream in(util::read_input_file(path, util::kScheduleCsvFile, "--schedule-csv"));
  Schedule s = read_pytorch_csv(in, path, 0);
  const ValidationResult check = validate(s);
  if (!check.ok()) throw InputError("--schedule-csv", path, check.error);
  s.p2p_runtime = *parse_p2p_runtime(runtime);  // checked by the option's validator
  return s;
}

void check_p2p_runtime_applies(const CLI::Option* runtime, bool has_csv) {
  if (runtime->count() > 0 && !has_csv)
    throw InputError("--p2p-runtime", runtime->as<std::string>(),
                     "applies to --schedule-csv only (a schedule file records its runtime, a "
                     "generated schedule has its own)");
}

void check_file_schedule(const SimulationArgs& args, const Schedule& schedule,
                         const std::string& option, const std::string& file) {
  const StudyOverrides& o = args.study.overrides;
  auto conflict = [&](const char* given, int value, int in_file, const std::string& what) {
    throw InputError(given, std::to_string(value),
                     "conflicts with " + option + " " + file + ", which has " +
                         std::to_string(in_file) + " " + what + "; drop " + given + " or give " +
                         given + " " + std::to_string(in_file));
  };
  if (o.pp && *o.pp != schedule.pp)
    conflict("--pp", *o.pp, schedule.pp, option == "--schedule-csv" ? "ranks (rows)" : "ranks");
  if (o.microbatches && *o.microbatches != schedule.microbatches)
    conflict("--microbatches", *o.microbatches, schedule.microbatches, "microbatches");
  if (o.vpp && *o.vpp != schedule.vpp) conflict("--vpp", *o.vpp, schedule.vpp, "stages per rank");
}

void adopt_file_schedule(SimulationContext& ctx, const SimulationArgs& args,
                         const Schedule& schedule, const std::string& option,
                         const std::string& file) {
  check_file_schedule(args, schedule, option, file);
  if (ctx.study) {
    ctx.study->parallel.pp = schedule.pp;
    ctx.study->training.microbatches = schedule.microbatches;
    try {
      validate_study(*ctx.study);
    } catch (const InputError& e) {
      throw InputError(option, file,
                       "its pp " + std::to_string(schedule.pp) + " and " +
                           std::to_string(schedule.microbatches) +
                           " microbatches do not fit study " + ctx.study->name + ": " + e.problem);
    }
  }
  ctx.pp = schedule.pp;
  ctx.microbatches = schedule.microbatches;
  check_context_size(ctx, args);
}

std::string setting_header(const SimulationContext& ctx) {
  if (!ctx.study) return "";
  return "setting: " + study_setting(*ctx.study) + "\n" + ctx.job_defaults +
         memory_cap_text(ctx.cap) + "\n\n";
}

SimulationContext resolve_context(const SimulationArgs& args, ModelUse use) {
  SimulationContext ctx;
  ctx.lower.p2p = args.p2p == "batched"    ? P2pMode::Batched
                  : args.p2p == "blocking" ? P2pMode::Blocking
                  : args.p2p == "async"    ? P2pMode::Async
                                           : P2pMode::Auto;
  ctx.sim.contention = !args.no_contention;
  ctx.lower.fold_zero_time = true;  // off again where a trace or SVG shows every op
  const StudyOverrides& o = args.study.overrides;
  if (!args.unit_costs.empty()) {
    if (args.study_option && args.study_option->count() > 0)
      throw InputError("--unit-costs", args.unit_costs,
                       "uniform-cost mode takes no --study; give --pp and --microbatches");
    if (o.model || o.cluster || o.tp || o.seq || o.mbs || o.nodes || o.sequence_parallel ||
        o.recompute || !args.study.profile.empty())
      throw InputError("--unit-costs", args.unit_costs,
                       "uniform-cost mode takes only --pp, --microbatches and --vpp of the study "
                       "options");
    if (!o.pp) throw InputError("--pp", "missing", "required with --unit-costs");
    if (!o.microbatches)
      throw InputError("--microbatches", "missing", "required with --unit-costs");
    ctx.uniform = parse_unit_costs(args.unit_costs);
    ctx.study_name = "uniform";
    ctx.pp = *o.pp;
    ctx.vpp = o.vpp.value_or(2);
    ctx.microbatches = *o.microbatches;
    check_at_most(ctx.pp, kMaxPp, "--pp", "");
    check_at_most(ctx.vpp, kMaxVpp, "--vpp", "");
    check_at_most(ctx.microbatches, kMaxMicrobatches, "--microbatches", "");
    check_context_size(ctx, args);
    return ctx;
  }
  ctx.study = resolve_study(args.study, use);
  ctx.profile = resolve_profile(args.study, *ctx.study);
  ctx.study_name = ctx.study->name;
  ctx.job_defaults = job_defaults_text(args.study, *ctx.study);
  ctx.cap = memory_cap_of(*ctx.profile, args);
  ctx.pp = ctx.study->parallel.pp;
  ctx.vpp = ctx.study->parallel.vpp;
  ctx.microbatches = ctx.study->training.microbatches;
  check_context_size(ctx, args);
  return ctx;
}

ScheduleOptions schedule_options(const SimulationContext& ctx, const SimulationArgs& args) {
  ScheduleOptions options;
  util::copy_pipeline_sizes(options, ctx);
  options.group_size = args.group_size;
  options.offload_fraction = args.offload_fraction;
  if (ctx.study) options.offload = ctx.study->training.offload;
  return options;
}

GivenOptions given_schedule_options(const SimulationArgs& args) {
  const StudyOverrides& o = args.study.overrides;
  auto given = [](const CLI::Option* option) { return option != nullptr && option->count() > 0; };
  return {o.vpp.has_value(), given(args.group_size_option), given(args.offload_fraction_option),
          o.offload.has_value()};
}

CostModel cost_model_for(const SimulationContext& ctx, int virtual_stages) {
  return ctx.uniform ? uniform_cost_model(*ctx.uniform, virtual_stages)
                     : build_cost_model(*ctx.study, *ctx.profile, virtual_stages);
}

SimulationResult simulate_schedule(const SimulationContext& ctx, Schedule schedule,
                                   bool generated) {
  SimulationResult r;
  r.cost = cost_model_for(ctx, schedule.virtual_stages());
  try {
    r.dag = lower(schedule, r.cost, ctx.lower);
    // The report reads the schedule's name, sizes and placement only: its instructions, whose
    // program is in the Dag now, are freed before the simulation allocates its timeline (3.5
    // bytes per op of the peak in the uniform p = 64 case of docs/limits.md).
    std::vector<RankProgram>().swap(schedule.ranks);
    r.timeline = simulate(r.dag, ctx.sim);
  } catch (const InputError& e) {
    if (!generated) throw;
    throw InternalError(std::string(e.what()) + " (braid's own schedule " + schedule.name +
                        ", pp " + std::to_string(schedule.pp) + ", vpp " +
                        std::to_string(schedule.vpp) + ", m " +
                        std::to_string(schedule.microbatches) + ")");
  }
  r.report = make_report(ctx.study_name, schedule, r.cost, r.dag, r.timeline);
  if (ctx.study) apply_memory_cap(r.report, ctx.cap);
  return r;
}

}  // namespace braid::cli
