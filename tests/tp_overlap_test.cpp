// TP-communication overlap (docs/cost-model.md "TP-communication overlap"): Transformer Engine's
// userbuffers under Megatron's --tp-comm-overlap split the sequence-parallel all-gathers into tp
// chunks exchanged in a ring beside the GEMM that consumes them.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "braid/profile.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "braid/size_limit.hpp"
#include "cli_run.hpp"
#include "fixtures.hpp"

using namespace braid;
using test::cost_of;
using test::first_unit;

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

namespace {

// One virtual stage of the uniform symbolic costs (each unit's F a quarter of tf, no All-Reduce):
// PreAttn F (4 s) runs a ring of tp = 4 chunks over [begin, end) of its compute, each of its 3
// transfers `x` seconds on the copy engines. One microbatch of 1F1B on one rank.
struct RingCase {
  double x = 0;
  double begin = 0, end = 1;
  bool copy_engine = true;
};

CostModel ring_cost(const RingCase& rc) {
  CostModel cm = uniform_cost_model({.tf = 16, .tb = 8, .tw = 4, .tar = 0, .ma = 1}, 1);
  UnitCost& pre_attn = cm.chunks[0].layer_units[0];
  REQUIRE(pre_attn.kind == UnitKind::PreAttn);
  REQUIRE(pre_attn[Phase::F].time_s == 4);
  Collective ring;
  ring.kind = CollectiveKind::P2P;
  ring.group = Group::Tp;
  ring.position = CollectivePosition::Inside;
  ring.steps = 4;
  ring.time_s = 3 * rc.x;
  ring.segment_begin = rc.begin;
  ring.segment_end = rc.end;
  ring.copy_engine = rc.copy_engine;
  pre_attn[Phase::F].collectives = {ring};
  return cm;
}

Schedule one_microbatch() { return make_schedule("1f1b", ScheduleOptions{1, 1, 1}); }

test::Simulated ring_case(const RingCase& rc) {
  return test::simulated(one_microbatch(), ring_cost(rc), false);
}

// The iteration with the compute slowed `compute_slowdown` x while an SM-using collective runs
// (lowering keeps a uniform model's contention off: this one is made non-uniform, simulated
// without its report).
double contended_iteration_s(RingCase rc, double compute_slowdown) {
  CostModel cm = ring_cost(rc);
  cm.uniform = false;
  cm.contention = Contention{compute_slowdown, 1.0};
  return simulate(lower(one_microbatch(), cm)).iteration_time_s;
}

// Start times of rank 0's PreAttn F compute ops, in order.
std::vector<double> pre_attn_f_starts(const test::Simulated& r) {
  std::vector<double> starts;
  for (std::size_t i = 0; i < r.dag.ops.size(); ++i) {
    const DagOp& op = r.dag.ops[i];
    if (op.kind == OpKind::Compute && op.unit == UnitKind::PreAttn && op.phase == Phase::F)
      starts.push_back(r.timeline.start_s[i]);
  }
  return starts;
}

}  // namespace

TEST_CASE("a ring all-gather hides a transfer shorter than its GEMM piece, front chunk too",
          "[tp-overlap][sim]") {
  // GEMM 4 s in tp = 4 pieces of p = 1; the compute alone is tf + tb + tw = 16 + 8 + 4 = 28 s.
  // Chunk 0 is the GPU's own shard: nothing waits at the front. x = 0.5 <= p: all hidden.
  const test::Simulated hidden = ring_case({.x = 0.5});
  CHECK(hidden.report.iteration_time_s == Approx(28));
  CHECK(hidden.report.ranks[0].tp_exposed_s == Approx(0).margin(1e-12));
  CHECK(pre_attn_f_starts(hidden) == std::vector<double>{0, 1, 2, 3});
  test::check_sum_identity(hidden.report);
}

