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
#include "explore_options.hpp"

namespace braid::cli {

namespace {

struct SearchArgs {
  ExploreStudyArgs study;
  int gpus = 0;
  int global_batch = 0;
  std::string schedules, mbs = "1,2,4", vpp;
  int top = 5;
  int exhaustive_limit = 64;
  int seq = 0;
  bool json = false;
  CLI::App* cmd = nullptr;
  bool given(const char* option) const { return cmd->get_option(option)->count() > 0; }
};

void run_search(const SearchArgs& a) {
  SearchSpace space;
  space.gpus = a.gpus;
  space.global_batch = a.global_batch;
  if (a.gpus < 1) throw InputError("--gpus", std::to_string(a.gpus), "must be 1 or more");
  if (a.global_batch < 1)
    throw InputError("--global-batch", std::to_string(a.global_batch), "must be 1 or more");
  if (a.top < 1) throw InputError("--top", std::to_string(a.top), "must be 1 or more");
  if (a.exhaustive_limit < 0)
    throw InputError("--exhaustive-limit", std::to_string(a.exhaustive_limit), "must be 0 or more");
  space.mbs = parse_int_list("--mbs", a.mbs);
  if (a.given("--vpp")) space.vpp = parse_int_list("--vpp", a.vpp);
  std::vector<std::string> schedules;
  if (a.given("--schedules")) schedules = parse_schedule_list("--schedules", a.schedules);
  space.top = a.top;
  space.exhaustive_limit = a.exhaustive_limit;

  const ExploreBase base = load_explore_base(a.study, /*need_own=*/true);
  space.schedules = !schedules.empty()            ? schedules
                    : !base.own.schedules.empty() ? base.own.schedules
                                                  : schedule_names();
  if (space.vpp.empty()) space.vpp = {base.own.parallel.vpp};
  Study study = base.study;
  study.parallel.sequence_parallel = base.own.parallel.sequence_parallel;
  if (a.given("--seq")) {
    if (a.seq < 1) throw InputError("--seq", std::to_string(a.seq), "must be 1 or more");
    study.training.seq = a.seq;
  }
  const SearchResult result = search(study, base.profile, space, explore_options(a.study));
  std::cout << (a.json ? search_json(result) : search_text(result));
}

}  // namespace

void register_search(CLI::App& app) {
  auto args = std::make_shared<SearchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "search",
      "find the fastest tp, pp, dp, micro-batch size, microbatches and schedule of N GPUs for a "
      "global batch within memory");
  args->cmd = cmd;
  add_explore_study_options(*cmd, args->study);
  cmd->add_option("--gpus", args->gpus,
                  "GPUs of the job (whole nodes of the study's cluster, or "
                  "fewer than one node)")
      ->required();
  cmd->add_option("--global-batch", args->global_batch,
                  "samples per iteration = dp x micro-batch size x microbatches")
      ->required();
  cmd->add_option("--schedules", args->schedules,
                  "all, or a list of schedule names (default: the study's schedules)");
  cmd->add_option("--mbs", args->mbs, "micro-batch sizes to try (default 1,2,4)");
  cmd->add_option("--vpp", args->vpp, "chunks per rank to try for 1f1b-i (default: the study's)");
  cmd->add_option("--seq", args->seq, "sequence length (default: the study's)");
  cmd->add_option("--top", args->top, "how many of the best layouts to print (default 5)");
  cmd->add_option("--exhaustive-limit", args->exhaustive_limit,
                  "simulate every candidate when at most this many fit the memory statically "
                  "(default 64); above it, prune by a throughput upper bound");
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->callback([args] { run_search(*args); });
}

}  // namespace braid::cli
