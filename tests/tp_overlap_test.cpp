// TP-communication overlap (docs/cost-model.md "TP-communication overlap"): Transformer Engine's
// userbuffers under Megatron's --tp-comm-overlap split the sequence-parallel all-gathers into tp
// chunks exchanged in a ring beside the GEMM that consumes them. Here: the setting and its checks.
#include <catch2/catch.hpp>

#include <string>

#include "braid/config.hpp"
#include "braid/error.hpp"
#include "cli_run.hpp"
#include "fixtures.hpp"

using namespace braid;

namespace {

// qwen2-7b on 8 nodes of 8 H100, tp 4, pp 2, one chunk per rank, seq 4096, SP on, 4 microbatches.
StudyOverrides qwen_sp(bool overlap) {
  StudyOverrides o = test::layout_overrides("qwen2-7b", "h100x64", 4, 2, 4096, true);
  o.microbatches = 4;
  o.tp_comm_overlap = overlap;
  return o;
}

std::string problem(const StudyOverrides& o) {
  return test::input_error_of([&] { load_study(resolve_config("studies", "default"), o); });
}

}  // namespace

TEST_CASE("tp_comm_overlap is off by default and set by the study option", "[tp-overlap][config]") {
  CHECK_FALSE(load_study(resolve_config("studies", "default")).training.tp_comm_overlap);
  CHECK(load_study(resolve_config("studies", "default"), qwen_sp(true)).training.tp_comm_overlap);
  CHECK(problem(qwen_sp(true)).empty());
}

TEST_CASE("TP overlap without sequence parallelism or across nodes is one line naming the fix",
          "[tp-overlap][errors]") {
  StudyOverrides no_sp = qwen_sp(true);
  no_sp.sequence_parallel = false;
  CHECK(problem(no_sp) ==
        "--tp-comm-overlap: training.tp_comm_overlap: needs sequence parallelism with tp > 1 (as "
        "in Megatron); turn sequence_parallel on or this off");
  // Megatron turns SP off at tp 1, then its assert fails: braid refuses the same.
  StudyOverrides tp1 = qwen_sp(true);
  tp1.tp = 1;
  CHECK_THAT(problem(tp1), Catch::StartsWith("--tp-comm-overlap: training.tp_comm_overlap: needs "
                                             "sequence parallelism with tp > 1"));
  // tp 16 on nodes of 8 GPUs: userbuffers map peer memory over one node's NVLink.
  // (megatron-22b: 64 KV heads, so tp 16 divides them.)
  const StudyOverrides across{.model = "megatron-22b",
                              .tp = 16,
                              .pp = 1,
                              .sequence_parallel = true,
                              .tp_comm_overlap = true};
  CHECK(problem(across) ==
        "--tp-comm-overlap: training.tp_comm_overlap: needs the TP group inside one node "
        "(userbuffers use NVLink peer memory); tp 16 spans nodes of 8 GPUs");
  const test::CliRun r =
      test::run_braid("simulate --study default --schedule 1f1b-i --sp off --tp-comm-overlap on");
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(test::count_lines(r.err) == 1);
  CHECK(r.err.find("training.tp_comm_overlap") != std::string::npos);
}