TEST_CASE("a chunk whose transfer outlasts its GEMM piece exposes (tp - 1)(x - p)",
          "[tp-overlap][sim]") {
  // x = 1.5 > p = 1: pieces [0,1], [1.5,2.5], [3,4], [4.5,5.5]; span p + (tp-1)x = 5.5,
  // exposed (tp-1)(x-p) = 1.5.
  const test::Simulated slow = ring_case({.x = 1.5});
  CHECK(pre_attn_f_starts(slow) == std::vector<double>{0, 1.5, 3, 4.5});
  CHECK(slow.report.iteration_time_s == Approx(28 + 1.5));
  CHECK(slow.report.ranks[0].tp_exposed_s == Approx(1.5));
  test::check_pp_idle(slow.report, slow.dag, slow.timeline);
  // The norm before the GEMM (a quarter of the phase, 1 s) and a kernel after it (1 s): pieces of
  // 0.5 s. Head [0,1], pieces [1,1.5], [2.5,3], [4,4.5], [5.5,6], tail [6,7]: span 7, exposed
  // (tp-1)(x-p) = 3; the first transfer waits for the head (it sends what the norm wrote).
  const test::Simulated segment = ring_case({.x = 1.5, .begin = 0.25, .end = 0.75});
  CHECK(pre_attn_f_starts(segment) == std::vector<double>{0, 1, 2.5, 4, 5.5, 6});
  CHECK(segment.report.iteration_time_s == Approx(28 + 3));
  CHECK(segment.report.ranks[0].tp_exposed_s == Approx(3));
  test::check_pp_idle(segment.report, segment.dag, segment.timeline);
}

TEST_CASE("copy-engine transfers leave the GEMM pieces beside them at full speed",
          "[tp-overlap][sim]") {
  // Compute slowed 1.25x while an SM-using collective runs; the ring's copies take no SMs.
  CHECK(contended_iteration_s({.x = 0.5}, 1.25) == Approx(28));
  // The same transfers as SM kernels: pieces 0..2 each run their first 0.5 s beside a transfer
  // at 1/1.25 speed (0.4 s of work), then the other 0.6 s alone: 1.1 s; the last runs alone.
  CHECK(contended_iteration_s({.x = 0.5, .copy_engine = false}, 1.25) == Approx(28 + 3 * 0.1));
}

namespace {

Study qwen_study(bool overlap, int cp = 1) {
  StudyOverrides o = qwen_sp(overlap);
  o.cp = cp;
  return load_study(resolve_config("studies", "default"), o);
}

}  // namespace

TEST_CASE("TP overlap turns the column forward's and the row dgrad's all-gathers into rings",
          "[tp-overlap][cost]") {
  const CostModel off = cost_of(qwen_study(false));
  const CostModel on = cost_of(qwen_study(true));
  // qwen2-7b, seq 4096, tp 4: the gathered activation is T x h x e = 4096 x 3584 x 2 bytes.
  const double gathered = 4096.0 * 3584 * 2;
  for (const auto& [kind, phase] :
       {std::pair{UnitKind::PreAttn, Phase::F}, std::pair{UnitKind::PreMLP, Phase::F},
        std::pair{UnitKind::Attn, Phase::B}, std::pair{UnitKind::MLP, Phase::B}}) {
    INFO(name(kind) << " " << name(phase));
    const PhaseCost before = first_unit(off, kind)[phase];
    const PhaseCost ring = first_unit(on, kind)[phase];
    REQUIRE(before.collectives.size() == 1);
    CHECK(before.collectives[0].kind == CollectiveKind::AllGather);
    CHECK(before.collectives[0].bytes == gathered);
    REQUIRE(ring.collectives.size() == 1);
    const Collective& c = ring.collectives[0];
    CHECK(c.position == CollectivePosition::Inside);
    CHECK(c.group == Group::Tp);
    CHECK(c.steps == 4);
    CHECK(c.copy_engine);
    CHECK(c.bytes == Approx(3 * gathered / 4));  // tp - 1 chunks of a quarter each
    CHECK(c.segment_begin < c.segment_end);
    CHECK(c.segment_end <= 1);
    CHECK(ring.time_s == before.time_s);  // the compute is the same, only cut in pieces
  }
  // The norm before QKV and RoPE after it stay whole: the ring covers the GEMM only.
  const Collective qkv = first_unit(on, UnitKind::PreAttn)[Phase::F].collectives[0];
  CHECK(qkv.segment_begin > 0);
  CHECK(qkv.segment_end < 1);
  // The reduce-scatters (row forward, column backward) are as without overlap in this slice.
  for (const auto& [kind, phase] :
       {std::pair{UnitKind::Attn, Phase::F}, std::pair{UnitKind::PreAttn, Phase::B}}) {
    const Collectives a = first_unit(off, kind)[phase].collectives;
    const Collectives b = first_unit(on, kind)[phase].collectives;
    REQUIRE(a.size() == 1);
    REQUIRE(b.size() == 1);
    CHECK(b[0].kind == CollectiveKind::ReduceScatter);
    CHECK(b[0].time_s == a[0].time_s);
  }
}

