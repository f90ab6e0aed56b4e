#include "simulation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "braid/error.hpp"
#include "braid/size_limit.hpp"
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
                 "P2P sends: blocking (the sender's next compute op waits, Megatron; default) or "
                 "async (fully overlapped); uniform-cost mode is async")
      ->check(CLI::IsMember({"blocking", "async"}));
  cmd.add_flag("--no-contention", args.no_contention,
               "compute and communication overlap without slowing each other");
  args.group_size_option = cmd.add_option("--group-size", args.group_size,
                                          "1f1b-i: Megatron's microbatch group size N (default p)");
  args.offload_fraction_option =
      cmd.add_option("--offload-fraction", args.offload_fraction,
                     "stp-offload: share of microbatches whose chunk-0 activations are offloaded");
  cmd.add_flag("--force", args.force,
               "simulate even when the estimated memory is above the size limit (see "
               "docs/limits.md)");
}

UniformCosts parse_unit_costs(const std::string& text) {
  std::vector<double> values;
  std::stringstream in(text);
  std::string item;
  const std::string expected =
      "expected tf,tb,tw,tar[,ma]: 4 or 5 comma-separated non-negative numbers, tf > 0";
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size() || !std::isfinite(v) || v < 0)
      throw InputError("--unit-costs", text, "'" + item + "' is not a number >= 0; " + expected);
    values.push_back(v);
  }
  if (values.size() != 4 && values.size() != 5) throw InputError("--unit-costs", text, expected);
  if (values[0] <= 0) throw InputError("--unit-costs", text, "tf must be > 0; " + expected);
  UniformCosts c;
  c.tf = values[0];
  c.tb = values[1];
  c.tw = values[2];
  c.tar = values[3];
  c.ma = values.size() == 5 ? values[4] : 1.0;
  return c;
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

}  // namespace

SimulationContext resolve_context(const SimulationArgs& args) {
  SimulationContext ctx;
  ctx.lower.p2p = args.p2p == "blocking" ? P2pMode::Blocking
                  : args.p2p == "async"  ? P2pMode::Async
                                         : P2pMode::Auto;
  ctx.sim.contention = !args.no_contention;
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
  ctx.study = resolve_study(args.study);
  ctx.profile = resolve_profile(args.study, *ctx.study);
  ctx.study_name = ctx.study->name;
  ctx.pp = ctx.study->parallel.pp;
  ctx.vpp = ctx.study->parallel.vpp;
  ctx.microbatches = ctx.study->training.microbatches;
  check_context_size(ctx, args);
  return ctx;
}

ScheduleOptions schedule_options(const SimulationContext& ctx, const SimulationArgs& args) {
  ScheduleOptions options;
  options.pp = ctx.pp;
  options.vpp = ctx.vpp;
  options.microbatches = ctx.microbatches;
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

SimulationResult simulate_schedule(const SimulationContext& ctx, const Schedule& schedule,
                                   bool generated) {
  SimulationResult r;
  r.schedule = schedule;
  if (ctx.uniform)
    r.cost = uniform_cost_model(*ctx.uniform, schedule.virtual_stages());
  else
    r.cost = build_cost_model(*ctx.study, *ctx.profile, schedule.virtual_stages());
  try {
    r.dag = lower(r.schedule, r.cost, ctx.lower);
    r.timeline = simulate(r.dag, ctx.sim);
  } catch (const InputError& e) {
    if (!generated) throw;
    throw InternalError(std::string(e.what()) + " (braid's own schedule " + schedule.name +
                        ", pp " + std::to_string(schedule.pp) + ", vpp " +
                        std::to_string(schedule.vpp) + ", m " +
                        std::to_string(schedule.microbatches) + ")");
  }
  r.report = make_report(ctx.study_name, r.schedule, r.cost, r.dag, r.timeline);
  return r;
}

}  // namespace braid::cli
