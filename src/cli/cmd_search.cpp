// `braid search`: the fastest layout (tp, pp, dp, micro-batch size, microbatches, schedule) of N
// GPUs for a global batch that fits in memory; the best few, why the runner-up loses, and whether
// the search was exhaustive or pruned.
#include <iostream>
#include <memory>
#include <string>

#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "braid/schedule.hpp"
#include "commands.hpp"
#include "distributed.hpp"
#include "emit_options.hpp"
#include "explore_options.hpp"
#include "option_values.hpp"
#include "output.hpp"

namespace braid::cli {

namespace {

struct SearchArgs {
  ExploreStudyArgs study;
  int gpus = 0;
  int global_batch = 0;
  std::string schedules, mbs = "1,2,4", vpp, sp, recompute, cp, ep, etp;
  std::string csv;
  int top = 5;
  int exhaustive_limit = 64;
  int seq = 0;
  bool json = false;
  bool show_invalid = false;
  EmitArgs emit;
  CLI::App* cmd = nullptr;
  bool given(const char* option) const { return cmd->get_option(option)->count() > 0; }
};

// The best layout as launch arguments (--emit); nothing, with a warning, when none fits.
void emit_best(const EmitArgs& emit, const Study& study, const SearchResult& result) {
  if (emit.format.empty()) return;
  if (result.best.empty()) {
    std::cerr << "braid: warning: --emit " << emit.format << ": no layout fits, nothing emitted\n";
    return;
  }
  const Configuration& best = result.best.front().config;
  const LaunchSchedule launch{best.schedule,
                              chunks_per_rank(parse_schedule_kind(best.schedule), best.vpp)};
  std::cout << emit_launch(emit, configure(with_gpus(study, result.gpus), best), launch);
}

void run_search(const SearchArgs& a) {
  SearchSpace space;
  space.gpus = a.gpus;
  space.global_batch = a.global_batch;
  if (a.given("--gpus") && a.gpus < 1)
    throw InputError("--gpus", std::to_string(a.gpus), "must be 1 or more");
  if (a.global_batch < 1)
    throw InputError("--global-batch", std::to_string(a.global_batch), "must be 1 or more");
  if (a.top < 1) throw InputError("--top", std::to_string(a.top), "must be 1 or more");
  if (a.exhaustive_limit < 0)
    throw InputError("--exhaustive-limit", std::to_string(a.exhaustive_limit), "must be 0 or more");
  space.mbs = parse_int_list("--mbs", a.mbs);
  if (a.given("--vpp")) space.vpp = parse_int_list("--vpp", a.vpp);
  std::vector<std::string> schedules;
  if (a.given("--schedules")) schedules = parse_schedule_list("--schedules", a.schedules);
  if (a.given("--sp")) space.sp = parse_sp_list("--sp", a.sp);
  if (a.given("--recompute")) space.recompute = parse_recompute_list("--recompute", a.recompute);
  if (a.given("--cp")) space.cp = parse_int_list("--cp", a.cp);
  space.cp_comm_types = cp_comm_types_of(a.study);
  if (a.given("--ep")) space.ep = parse_int_list("--ep", a.ep);
  if (a.given("--etp")) space.etp = parse_int_list("--etp", a.etp);
  space.top = a.top;
  space.exhaustive_limit = a.exhaustive_limit;

  const ExploreBase base = load_explore_base(a.study, /*need_own=*/true, /*own_any_layout=*/true);
  space.schedules = !schedules.empty()            ? schedules
                    : !base.own.schedules.empty() ? base.own.schedules
                                                  : schedule_names();
  if (space.vpp.empty()) space.vpp = {base.own.parallel.vpp};
  Study study = base.study;
  study.parallel.sequence_parallel = base.own.parallel.sequence_parallel;
  study.parallel.cp = base.own.parallel.cp;  // the default of --cp (default_cp_values)
  if (!a.given("--gpus")) space.gpus = study.cluster.gpus();  // after --nodes
  if (a.given("--seq")) {
    if (a.seq < 1) throw InputError("--seq", std::to_string(a.seq), "must be 1 or more");
    study.training.seq = a.seq;
  }
  ExploreOptions options = explore_options(a.study);
  options.group = world_group();
  const bool root = options.group.rank == 0;
  agree(options.group, [&] {  // only rank 0 writes it
    if (root && !a.csv.empty()) check_writable("--csv", a.csv);
    if (root) check_emit(a.emit, a.json, "--json");
  });
  if (options.jobs == 0) options.jobs = default_jobs();
  ProgressBar bar;
  if (!root) bar.enabled = false;
  options.progress = bar.callback();
  SearchResult result;
  try {
    result = search(study, base.profile, space, options);
  } catch (...) {
    bar.finish();
    throw;
  }
  bar.finish();
  if (!root) return;  // every rank holds the result; rank 0 prints it
  if (!a.csv.empty()) write_file("--csv", a.csv, search_csv(result));
  if (!a.json) {
    // Search chooses tp, pp, cp, mbs and m itself; the other axes only when given.
    std::vector<std::string> varied{"tp", "pp", "cp", "mbs", "m"};
    if (study.model.moe) varied.insert(varied.end(), {"ep", "etp"});
    for (const char* key : {"vpp", "seq", "sp", "recompute", "schedules"})
      if (a.given(("--" + std::string(key)).c_str())) varied.emplace_back(key);
    std::cout << job_defaults_text(base.args, base.own, varied);
  }
  std::cout << (a.json ? search_json(result) : search_text(result, a.show_invalid));
  emit_best(a.emit, study, result);
}

}  // namespace

void register_search(CLI::App& app) {
  auto args = std::make_shared<SearchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "search",
      "find the fastest tp, pp, dp, micro-batch size, microbatches and schedule of N GPUs for a "
      "global batch within memory");
  cmd->footer(
      "Examples:\n"
      "  braid search --gpus 16 --global-batch 64 --seq 2048\n"
      "  braid search --model qwen2-72b --cluster h100x64 --gpus 64 --global-batch 1024 "
      "--seq 8192 --sp on --recompute none,selective\n"
      "  braid search --study default --gpus 16 --global-batch 128 --schedules stp,1f1b-i "
      "--csv search.csv\n"
      "  braid search --gpus 16 --global-batch 64 --emit megatron --emit-file best.sh\n"
      "  braid search --model llama3.1-70b --cluster dgx-h100 --nodes 16 --global-batch 512 "
      "--seq 131072\n"
      "When nothing fits, search tries SP, recomputation, offloading, the distributed "
      "optimizer and more context parallelism and says which would make it fit. See "
      "docs/explore.md.");
  args->cmd = cmd;
  add_explore_study_options(*cmd, args->study);
  cmd->add_option("--gpus", args->gpus,
                  "GPUs of the job (whole nodes of the study's cluster, or fewer than one node); "
                  "default: the cluster's (--nodes x its GPUs per node)");
  // --fixed-global-batch as on sweep: every search compares its layouts at one global batch.
  cmd->add_option("--global-batch,--fixed-global-batch", args->global_batch,
                  "samples per iteration = dp x micro-batch size x microbatches, the same for "
                  "every layout")
      ->required();
  cmd->add_option("--schedules", args->schedules,
                  "all, or a list of schedule names (default: the study's schedules)");
  cmd->add_option("--mbs", args->mbs, "micro-batch sizes to try (default 1,2,4)");
  cmd->add_option("--vpp", args->vpp,
                  "chunks per rank to try for 1f1b-i and combined-1f1b (default: the study's)");
  cmd->add_option("--seq", args->seq, "sequence length (default: the study's)");
  cmd->add_option("--sp", args->sp,
                  "sequence parallelism to try: on, off or on,off (default: "
                  "the study's)");
  cmd->add_option("--recompute", args->recompute,
                  "recomputation modes to try: none, selective, full (default: the study's)");
  cmd->add_option("--cp", args->cp,
                  "context-parallel sizes to try, e.g. 1,2,4,8 (default: the study's, and 1,2,4,8 "
                  "where they split the sequence when seq >= " +
                      std::to_string(kLongSequence) + ")");
  cmd->add_option("--ep", args->ep,
                  "expert-parallel sizes to try for a Mixture-of-Experts model (default: every "
                  "divisor of its experts with etp x ep x pp dividing the GPUs; a dense model "
                  "ignores it)");
  cmd->add_option("--etp", args->etp,
                  "expert tensor-parallel sizes to try for a Mixture-of-Experts model (default "
                  "1; a dense model ignores it)");
  cmd->add_option("--csv", args->csv,
                  "write every simulated and invalid candidate as CSV (the columns of sweep --csv)")
      ->check(file_name());
  cmd->add_option("--top", args->top, "how many of the best layouts to print (default 5)");
  cmd->add_option("--exhaustive-limit", args->exhaustive_limit,
                  "simulate every candidate when at most this many fit the memory statically "
                  "(default 64); above it, prune by a throughput upper bound");
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->add_flag("--show-invalid", args->show_invalid,
                "list every invalid or ruled-out candidate with its reason (default: a count per "
                "reason; --csv and --json always hold every candidate)");
  add_emit_options(*cmd, args->emit);
  cmd->callback([args] { run_search(*args); });
}

}  // namespace braid::cli