TEST_CASE("attention's backward with a CP ring keeps its TP all-gather before the compute",
          "[tp-overlap][cost][cp]") {
  const CostModel cm = cost_of(qwen_study(true, 2));
  const Collectives attn_b = first_unit(cm, UnitKind::Attn)[Phase::B].collectives;
  // The CP ring inside (the attention unit adds it), then the TP all-gather before.
  REQUIRE(attn_b.size() == 2);
  CHECK(attn_b[0].group == Group::Cp);
  CHECK(attn_b[0].position == CollectivePosition::Inside);
  CHECK(attn_b[1].kind == CollectiveKind::AllGather);
  CHECK(attn_b[1].position == CollectivePosition::Before);
  CHECK(first_unit(cm, UnitKind::PreAttn)[Phase::F].collectives[0].position ==
        CollectivePosition::Inside);
  CHECK(first_unit(cm, UnitKind::MLP)[Phase::B].collectives[0].position ==
        CollectivePosition::Inside);
}

TEST_CASE("every schedule keeps the sum identity with TP overlap on, and 1F1B gets faster",
          "[tp-overlap][sim]") {
  for (const std::string& name : schedule_names()) {
    INFO(name);
    Study s = qwen_study(true);
    s.parallel.vpp = chunks_per_rank(name, 1);
    validate_study(s);
    const Schedule sched = make_schedule(name, ScheduleOptions{2, s.parallel.vpp, 8});
    const test::Simulated r = test::simulated(sched, cost_of(s), false);
    test::check_pp_idle(r.report, r.dag, r.timeline);
    CHECK(r.report.tp_comm_rate > 0);
  }
  // The gathers leave the critical path of a plain 1F1B: less TP exposure, a shorter iteration.
  const Schedule plain = make_schedule("1f1b", ScheduleOptions{2, 1, 8});
  const test::Simulated off = test::simulated(plain, cost_of(qwen_study(false)), false);
  const test::Simulated on = test::simulated(plain, cost_of(qwen_study(true)), false);
  CHECK(on.report.ranks[0].tp_exposed_s < off.report.ranks[0].tp_exposed_s);
  CHECK(on.report.iteration_time_s < off.report.iteration_time_s);
  // The size guard counts the rings' pieces, transfers and the compute around them: an upper
  // bound within 2x; the explorer's estimate from the study's shape bounds it again.
  const SizeEstimate e = estimate_size(cost_of(qwen_study(true)), 1, 2, 8);
  CHECK(e.ops >= on.dag.size());
  CHECK(e.ops <= 2 * on.dag.size());
  CHECK(estimate_study_size(qwen_study(true), 2, 8).ops >= e.ops);
}

TEST_CASE("the ring's copy-engine transfers run on a lane of their own, counted as TP",
          "[tp-overlap][sim]") {
  // STP braids one microbatch's TP collectives beside another's rings: on one stream the rings'
  // transfers would queue behind them (TE sends them on streams of their own, not NCCL's).
  Study s = qwen_study(true);
  s.parallel.vpp = chunks_per_rank("stp", 1);
  validate_study(s);
  const Schedule sched = make_schedule("stp", ScheduleOptions{2, s.parallel.vpp, 8});
  const test::Simulated r = test::simulated(sched, cost_of(s), false);
  int ring_ops = 0;
  double tp_s = 0;
  for (int i = 0; i < r.dag.size(); ++i) {
    const DagOp& op = r.dag.ops[i];
    CHECK(op.copy_engine == (op.stream == StreamKind::TpRing));
    ring_ops += op.copy_engine ? 1 : 0;
    if (op.stream == StreamKind::Tp || op.stream == StreamKind::TpRing)
      tp_s += r.timeline.end_s[i] - r.timeline.start_s[i];
  }
  // qwen2-7b has 28 layers, 14 per rank; each layer's PreAttn F, PreMLP F, Attn B and MLP B ring
  // sends tp - 1 = 3 transfers: 2 ranks x 8 microbatches x 14 layers x 4 rings x 3.
  CHECK(ring_ops == 2 * 8 * 14 * 4 * 3);
  // The TP comm rate is the TP stream's and the ring lane's busy time over pp x iteration.
  CHECK(r.report.tp_comm_rate == Approx(tp_s / (2 * r.report.iteration_time_s)));
  test::check_pp_idle(r.report, r.dag, r.timeline);
}
