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

// Start times of rank 0's forward compute ops of `unit`, in order.
std::vector<double> f_starts(const test::Simulated& r, UnitKind unit) {
  std::vector<double> starts;
  for (std::size_t i = 0; i < r.dag.ops.size(); ++i) {
    const DagOp& op = r.dag.ops[i];
    if (op.kind == OpKind::Compute && op.unit == unit && op.phase == Phase::F)
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
  CHECK(f_starts(hidden, UnitKind::PreAttn) == std::vector<double>{0, 1, 2, 3});
  test::check_sum_identity(hidden.report);
}

TEST_CASE("a chunk whose transfer outlasts its GEMM piece exposes (tp - 1)(x - p)",
          "[tp-overlap][sim]") {
  // x = 1.5 > p = 1: pieces [0,1], [1.5,2.5], [3,4], [4.5,5.5]; span p + (tp-1)x = 5.5,
  // exposed (tp-1)(x-p) = 1.5.
  const test::Simulated slow = ring_case({.x = 1.5});
  CHECK(f_starts(slow, UnitKind::PreAttn) == std::vector<double>{0, 1.5, 3, 4.5});
  CHECK(slow.report.iteration_time_s == Approx(28 + 1.5));
  CHECK(slow.report.ranks[0].tp_exposed_s == Approx(1.5));
  test::check_pp_idle(slow.report, slow.dag, slow.timeline);
  // The norm before the GEMM (a quarter of the phase, 1 s) and a kernel after it (1 s): pieces of
  // 0.5 s. Head [0,1], pieces [1,1.5], [2.5,3], [4,4.5], [5.5,6], tail [6,7]: span 7, exposed
  // (tp-1)(x-p) = 3; the first transfer waits for the head (it sends what the norm wrote).
  const test::Simulated segment = ring_case({.x = 1.5, .begin = 0.25, .end = 0.75});
  CHECK(f_starts(segment, UnitKind::PreAttn) == std::vector<double>{0, 1, 2.5, 4, 5.5, 6});
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

// Attn F of the uniform symbolic costs (4 s, after PreAttn F's 4 s) reduce-scatters its GEMM in
// 4 chunks: head (core attention) 1 s, GEMM [0.25, 0.75) of it = 2 s in pieces of p = 0.5, tail
// (residual) 1 s; each chunk's reduce-scatter `x` seconds; the pieces `slowdown` times slower.
test::Simulated pipelined_rs_case(double x, double slowdown = 1) {
  CostModel cm = uniform_cost_model({.tf = 16, .tb = 8, .tw = 4, .tar = 0, .ma = 1}, 1);
  UnitCost& attn = cm.chunks[0].layer_units[1];
  REQUIRE(attn.kind == UnitKind::Attn);
  REQUIRE(attn[Phase::F].time_s == 4);
  Collective rs;
  rs.kind = CollectiveKind::ReduceScatter;
  rs.group = Group::Tp;
  rs.position = CollectivePosition::Inside;
  rs.order = InsideOrder::Pipeline;
  rs.steps = 4;
  rs.time_s = 4 * x;
  rs.segment_begin = 0.25;
  rs.segment_end = 0.75;
  rs.compute_slowdown = slowdown;
  attn[Phase::F].collectives = {rs};
  return test::simulated(one_microbatch(), cm, false);
}

}  // namespace

TEST_CASE("a pipelined reduce-scatter exposes its last chunk when each fits under the next GEMM",
          "[tp-overlap][sim]") {
  // x = 0.5 <= p = 0.5. Head [4,5], pieces at 5, 5.5, 6, 6.5 back to back; chunk j's
  // reduce-scatter [5.5,6], [6,6.5], [6.5,7], then the last [7,7.5] after the last piece; the
  // residual tail waits for it: [7.5,8.5]. Exposed: the last chunk's x = 0.5.
  const test::Simulated hidden = pipelined_rs_case(0.5);
  CHECK(f_starts(hidden, UnitKind::Attn) == std::vector<double>{4, 5, 5.5, 6, 6.5, 7.5});
  CHECK(hidden.report.iteration_time_s == Approx(28 + 0.5));
  CHECK(hidden.report.ranks[0].tp_exposed_s == Approx(0.5));
  test::check_sum_identity(hidden.report);
  test::check_pp_idle(hidden.report, hidden.dag, hidden.timeline);
}

TEST_CASE("a pipelined reduce-scatter chunk that outlasts the next GEMM piece is exposed",
          "[tp-overlap][sim]") {
  // x = 1 > p = 0.5: the pieces still run back to back (each writes a buffer slot of its own),
  // the reduce-scatters queue: [5.5,6.5], [6.5,7.5], [7.5,8.5], [8.5,9.5]; the tail starts at
  // 9.5 in place of 7. Exposed x + 3 (x - p) = 1 + 1.5 = 2.5.
  const test::Simulated slow = pipelined_rs_case(1);
  CHECK(f_starts(slow, UnitKind::Attn) == std::vector<double>{4, 5, 5.5, 6, 6.5, 9.5});
  CHECK(slow.report.iteration_time_s == Approx(28 + 2.5));
  CHECK(slow.report.ranks[0].tp_exposed_s == Approx(2.5));
  test::check_sum_identity(slow.report);
}

TEST_CASE("the pipelined reduce-scatter's 16 SMs slow the GEMM pieces by 132/116",
          "[tp-overlap][sim]") {
  // p' = 0.5 x 132 / 116 = 0.568966 s >= x = 0.5: every chunk but the last still hides. Pieces
  // end at 5 + 4 p' = 7.275862, the last reduce-scatter at 7.775862, the tail at 8.775862:
  // 28 + 4 (p' - p) + x = 28 + 2 x 16 / 116 + 0.5 = 28.775862.
  const test::Simulated r = pipelined_rs_case(0.5, 132.0 / 116);
  CHECK(r.report.iteration_time_s == Approx(28 + 2 * 16.0 / 116 + 0.5));
  CHECK(r.report.ranks[0].tp_exposed_s == Approx(0.5));
  test::check_sum_identity(r.report);
}

namespace {

// PreAttn B of the uniform symbolic costs (2 s, the last B of the backward) reduce-scatters its
// output in bulk, `x` seconds, beside its W (1 s) slowed `slowdown` times.
test::Simulated bulk_case(double x, double slowdown = 1) {
  CostModel cm = uniform_cost_model({.tf = 16, .tb = 8, .tw = 4, .tar = 0, .ma = 1}, 1);
  UnitCost& pre_attn = cm.chunks[0].layer_units[0];
  REQUIRE(pre_attn.kind == UnitKind::PreAttn);
  REQUIRE(pre_attn[Phase::B].time_s == 2);
  REQUIRE(pre_attn[Phase::W].time_s == 1);
  Collective rs;
  rs.kind = CollectiveKind::ReduceScatter;
  rs.group = Group::Tp;
  rs.position = CollectivePosition::After;
  rs.time_s = x;
  rs.bulk = true;
  rs.compute_slowdown = slowdown;
  pre_attn[Phase::B].collectives = {rs};
  return test::simulated(one_microbatch(), cm, false);
}

}  // namespace

TEST_CASE("a bulk reduce-scatter beside the wgrad exposes max(0, x - w)", "[tp-overlap][sim]") {
  // F 16 s, then the backward's units B then W: MLP [16,18] [18,19], PreMLP [19,21] [21,22], Attn
  // [22,24] [24,25], PreAttn B [25,27], then its W [27,28] beside the reduce-scatter [27,27+x]
  // on the userbuffers lane; the pass ends with the later of the two.
  const test::Simulated hidden = bulk_case(0.5);
  CHECK(hidden.report.iteration_time_s == Approx(28));
  CHECK(hidden.report.ranks[0].tp_exposed_s == Approx(0).margin(1e-12));
  test::check_sum_identity(hidden.report);
  // x = 1.5 > w = 1: 0.5 exposed.
  const test::Simulated slow = bulk_case(1.5);
  CHECK(slow.report.iteration_time_s == Approx(28.5));
  CHECK(slow.report.ranks[0].tp_exposed_s == Approx(0.5));
  test::check_sum_identity(slow.report);
  // On 16 of 132 SMs the W runs 132/116 x slower: [27, 28.137931], the 0.5 s scatter hidden.
  const test::Simulated shared = bulk_case(0.5, 132.0 / 116);
  CHECK(shared.report.iteration_time_s == Approx(27 + 132.0 / 116));
  CHECK(shared.report.ranks[0].tp_exposed_s == Approx(0).margin(1e-12));
  std::size_t lane = 0;
  for (const DagOp& op : shared.dag.ops) lane += op.stream == StreamKind::TpRing ? 1 : 0;
  CHECK(lane == 1);
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
  // The column backward's reduce-scatter is as without overlap (the re-gather of its saved input
  // beside the dgrad follows it in the list).
  const Collectives a = first_unit(off, UnitKind::PreAttn)[Phase::B].collectives;
  const Collectives b = first_unit(on, UnitKind::PreAttn)[Phase::B].collectives;
  REQUIRE(a.size() == 2);
  REQUIRE(b.size() == 2);
  CHECK(b[0].kind == CollectiveKind::ReduceScatter);
  CHECK(b[0].time_s == a[0].time_s);
}

TEST_CASE("TP overlap pipelines the row forward's reduce-scatter in 4 chunks on 16 SMs",
          "[tp-overlap][cost]") {
  const CostModel off = cost_of(qwen_study(false));
  const CostModel on = cost_of(qwen_study(true));
  const double scattered = 4096.0 * 3584 * 2;  // the reduce-scatter's input: T x h x e
  for (const UnitKind kind : {UnitKind::Attn, UnitKind::MLP}) {
    INFO(name(kind));
    const PhaseCost before = first_unit(off, kind)[Phase::F];
    const PhaseCost rs = first_unit(on, kind)[Phase::F];
    REQUIRE(before.collectives.size() == 1);
    CHECK(before.collectives[0].kind == CollectiveKind::ReduceScatter);
    CHECK(before.collectives[0].position == CollectivePosition::After);
    REQUIRE(rs.collectives.size() == 1);
    const Collective& c = rs.collectives[0];
    CHECK(c.kind == CollectiveKind::ReduceScatter);
    CHECK(c.position == CollectivePosition::Inside);
    CHECK(c.order == InsideOrder::Pipeline);
    CHECK(c.steps == 4);
    CHECK_FALSE(c.copy_engine);
    CHECK(c.bytes == scattered);
    // H100: 132 SMs, 16 for the reduce-scatter: the GEMM runs 132 / 116 times slower.
    CHECK(c.compute_slowdown == Approx(132.0 / 116));
    // Four reduce-scatters of a quarter each: more latency than one of the whole.
    CHECK(c.time_s > before.collectives[0].time_s);
    // The core attention / activation before the GEMM, the residual kernels after it.
    CHECK(c.segment_begin > 0);
    CHECK(c.segment_begin < c.segment_end);
    CHECK(c.segment_end < 1);
    CHECK(rs.time_s == before.time_s);
    CHECK(rs.compute_ops() == 4 + 2);
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
  // Attention's forward runs the CP ring inside: its reduce-scatter stays after the compute.
  // The column backward's reduce-scatter is marked bulk, on TE's 16 of the H100's 132 SMs.
  const Collective bulk = first_unit(cm, UnitKind::PreAttn)[Phase::B].collectives[0];
  CHECK(bulk.bulk);
  CHECK(bulk.compute_slowdown == Approx(132.0 / 116));
  const Collectives attn_f = first_unit(cm, UnitKind::Attn)[Phase::F].collectives;
  REQUIRE(attn_f.size() == 2);
  CHECK(attn_f[0].group == Group::Cp);
  CHECK(attn_f[1].kind == CollectiveKind::ReduceScatter);
  CHECK(attn_f[1].position == CollectivePosition::After);
  CHECK(first_unit(cm, UnitKind::MLP)[Phase::F].collectives[0].order == InsideOrder::Pipeline);
}

TEST_CASE("every schedule keeps the sum identity with TP overlap on, and 1F1B gets faster",
          "[tp-overlap][sim]") {
  for (const std::string& name : schedule_names()) {
    INFO(name);
    Study s = qwen_study(true);
    // 1 chunk where chosen, but 2 for combined-1f1b (it refuses 1 at p > 1, as Megatron does)
    s.parallel.vpp = chunks_per_rank(name, name == "combined-1f1b" ? 2 : 1);
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
  int ring_ops = 0, bulk_ops = 0, column_scatters = 0, regathers = 0, regathers_on_lane = 0;
  double tp_s = 0;
  for (int i = 0; i < r.dag.size(); ++i) {
    const DagOp& op = r.dag.ops[i];
    CHECK(op.copy_engine == (op.stream == StreamKind::TpRing));
    ring_ops += op.copy_engine ? 1 : 0;
    if (op.kind == OpKind::Collective && op.phase == Phase::B &&
        (op.unit == UnitKind::PreAttn || op.unit == UnitKind::PreMLP)) {
      if (op.collective == CollectiveKind::ReduceScatter) {
        ++column_scatters;
        bulk_ops += op.copy_engine ? 1 : 0;
      } else {
        ++regathers;
        regathers_on_lane += op.copy_engine ? 1 : 0;
      }
    }
    if (op.stream == StreamKind::Tp || op.stream == StreamKind::TpRing)
      tp_s += r.timeline.end_s[i] - r.timeline.start_s[i];
  }
  // qwen2-7b has 28 layers, 14 per rank; each layer's PreAttn F, PreMLP F, Attn B and MLP B ring
  // sends tp - 1 = 3 transfers, its Attn F and MLP F reduce-scatter 4 chunks:
  // 2 ranks x 8 microbatches x 14 layers x (4 rings x 3 + 2 x 4). The column backward's
  // reduce-scatter (2 per layer and microbatch) joins the lane in bulk where its W follows its
  // B, and stays on the TP stream where STP splits the W off. The re-gather of the column
  // backward's saved input (TE's bulk all-gather beside the dgrad, 3 transfers of the lowering's
  // 4 dgrad pieces) is on the lane wherever its W runs.
  CHECK(column_scatters == 2 * 8 * 14 * 2);
  CHECK(bulk_ops > 0);
  CHECK(bulk_ops < column_scatters);
  CHECK(regathers == 2 * 8 * 14 * 2 * 3);
  CHECK(regathers_on_lane == regathers);
  CHECK(ring_ops == 2 * 8 * 14 * (4 * 3 + 2 * 4) + bulk_ops + regathers);
  // The TP comm rate is the TP stream's and the ring lane's busy time over pp x iteration.
  CHECK(r.report.tp_comm_rate == Approx(tp_s / (2 * r.report.iteration_time_s)));
  test::check_pp_idle(r.report, r.dag, r.timeline);
}

namespace {

// Under SP a column layer's backward all-gathers its saved input again beside the dgrad
// (add_sp_regather). PreAttn B of the uniform symbolic costs (2 s, the last B of the backward:
// [25, 27], its W [27, 28]) is the dgrad, in 4 pieces of p = 0.5 s beside the gather's 3
// transfers of x / 3; the pieces `slowdown` times slower; on the userbuffers lane (`lane`,
// TE's bulk all-gather) or NCCL's TP stream.
CostModel regather_cost(double x, double slowdown = 1, bool lane = false) {
  CostModel cm = uniform_cost_model({.tf = 16, .tb = 8, .tw = 4, .tar = 0, .ma = 1}, 1);
  UnitCost& pre_attn = cm.chunks[0].layer_units[0];
  REQUIRE(pre_attn.kind == UnitKind::PreAttn);
  REQUIRE(pre_attn[Phase::B].time_s == 2);
  Collective ag;
  ag.kind = CollectiveKind::AllGather;
  ag.group = Group::Tp;
  ag.position = CollectivePosition::Inside;
  ag.steps = 4;
  ag.time_s = x;
  ag.copy_engine = lane;
  ag.compute_slowdown = slowdown;
  pre_attn[Phase::B].collectives = {ag};
  return cm;
}

// Start times of rank 0's backward compute ops of `unit`, in order.
std::vector<double> b_starts(const test::Simulated& r, UnitKind unit) {
  std::vector<double> starts;
  for (std::size_t i = 0; i < r.dag.ops.size(); ++i) {
    const DagOp& op = r.dag.ops[i];
    if (op.kind == OpKind::Compute && op.unit == unit && op.phase == Phase::B)
      starts.push_back(r.timeline.start_s[i]);
  }
  return starts;
}

}  // namespace

TEST_CASE("the SP re-gather hides when its transfers fit the dgrad pieces", "[tp-overlap][sim]") {
  // x = 1.5: transfers of 0.5 = p. Transfer 0 starts once the B's input gradient exists, Attn
  // B's output at 24 (under Attn's W [24, 25]): [24, 24.5]. Piece j + 1 waits for transfer j,
  // transfer j + 1 for transfer j and piece j: transfer 1 [25.5, 26], transfer 2 [26, 26.5],
  // pieces at 25, 25.5, 26, 26.5. The W [27, 28]: nothing exposed.
  const test::Simulated r = test::simulated(one_microbatch(), regather_cost(1.5), false);
  CHECK(b_starts(r, UnitKind::PreAttn) == std::vector<double>{25, 25.5, 26, 26.5});
  CHECK(r.report.iteration_time_s == Approx(28));
  CHECK(r.report.ranks[0].tp_exposed_s == Approx(0).margin(1e-12));
  test::check_sum_identity(r.report);
  test::check_pp_idle(r.report, r.dag, r.timeline);
}

TEST_CASE("an SP re-gather whose transfers outlast the dgrad pieces exposes the rest",
          "[tp-overlap][sim]") {
  // x = 2.4: transfers of 0.8 > p = 0.5. Transfer 0 starts once the B's input gradient exists,
  // Attn B's output at 24 (under Attn's W [24, 25]): [24, 24.8]; piece 0 [25, 25.5]; piece 1
  // waits for transfer 0: [25.5, 26]; transfer 1 after piece 0 [25.5, 26.3]; piece 2 [26.3, 26.8];
  // transfer 2 [26.3, 27.1]; piece 3 [27.1, 27.6]; W [27.6, 28.6]. Exposed 2 x / 3 - 2 p = 0.6.
  const test::Simulated r = test::simulated(one_microbatch(), regather_cost(2.4), false);
  const std::vector<double> starts = b_starts(r, UnitKind::PreAttn);
  REQUIRE(starts.size() == 4);
  CHECK(starts[0] == Approx(25));
  CHECK(starts[1] == Approx(25.5));
  CHECK(starts[2] == Approx(26.3));
  CHECK(starts[3] == Approx(27.1));
  CHECK(r.report.iteration_time_s == Approx(28.6));
  CHECK(r.report.ranks[0].tp_exposed_s == Approx(0.6));
  test::check_sum_identity(r.report);
  test::check_pp_idle(r.report, r.dag, r.timeline);
  // x = 4.5, transfers of 1.5: [24, 25.5], [25.5, 27], [27, 28.5]; piece 3 [28.5, 29], W [29, 30]:
  // exposed 2, the gather's end 28.5 less the dgrad's 27 plus the last piece, p = 0.5.
  const test::Simulated slow = test::simulated(one_microbatch(), regather_cost(4.5), false);
  CHECK(slow.report.iteration_time_s == Approx(30));
  CHECK(slow.report.ranks[0].tp_exposed_s == Approx(2));
  test::check_sum_identity(slow.report);
}

TEST_CASE("NCCL's re-gather slows the dgrad pieces beside it by the contention factor",
          "[tp-overlap][sim]") {
  // x = 0.3: transfers of 0.1. Compute at 1/1.25 speed beside one: 0.08 s of work in its 0.1 s.
  // Transfer 0 runs beside Attn's W from 24 (its input exists): the W ends 0.02 late; transfers
  // 1 and 2 start with pieces 1 and 2, which take 0.52 each. 28 + 3 x 0.02.
  CostModel cm = regather_cost(0.3);
  cm.uniform = false;
  cm.contention = Contention{1.25, 1.0};
  CHECK(simulate(lower(one_microbatch(), cm)).iteration_time_s == Approx(28.06));
  // TE's bulk all-gather on the userbuffers lane: out of the contention model, its 16 of 132 SMs
  // charged on the pieces instead.
  CostModel bulk = regather_cost(0.3, 132.0 / 116, true);
  bulk.uniform = false;
  bulk.contention = Contention{1.25, 1.0};
  CHECK(simulate(lower(one_microbatch(), bulk)).iteration_time_s == Approx(28 + 2 * 16.0 / 116));
}

TEST_CASE("TE's bulk re-gather runs on the userbuffers lane beside dgrad pieces 132/116 slower",
          "[tp-overlap][sim]") {
  // p' = 0.5 x 132 / 116 = 0.568966 >= x / 3 = 0.5: hidden. B [25, 25 + 4 p'], W after:
  // 28 + 4 (p' - p) = 28 + 2 x 16 / 116.
  const test::Simulated r =
      test::simulated(one_microbatch(), regather_cost(1.5, 132.0 / 116, true), false);
  CHECK(r.report.iteration_time_s == Approx(28 + 2 * 16.0 / 116));
  CHECK(r.report.ranks[0].tp_exposed_s == Approx(0).margin(1e-12));
  std::size_t lane = 0;
  for (const DagOp& op : r.dag.ops) lane += op.stream == StreamKind::TpRing ? 1 : 0;
  CHECK(lane == 3);
  test::check_sum_identity(r.report);
}

TEST_CASE("under SP a column unit's backward gathers its saved input again beside the dgrad",
          "[tp-overlap][cost]") {
  // qwen2-7b, seq 4096, tp 4 on H100: the input gathered again is the forward's, T x h x e.
  const double gathered = 4096.0 * 3584 * 2;
  for (const bool overlap : {false, true}) {
    const CostModel cm = cost_of(qwen_study(overlap));
    const CostModel plain = cost_of(qwen_study(false));
    for (const UnitKind kind : {UnitKind::PreAttn, UnitKind::PreMLP}) {
      INFO(name(kind) << (overlap ? " overlap" : ""));
      const UnitCost u = first_unit(cm, kind);
      const Collectives& cs = u[Phase::B].collectives;
      REQUIRE(cs.size() == 2);
      CHECK(cs[0].kind == CollectiveKind::ReduceScatter);
      CHECK(cs[0].bulk == overlap);
      const Collective& ag = cs[1];
      CHECK(ag.kind == CollectiveKind::AllGather);
      CHECK(ag.group == Group::Tp);
      CHECK(ag.position == CollectivePosition::Inside);
      CHECK(ag.order == InsideOrder::Ring);
      CHECK(ag.steps == 4);
      CHECK(ag.bytes == gathered);
      // One NCCL all-gather of the whole, as the forward's before the ring took it over.
      const Collective fwd = first_unit(plain, kind)[Phase::F].collectives[0];
      CHECK(fwd.kind == CollectiveKind::AllGather);
      CHECK(ag.time_s == fwd.time_s);
      CHECK(ag.copy_engine == overlap);
      CHECK(ag.compute_slowdown == (overlap ? Approx(132.0 / 116) : Approx(1)));
      // RoPE's backward (PreAttn) or the gradient's cast before the GEMM, the norm's after it.
      CHECK(ag.segment_begin >= 0);
      CHECK(ag.segment_begin < ag.segment_end);
      CHECK(ag.segment_end < 1);
      CHECK(u[Phase::B].compute_ops() == (ag.segment_begin > 0 ? 6 : 5));
      // The gathered input lives from the B to the W: norm_column_gemm_cost's B allocates the
      // GEMM's output gradient, T x width / tp x e (QKV: (3584 + 2 x 512) / 4 = 1152; FC1:
      // 2 x 18944 / 4 = 9472), the W frees it and the saved shard T / tp x h x e.
      const double width = kind == UnitKind::PreAttn ? 1152 : 9472;
      CHECK(u[Phase::B].alloc_bytes == Approx(4096 * width * 2 + gathered));
      CHECK(u[Phase::W].free_bytes == Approx(4096 * width * 2 + 1024.0 * 3584 * 2 + gathered));
    }
    // The LM head (Megatron's ColumnParallelLinear): NCCL, TP overlap or not.
    const UnitCost head = cm.chunks.back().epilogue.back();
    REQUIRE(head.kind == UnitKind::Head);
    REQUIRE(head[Phase::B].collectives.size() == 2);
    const Collective& ag = head[Phase::B].collectives[1];
    CHECK(ag.kind == CollectiveKind::AllGather);
    CHECK(ag.bytes == gathered);
    CHECK_FALSE(ag.copy_engine);
    CHECK(ag.compute_slowdown == 1);
  }
  // Without SP the saved input is whole: nothing to gather.
  StudyOverrides o = test::layout_overrides("qwen2-7b", "h100x64", 4, 2, 4096, false);
  const CostModel no_sp = cost_of(load_study(resolve_config("studies", "default"), o));
  REQUIRE(first_unit(no_sp, UnitKind::PreMLP)[Phase::B].collectives.size() == 1);
  CHECK(first_unit(no_sp, UnitKind::PreMLP)[Phase::B].collectives[0].kind ==
        CollectiveKind::AllReduce);
}

TEST_CASE("under FP8 the SP re-gather carries the input as the forward saved it, quantized",
          "[tp-overlap][cost][fp8]") {
  // Delayed scaling: the row-wise FP8 data, 1 byte per element, as the forward's all-gather.
  StudyOverrides o = qwen_sp(false);
  o.precision = Precision::Fp8Delayed;
  const CostModel cm = cost_of(load_study(resolve_config("studies", "default"), o));
  const UnitCost u = first_unit(cm, UnitKind::PreMLP);
  REQUIRE(u[Phase::B].collectives.size() == 2);
  CHECK(u[Phase::B].collectives[1].bytes == 4096.0 * 3584);
  CHECK(u[Phase::B].collectives[1].bytes == u[Phase::F].collectives[0].bytes);
}
