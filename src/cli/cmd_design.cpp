// `braid design`: searches for the fastest schedule of a study (or of uniform unit costs) under a
// memory cap and writes it as a schedule file (the `braid schedule --json` format) that
// --schedule-file accepts everywhere. The search itself is the library's (design.hpp).
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "../util/pipeline_sizes.hpp"
#include "braid/design.hpp"
#include "braid/error.hpp"
#include "commands.hpp"
#include "option_values.hpp"
#include "output.hpp"
#include "simulation.hpp"

namespace braid::cli {

namespace {

struct DesignArgs {
  SimulationArgs sim;
  double mem_cap_ma = -1;
  bool hold_until_w = false;
  double budget_s = 60;
  int max_candidates = 1000;
  std::uint64_t seed = 1;
  int beam = 6;
  std::vector<std::string> seeds;
  bool json = false;
  std::string output;
};

DesignProblem problem_of(const SimulationContext& ctx) {
  DesignProblem p;
  p.study = ctx.study_name;
  util::copy_pipeline_sizes(p, ctx);
  p.lower = ctx.lower;
  p.sim = ctx.sim;
  if (ctx.study) p.offload = ctx.study->training.offload;
  p.cost = [ctx](int virtual_stages) { return cost_model_for(ctx, virtual_stages); };
  return p;
}

// On a terminal: one line, rewritten every few candidates.
std::function<void(const DesignProgress&)> progress_line() {
  if (isatty(STDERR_FILENO) == 0) return {};
  return [](const DesignProgress& p) {
    if (p.candidates % 10 != 0) return;
    std::fprintf(stderr, "\rbraid design: %d / %d candidates, best %s%.6g s   ", p.candidates,
                 p.max_candidates, p.best_fits ? "" : "(none under the cap) ", p.best_time_s);
    std::fflush(stderr);
  };
}

}  // namespace

void register_design(CLI::App& app) {
  auto args = std::make_shared<DesignArgs>();
  CLI::App* cmd = app.add_subcommand(
      "design", "search for the fastest schedule under a memory cap (writes a schedule file)");
  cmd->footer(
      "Examples:\n"
      "  braid design --study default -o designed.json\n"
      "  braid design --study default --mem-cap 24 --max-candidates 500 --seed 7 -o d.json\n"
      "  braid design --unit-costs 1,1,1,0.25 --pp 4 --microbatches 16 --mem-cap-ma 10 -o d.json\n"
      "See docs/design-search.md.");
  add_simulation_options(*cmd, args->sim);
  cmd->add_option("--mem-cap-ma", args->mem_cap_ma,
                  "cap on each rank's activation peak in M_a (uniform-cost mode)")
      ->check(finite_positive(kMaxActivationsMa, "M_a"));
  cmd->add_flag("--hold-until-w", args->hold_until_w,
                "count activations in --mem-cap-ma until the weight gradient has run (the "
                "zero-bubble scheduler's memory rule)");
  cmd->add_option("--budget", args->budget_s,
                  "wall-clock seconds the search may take (default 60; 0 = no limit)")
      ->check(finite_range(0, kMaxBudgetS, "seconds"));
  cmd->add_option("--max-candidates", args->max_candidates,
                  "simulated candidates, seeds included (default 1000); the result is "
                  "reproducible when this, not --budget, ends the search")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", args->seed, "random seed of the search (default 1)");
  cmd->add_option("--beam", args->beam, "candidates kept and mutated (default 6)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--seeds", args->seeds,
                  "hand-designed schedules to start from (default "
                  "1f1b-i,zb-v,stp,stp-offload,dualpipe-v)")
      ->delimiter(',');
  cmd->add_flag("--json", args->json, "print the result and the search trace as JSON");
  cmd->add_option("-o,--output", args->output, "schedule file to write (braid schedule --json)")
      ->required()
      ->check(file_name());
  cmd->callback([args] {
    check_writable("--output", args->output);
    for (const std::string& name : args->seeds) {
      try {
        parse_schedule_kind(name);
      } catch (const InputError& e) {
        throw InputError("--seeds", name, e.problem);
      }
    }
    const SimulationContext ctx = resolve_context(args->sim);
    DesignOptions options;
    // The one memory cap of every command (--mem-cap / --mem-margin, simulation options).
    if (ctx.uniform && args->sim.mem_cap_gib != -1)
      throw InputError("--mem-cap", std::to_string(args->sim.mem_cap_gib),
                       "uniform-cost mode has no bytes; use --mem-cap-ma");
    if (ctx.profile) options.mem_cap_bytes = ctx.cap.cap_bytes;
    options.mem_cap_ma = args->mem_cap_ma;
    options.hold_until_w = args->hold_until_w;
    options.allow_offload = !ctx.uniform;  // uniform costs have no host link: copies are free
    options.max_candidates = args->max_candidates;
    options.budget_s = args->budget_s;
    options.seed = args->seed;
    options.beam = args->beam;
    options.seeds = args->seeds;
    options.progress = progress_line();
    const DesignResult result = design(problem_of(ctx), options);
    if (options.progress) std::fprintf(stderr, "\r\033[K");
    write_file("--output", args->output, to_json(result.schedule) + "\n");
    std::cout << (args->json ? design_json(result, options) : design_table(result, options));
  });
}

}  // namespace braid::cli
