#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "braid/profile.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "hand_schedules.hpp"

using namespace braid;
using namespace braid::test;

namespace {

int find_op(const Dag& dag, const std::string& name, int rank = 0) {
  for (int i = 0; i < dag.size(); ++i)
    if (dag.ops[i].rank == rank && op_name(dag, i) == name) return i;
  FAIL("no op " << name << " on rank " << rank);
  return -1;
}

}  // namespace

// Unit costs: a forward unit takes 1, a B unit 2, a W unit 2, each All-Reduce 1.
// A plain F is PreAttn [0,1] Attn [1,2] AR [2,3] PreMLP [3,4] MLP [4,5] AR [5,6]: its output is
// ready at 6. A full B is 16 long; its gradient is ready 1 before its end (the PreAttn AR runs
// under W.PreAttn) but sent at its end, when the instruction ends (Megatron sends after
// backward_step returns).
TEST_CASE("1F1B, 2 ranks, 2 microbatches: exact timeline", "[sim]") {
  const Dag dag = lower(one_f_one_b_p2_m2(), uniform_cost_model(unit_costs(), 2));
  const Timeline t = simulate(dag);
  // rank 0: F0 [0,5] F1 [6,11] B0 [28,44] B1 [50,66]
  // rank 1: F0 [6,11] B0 [12,28] (gradient sent at 28) F1 [28,33] B1 [34,50] (sent at 50)
  CHECK(t.iteration_time_s == 66.0);
  CHECK(t.start_s[find_op(dag, "F0.1 PreAttn L0", 0)] == 6.0);
  CHECK(t.start_s[find_op(dag, "B0.0 MLP L0", 0)] == 28.0);
  CHECK(t.start_s[find_op(dag, "B0.1 MLP L0", 0)] == 50.0);
  CHECK(t.start_s[find_op(dag, "F0.0 PreAttn L1", 1)] == 6.0);
  CHECK(t.start_s[find_op(dag, "B0.0 MLP L1", 1)] == 12.0);
  CHECK(t.start_s[find_op(dag, "F0.1 PreAttn L1", 1)] == 28.0);
  CHECK(t.end_s[find_op(dag, "AR B0.1 PreAttn L1", 1)] == 49.0);
  // Activation memory (M_a = 4): rank 0 holds two microbatches, rank 1 one.
  CHECK(t.peak_activation_bytes == std::vector<double>{8.0, 4.0});
  CHECK(t.peak_activation_time_s[0] == 10.0);  // F0.1 MLP allocates its quarter at 10
}

TEST_CASE("1F1B-I, 2 ranks, 2 chunks, 2 microbatches: exact timeline", "[sim]") {
  const Dag dag = lower(interleaved_p2_m2(), uniform_cost_model(unit_costs(), 4));
  const Timeline t = simulate(dag);
  // rank 0: F0.0 [0,5] F0.1 [6,11] F1.0 [12,17] F1.1 [18,23] B1.0 [40,56] B1.1 [62,78]
  //         B0.0 [78,94] B0.1 [94,110]
  // rank 1: F0.0 [6,11] F0.1 [12,17] F1.0 [18,23] B1.0 [24,40] F1.1 [40,45] B1.1 [46,62]
  //         B0.0 [62,78] B0.1 [78,94]
  CHECK(t.iteration_time_s == 110.0);
  CHECK(t.start_s[find_op(dag, "B1.0 MLP L2", 0)] == 40.0);
  CHECK(t.start_s[find_op(dag, "B0.1 MLP L0", 0)] == 94.0);
  CHECK(t.end_s[find_op(dag, "W0.1 PreAttn L1", 1)] == 94.0);
  // (3p - 2) M_a = 4 M_a on rank 0; rank 1 holds 3 M_a.
  CHECK(t.peak_activation_bytes == std::vector<double>{16.0, 12.0});
}

TEST_CASE("contention slows compute and communication by the profile's factors", "[sim]") {
  // One rank, F then a full B; only the B All-Reduce after PreMLP is kept (time 1). It runs
  // under W.PreMLP: from 10 both run together, compute 1.5x slower, the collective 2x slower.
  CostModel cost = uniform_cost_model(unit_costs(), 1);
  keep_only_collective(cost, 2, Phase::B, 1.0);
  cost.uniform = false;
  cost.contention = Contention{1.5, 2.0};
  const Dag dag = lower(make("c", 1, 1, 1, Placement::Loop, {{F(0, 0), B(0, 0)}}), cost);
  const Timeline t = simulate(dag);
  // F [0,4]; B.MLP [4,6] W.MLP [6,8] B.PreMLP [8,10]; AR from 10 at half speed: ends at 12.
  // W.PreMLP from 10: by 12 it did 2/1.5 of its 2, the last 2/3 at full speed: ends 12 + 2/3.
  CHECK(t.end_s[find_op(dag, "AR B0.0 PreMLP L0")] == Approx(12.0).epsilon(1e-15));
  CHECK(t.end_s[find_op(dag, "W0.0 PreMLP L0")] == Approx(12.0 + 2.0 / 3.0).epsilon(1e-15));
  CHECK(t.iteration_time_s == Approx(12.0 + 2.0 / 3.0 + 8.0).epsilon(1e-15));
  // Without contention: AR [10,11] under W.PreMLP [10,12]; the B ends at 20.
  const Timeline free = simulate(dag, SimOptions{false, false});
  CHECK(free.end_s[find_op(dag, "AR B0.0 PreMLP L0")] == 11.0);
  CHECK(free.iteration_time_s == 20.0);
}

TEST_CASE("blocking P2P holds the sender's next compute op, and async does not", "[sim]") {
  // 1F1B p = 2, m = 2, no collectives, every send takes 3.
  CostModel cost = uniform_cost_model(UniformCosts{4, 8, 8, 0, 4}, 2);
  cost.uniform = false;
  cost.intra_p2p_Bps = 1;
  cost.node_of_rank = {0, 0};
  for (ChunkCost& c : cost.chunks) c.output_bytes = 3;
  const Schedule s = one_f_one_b_p2_m2();
  const Dag blocking = lower(s, cost);
  const Timeline tb = simulate(blocking);
  // F0.0 [0,4], send [4,7]; F0.1 waits for the send: [7,11].
  CHECK(tb.end_s[find_op(blocking, "send F0.0 r0->r1")] == 7.0);
  CHECK(tb.start_s[find_op(blocking, "F0.1 PreAttn L0")] == 7.0);
  const Dag async = lower(s, cost, LowerOptions{P2pMode::Async});
  const Timeline ta = simulate(async);
  CHECK(ta.start_s[find_op(async, "F0.1 PreAttn L0")] == 4.0);
  // Either way rank 1 starts when the activation arrives.
  CHECK(ta.start_s[find_op(async, "F0.0 PreAttn L1", 1)] == 7.0);
  CHECK(tb.start_s[find_op(blocking, "F0.0 PreAttn L1", 1)] == 7.0);
}

TEST_CASE("offload frees at the end of the copy, reload allocates at its start", "[sim]") {
  // One rank, one microbatch, no collectives; D2H and H2D move 1 byte per second, M_a = 4.
  CostModel cost = uniform_cost_model(UniformCosts{4, 8, 8, 0, 4}, 1);
  cost.uniform = false;
  cost.d2h_Bps = 1;
  cost.h2d_Bps = 1;
  const Dag dag = lower(
      make("off", 1, 1, 1, Placement::Loop, {{F(0, 0), Offload(0, 0), Reload(0, 0), B(0, 0)}}),
      cost);
  const Timeline t = simulate(dag, SimOptions{true, true});
  // F [0,4]; OFFLOAD [4,8] frees 4 at 8; RELOAD [8,12] allocates 4 at 8; B [12,28].
  CHECK(t.start_s[find_op(dag, "RELOAD 0.0")] == 8.0);
  CHECK(t.start_s[find_op(dag, "B0.0 MLP L0")] == 12.0);
  CHECK(t.iteration_time_s == 28.0);
  // At 8 the free comes before the allocation: the peak stays M_a.
  CHECK(t.peak_activation_bytes[0] == 4.0);
  std::vector<std::pair<double, double>> samples;
  for (const MemorySample& m : t.memory) samples.emplace_back(m.time_s, m.activation_bytes);
  CHECK(samples == std::vector<std::pair<double, double>>{
                       {0, 1}, {1, 2}, {2, 3}, {3, 4}, {8, 4}, {14, 3}, {18, 2}, {22, 1}, {26, 0}});
}

// A search skips timing a layout whose activation peak, known before timing, is over the cap.
TEST_CASE("untimed activation peaks: the stream order's peaks, or none when copies move memory",
          "[sim]") {
  // Memory on the compute stream alone: the peaks of the exact timelines above (M_a = 4).
  const std::optional<std::vector<double>> one =
      untimed_activation_peaks(lower(one_f_one_b_p2_m2(), uniform_cost_model(unit_costs(), 2)));
  REQUIRE(one);
  CHECK(*one == std::vector<double>{8.0, 4.0});
  const std::optional<std::vector<double>> inter =
      untimed_activation_peaks(lower(interleaved_p2_m2(), uniform_cost_model(unit_costs(), 4)));
  REQUIRE(inter);
  CHECK(*inter == std::vector<double>{16.0, 12.0});
  // An offload frees on the D2H stream and a reload allocates on H2D: their order against the
  // compute's depends on the times.
  CostModel cost = uniform_cost_model(UniformCosts{4, 8, 8, 0, 4}, 1);
  cost.uniform = false;
  cost.d2h_Bps = 1;
  cost.h2d_Bps = 1;
  const Dag off = lower(
      make("off", 1, 1, 1, Placement::Loop, {{F(0, 0), Offload(0, 0), Reload(0, 0), B(0, 0)}}),
      cost);
  CHECK_FALSE(untimed_activation_peaks(off));
}

TEST_CASE("a deadlocked schedule is rejected by the simulator naming the cycle", "[sim]") {
  const Schedule s =
      make("deadlock", 2, 1, 2, Placement::Loop,
           {{F(0, 0), B(0, 0), F(0, 1), B(0, 1)}, {F(0, 1), F(0, 0), B(0, 0), B(0, 1)}});
  const Dag dag = lower(s, uniform_cost_model(unit_costs(), 2));
  CHECK_THROWS_WITH(simulate(dag),
                    Catch::Contains("dependency cycle") && Catch::Contains("send B0.0 r1->r0"));
}

// ---- the fast path (no contention) against the event engine ------------------------------------

namespace {

// Everything a Timeline reports, compared exactly (==, not Approx).
void check_identical(const Dag& dag, const Timeline& fast, const Timeline& events) {
  REQUIRE(fast.fast_path);
  REQUIRE_FALSE(events.fast_path);
  CHECK(fast.iteration_time_s == events.iteration_time_s);
  CHECK(fast.events == events.events);
  CHECK(fast.peak_activation_bytes == events.peak_activation_bytes);
  CHECK(fast.peak_activation_time_s == events.peak_activation_time_s);
  int differ = 0;
  for (int i = 0; i < dag.size(); ++i)
    differ += fast.start_s[i] != events.start_s[i] || fast.end_s[i] != events.end_s[i];
  CHECK(differ == 0);
}

// Calls check(schedule, its costs) for every schedule with offload off and on (stp-offload
// offloads by itself), at pp and at least m microbatches.
template <class CostOf, class Check>
void for_every_schedule(int pp, int m, CostOf cost_of, Check check) {
  for (const std::string& name : schedule_names())
    for (const double offload : {0.0, 0.5}) {
      if (offload > 0 && name == "stp-offload") continue;
      ScheduleOptions o;
      o.pp = pp;
      o.vpp = 2;
      o.microbatches = std::max(m, min_microbatches(name, o));
      o.offload = offload;
      const Schedule s = make_schedule(name, o);
      INFO(s.name << " pp " << pp << " m " << o.microbatches);
      check(s, cost_of(s));
    }
}

// Calls run(pp, m, costs of a schedule) with the default study's sizes and costs.
template <class Run>
void on_default_study(Run run) {
  const Study study = load_study(resolve_config("studies", "default"));
  const Profile profile = load_profile(resolve_config("profiles", study.cluster.profile));
  run(study.parallel.pp, study.training.microbatches,
      [&](const Schedule& s) { return build_cost_model(study, profile, s.virtual_stages()); });
}

// The fast path against the event engine on every schedule.
template <class CostOf>
void every_schedule(int pp, int m, CostOf cost_of) {
  for_every_schedule(pp, m, cost_of, [](const Schedule& s, const CostModel& cost) {
    const Dag dag = lower(s, cost);
    SimOptions no_contention;
    no_contention.contention = false;
    check_identical(dag, simulate(dag, no_contention), simulate_events(dag, no_contention));
    // Both slowdowns 1.0 with contention on takes the fast path too.
    CostModel flat = cost;
    flat.contention = Contention{1.0, 1.0};
    flat.copy_contention = CopyContention{};
    const Dag flat_dag = lower(s, flat);
    check_identical(flat_dag, simulate(flat_dag), simulate_events(flat_dag));
  });
}

}  // namespace

TEST_CASE("the fast path equals the event engine on every schedule with uniform costs",
          "[sim][fast]") {
  for (const int pp : {2, 4})
    every_schedule(pp, 3 * pp, [](const Schedule& s) {
      return uniform_cost_model(UniformCosts{4, 8, 8, 2, 1}, s.virtual_stages());
    });
  // Zero-time W units and collectives (the peer's F = 1, B = 2 comparison): rounds of zero-time
  // ops at one instant.
  every_schedule(4, 8, [](const Schedule& s) {
    return uniform_cost_model(UniformCosts{1, 2, 0, 0, 1}, s.virtual_stages());
  });
}

TEST_CASE("the fast path equals the event engine on every schedule with study costs",
          "[sim][fast]") {
  on_default_study([](int pp, int m, auto cost_of) { every_schedule(pp, m, cost_of); });
}

TEST_CASE("the fast path merges a rank's streams when memory moves on more than one",
          "[sim][fast]") {
  // Lowering puts memory on the compute stream alone (copies aside), where the pass replays it
  // in stream order; memory on a TP stream too needs the merge and its zero-time rounds. Every
  // collective of ranks 0 and 1 holds 3 KiB for its run (zero-time ones: within their round).
  for (const double tar : {0.0, 1.0}) {
    ScheduleOptions o;
    o.pp = 4;
    o.vpp = 2;
    o.microbatches = 8;
    const Schedule s = make_schedule("1f1b-i", o);
    Dag dag = lower(s, uniform_cost_model(UniformCosts{1, 2, 0, tar, 1}, s.virtual_stages()));
    // Each of those ops gets a cost of its own: its time, with the memory.
    int moved = 0;
    for (DagOp& op : dag.ops)
      if (op.stream == StreamKind::Tp && op.rank <= 1) {
        OpCost c = dag.costs[op.cost];
        c.alloc_bytes = c.free_bytes = 3072;
        op.cost = static_cast<std::int32_t>(dag.costs.size());
        dag.costs.push_back(c);
        ++moved;
      }
    REQUIRE(moved > 0);
    dag.memory_exact = false;  // memory_sums_exact checks the edited amounts
    INFO("tar " << tar);
    check_identical(dag, simulate(dag), simulate_events(dag));
  }
}

TEST_CASE("the fast path steps aside for contention, memory samples and inexact sums", "[sim]") {
  const Schedule s = one_f_one_b_p2_m2();
  CostModel cost = uniform_cost_model(unit_costs(), 2);
  CHECK(simulate(lower(s, cost)).fast_path);
  SimOptions record;
  record.record_memory = true;
  CHECK_FALSE(simulate(lower(s, cost), record).fast_path);
  CostModel slow = cost;
  slow.uniform = false;
  slow.contention = Contention{1.25, 1.5};
  CHECK_FALSE(simulate(lower(s, slow)).fast_path);
  // 0.1 is no multiple of 2^-10: sums could round differently in another order.
  const CostModel odd = uniform_cost_model(UniformCosts{4, 8, 8, 2, 0.1}, 2);
  const Dag dag = lower(s, odd);
  const Timeline t = simulate(dag);
  CHECK_FALSE(t.fast_path);
  CHECK(t.iteration_time_s == 66.0);
}

TEST_CASE("the fast path steps aside when an instant holds more zero-time rounds than it counts",
          "[sim][fast]") {
  // All costs zero: every op ends at time 0, each in the zero-time round after its inputs'. The
  // chain through m microbatches takes 15 m + 14 rounds: 30,014 at m = 2,000 fit in the 32,767
  // the fast path keeps, 33,014 at m = 2,200 do not.
  const auto timeline = [](int microbatches) {
    ScheduleOptions options;
    options.pp = 2;
    options.microbatches = microbatches;
    return simulate(lower(make_schedule("1f1b", options), uniform_cost_model({0, 0, 0, 0, 1}, 2)));
  };
  CHECK(timeline(2000).fast_path);
  const Timeline t = timeline(2200);
  CHECK_FALSE(t.fast_path);
  CHECK(t.iteration_time_s == 0.0);
  CHECK(t.peak_activation_bytes == std::vector<double>{2.0, 1.0});
}

namespace {

// One rank: `inputs` ops on the TP stream one after another (1 s each), then a compute op that
// waits for all of them (its dependencies, not its stream: it is first on the compute stream).
Dag fan_in(int inputs) {
  Dag dag;
  dag.schedule = "fan-in";
  dag.memory_exact = true;
  const int n = inputs + 1;
  dag.ops.resize(n);  // each of cost 0: 1 s
  dag.costs = {OpCost{.duration_s = 1}};
  for (int i = 0; i < inputs; ++i) {
    dag.ops[i].kind = OpKind::Collective;
    dag.ops[i].stream = StreamKind::Tp;
  }
  dag.pred_begin.assign(n + 1, 0);
  dag.pred_begin[n] = inputs;
  for (int i = 0; i < inputs; ++i) dag.preds.push_back(i);
  dag.stream_begin.assign(kStreamsPerRank + 1, n);
  dag.stream_begin[0] = 0;  // compute: the waiting op
  dag.stream_begin[1] = 1;  // tp: the others
  dag.stream_ops.push_back(inputs);
  dag.stream_prev.assign(n, -1);
  for (int i = 0; i < inputs; ++i) {
    dag.stream_ops.push_back(i);
    if (i > 0) dag.stream_prev[i] = i - 1;
  }
  return dag;
}

// Two ranks, every stream of both: op 0, 2 s on the last stream of rank 1, and on each of the
// other 13 streams two ops of 1 s, the first waiting for op 0.
Dag fan_out() {
  Dag dag;
  dag.schedule = "fan-out";
  dag.memory_exact = true;
  dag.pp = 2;
  const int streams = 2 * kStreamsPerRank;
  const int n = 1 + 2 * (streams - 1);
  dag.costs = {OpCost{.duration_s = 1}, OpCost{.duration_s = 2}};
  dag.ops.resize(n);
  dag.stream_prev.assign(n, -1);
  dag.pred_begin.assign(2, 0);  // op 0 waits for nothing
  for (int sid = 0; sid < streams; ++sid) {
    dag.stream_begin.push_back(static_cast<int>(dag.stream_ops.size()));
    const int first = static_cast<int>(dag.stream_ops.size());
    const int ops_here = sid == streams - 1 ? 1 : 2;
    for (int k = 0; k < ops_here; ++k) {
      // Op 0 is the last stream's one op; the others follow in stream order.
      const int i = sid == streams - 1 ? 0 : 1 + 2 * sid + k;
      dag.stream_ops.push_back(i);
      dag.ops[i].rank = static_cast<std::int16_t>(sid / kStreamsPerRank);
      dag.ops[i].stream = static_cast<StreamKind>(sid % kStreamsPerRank);
      if (k == 1) dag.stream_prev[i] = dag.stream_ops[first];
    }
  }
  dag.stream_begin.push_back(n);
  dag.ops[0].cost = 1;
  for (int i = 1; i < n; ++i) {
    if (i % 2 == 1) dag.preds.push_back(0);  // the first op of its stream
    dag.pred_begin.push_back(static_cast<int>(dag.preds.size()));
  }
  return dag;
}

}  // namespace

TEST_CASE("the fast path times an op of any number of inputs", "[sim][fast]") {
  // No count of inputs is kept per op: 65,536 and 70,000 are timed like 2.
  for (const int inputs : {2, 65536, 70000}) {
    INFO(inputs << " inputs");
    const Dag dag = fan_in(inputs);
    const Timeline fast = simulate(dag);
    CHECK(fast.fast_path);
    const Timeline events = simulate_events(dag);
    CHECK(fast.iteration_time_s == inputs + 1.0);
    CHECK(fast.start_s == events.start_s);
    CHECK(fast.end_s == events.end_s);
    CHECK(critical_pred(dag, fast, inputs) == inputs - 1);
  }
}

TEST_CASE("every stream waiting on one op goes on when it ends", "[sim][fast]") {
  // Whatever order the pass takes the streams in, each of the 13 stops at its first op until op 0
  // is timed, and each then times both its ops.
  const Dag dag = fan_out();
  const Timeline fast = simulate(dag);
  const Timeline events = simulate_events(dag);
  check_identical(dag, fast, events);
  CHECK(fast.iteration_time_s == 4.0);
  CHECK(fast.start_s[0] == 0.0);
  CHECK(fast.end_s[0] == 2.0);
  for (int i = 1; i < dag.size(); ++i) {
    INFO("op " << i);
    CHECK(fast.start_s[i] == (i % 2 == 1 ? 2.0 : 3.0));
    CHECK(fast.end_s[i] == fast.start_s[i] + 1.0);
  }
}

TEST_CASE("an op's critical predecessor is the one that ended last, ties to the lowest index",
          "[sim]") {
  // fan_in(3): ops 0, 1, 2 one after another on the TP stream, op 3 waits on all three. The ends
  // are set by hand, so each rule of the choice is met on its own.
  const Dag dag = fan_in(3);
  Timeline t;
  t.end_s = {7, 5, 5, 8};
  CHECK(critical_pred(dag, t, 0) == -1);  // no dependency, first on its stream
  CHECK(critical_pred(dag, t, 1) == 0);   // its stream predecessor only
  CHECK(critical_pred(dag, t, 3) == 0);   // the latest end
  t.end_s = {2, 5, 5, 8};
  CHECK(critical_pred(dag, t, 3) == 1);  // 1 and 2 end together: the lower index
  t.end_s = {2, 4, 5, 8};
  CHECK(critical_pred(dag, t, 3) == 2);
}

TEST_CASE("both engines start an op when its critical predecessor ends", "[sim]") {
  // Every op with a predecessor starts at its critical predecessor's end, under either engine;
  // an op without one starts at 0 (docs/simulator.md, "Critical predecessor").
  const Dag dag = lower(one_f_one_b_p2_m2(), uniform_cost_model(unit_costs(), 2));
  for (const Timeline& t : {simulate(dag), simulate_events(dag)}) {
    int wrong = 0;
    for (int i = 0; i < dag.size(); ++i) {
      const int p = critical_pred(dag, t, i);
      wrong += p < 0 ? t.start_s[i] != 0.0 : t.end_s[p] != t.start_s[i];
    }
    CHECK(wrong == 0);
  }
}

// ---- zero-time ops folded away (LowerOptions::fold_zero_time) -----------------------------------

namespace {

// Everything the report says but the op count and the critical path, compared exactly.
void check_same_report(const Report& a, const Report& b) {
  CHECK(a.iteration_time_s == b.iteration_time_s);
  REQUIRE(a.ranks.size() == b.ranks.size());
  for (std::size_t r = 0; r < a.ranks.size(); ++r) {
    INFO("rank " << r);
    CHECK(a.ranks[r].busy_s == b.ranks[r].busy_s);
    CHECK(a.ranks[r].tp_exposed_s == b.ranks[r].tp_exposed_s);
    CHECK(a.ranks[r].pp_idle_s == b.ranks[r].pp_idle_s);
    CHECK(a.ranks[r].offload_stall_s == b.ranks[r].offload_stall_s);
    CHECK(a.ranks[r].dp_exposed_s == b.ranks[r].dp_exposed_s);
    CHECK(a.ranks[r].optimizer_s == b.ranks[r].optimizer_s);
    CHECK(a.ranks[r].activation_peak_bytes == b.ranks[r].activation_peak_bytes);
    CHECK(a.ranks[r].peak_memory_bytes == b.ranks[r].peak_memory_bytes);
  }
  CHECK(a.tp_bubble_rate == b.tp_bubble_rate);
  CHECK(a.pp_bubble_rate == b.pp_bubble_rate);
  CHECK(a.offload_stall_rate == b.offload_stall_rate);
  CHECK(a.critical_path.compute_s + a.critical_path.collective_s + a.critical_path.p2p_s +
            a.critical_path.copy_s ==
        Approx(b.critical_path.compute_s + b.critical_path.collective_s + b.critical_path.p2p_s +
               b.critical_path.copy_s));
  // And every other field of the JSON report, byte for byte.
  Report same = b;
  same.ops = a.ops;
  same.critical_path = a.critical_path;
  CHECK(report_json(same) == report_json(a));
}

// Folded and unfolded DAGs of every schedule (offload off and on) give the same report, through
// the fast path and through the event engine; returns the ops folded away in all.
template <class CostOf>
int fold_every_schedule(int pp, int m, CostOf cost_of) {
  int folded = 0;
  for_every_schedule(pp, m, cost_of, [&](const Schedule& s, const CostModel& cost) {
    LowerOptions fold;
    fold.fold_zero_time = true;
    const Dag full = lower(s, cost), lean = lower(s, cost, fold);
    folded += full.size() - lean.size();
    check_same_report(make_report("x", s, cost, full, simulate(full)),
                      make_report("x", s, cost, lean, simulate(lean)));
    check_same_report(make_report("x", s, cost, full, simulate_events(full)),
                      make_report("x", s, cost, lean, simulate_events(lean)));
  });
  return folded;
}

// Uniform mode's sends are never created when folding (they take no time): the lean DAG must be
// the one the builder's fold leaves when they are created. The same costs marked non-uniform
// (with asynchronous P2P) create them, and the fold leaves them out; both DAGs must hold the same
// ops with the same dependencies (the fold also drops an op's stream predecessor from its list)
// and give the same timeline, critical predecessors included, through both engines. (Real costs
// also end each rank with its optimizer step, which takes no time here: the ops after the lean
// DAG's.)
void check_sends_skipped_as_folded(const Schedule& s, const CostModel& cost) {
  LowerOptions fold;
  fold.fold_zero_time = true;
  fold.p2p = P2pMode::Async;
  CostModel marked = cost;
  marked.uniform = false;
  const Dag lean = lower(s, cost, fold), folded = lower(s, marked, fold);
  int sends = 0;
  for (const DagOp& op : lower(s, marked, LowerOptions{}).ops) sends += op.kind == OpKind::P2P;
  CHECK(sends > 0);
  REQUIRE(lean.size() + s.pp == folded.size());
  for (int i = lean.size(); i < folded.size(); ++i) CHECK(folded.ops[i].kind == OpKind::Optimizer);
  int differ = 0;
  for (int i = 0; i < lean.size(); ++i) {
    const DagOp &a = lean.ops[i], &b = folded.ops[i];
    differ += a.kind != b.kind || a.stream != b.stream || a.rank != b.rank || a.mb != b.mb ||
              a.phase != b.phase || lean.cost(i).duration_s != folded.cost(i).duration_s ||
              lean.stream_prev[i] != folded.stream_prev[i];
    std::vector<int> pa, pb;
    for (int j = lean.pred_begin[i]; j < lean.pred_begin[i + 1]; ++j)
      if (lean.preds[j] != lean.stream_prev[i]) pa.push_back(lean.preds[j]);
    for (int j = folded.pred_begin[i]; j < folded.pred_begin[i + 1]; ++j)
      if (folded.preds[j] != folded.stream_prev[i]) pb.push_back(folded.preds[j]);
    differ += pa != pb;
  }
  CHECK(differ == 0);
  CHECK(lean.p2p_blocking == folded.p2p_blocking);
  for (const bool events : {false, true}) {
    const Timeline a = events ? simulate_events(lean) : simulate(lean);
    const Timeline b = events ? simulate_events(folded) : simulate(folded);
    CHECK(a.iteration_time_s == b.iteration_time_s);
    const auto lean_part = [&](const std::vector<double>& v) {
      return std::vector<double>(v.begin(), v.begin() + lean.size());
    };
    CHECK(a.start_s == lean_part(b.start_s));
    CHECK(a.end_s == lean_part(b.end_s));
    int preds_differ = 0;
    for (int i = 0; i < lean.size(); ++i)
      preds_differ += critical_pred(lean, a, i) != critical_pred(folded, b, i);
    CHECK(preds_differ == 0);
  }
}

}  // namespace

TEST_CASE("zero-time collectives and sends folded away change no reported figure", "[sim][fold]") {
  // Uniform mode: sends take no time (never created); with tar = 0 the collectives too.
  // tw = 0: the W units are not created either (tar = 2 keeps the collectives).
  for (const UniformCosts& u : {UniformCosts{4, 8, 8, 2, 1}, UniformCosts{1, 2, 0, 0, 1},
                                UniformCosts{1, 2, 0, 2, 1}, UniformCosts{1, 2, 1, 0, 1}})
    for (const int pp : {2, 4}) {
      const auto cost_of = [&](const Schedule& s) {
        return uniform_cost_model(u, s.virtual_stages());
      };
      CHECK(fold_every_schedule(pp, 3 * pp, cost_of) > 0);
      // With tw > 0 no W unit is left out, so only the sends tell the two DAGs apart.
      if (u.tw > 0) for_every_schedule(pp, 3 * pp, cost_of, check_sends_skipped_as_folded);
    }
  // tb = 0: B units free memory in no time, so nothing is left out.
  CHECK(fold_every_schedule(4, 8, [&](const Schedule& s) {
          return uniform_cost_model(UniformCosts{1, 0, 0, 0, 1}, s.virtual_stages());
        }) == 0);
  // Study costs: every op takes time; nothing is folded and nothing changes.
  on_default_study([](int pp, int m, auto cost_of) { fold_every_schedule(pp, m, cost_of); });
}

TEST_CASE("zero-time W units and collectives of uniform mode are not created when folding",
          "[sim][fold]") {
  // F = 1, B = 2, W = 0, tar = 0: the folded DAG holds exactly the ops that take time (its F and
  // B units) on every schedule without offload; with offload (copies take no time and free
  // memory) nothing is left out.
  const auto cost_of = [](const Schedule& s) {
    return uniform_cost_model(UniformCosts{1, 2, 0, 0, 1}, s.virtual_stages());
  };
  for_every_schedule(4, 8, cost_of, [](const Schedule& s, const CostModel& cost) {
    LowerOptions fold;
    fold.fold_zero_time = true;
    const Dag full = lower(s, cost), lean = lower(s, cost, fold);
    bool offload = false;
    int timed = 0, w = 0;
    for (const DagOp& op : full.ops) {
      offload = offload || op.kind == OpKind::Offload;
      timed += full.costs[op.cost].duration_s > 0;
      w += op.kind == OpKind::Compute && op.phase == Phase::W;
    }
    CHECK(w > 0);
    if (offload) {
      CHECK(lean.size() == full.size());
      return;
    }
    CHECK(lean.size() == timed);
    for (const DagOp& op : lean.ops) {
      CHECK(lean.costs[op.cost].duration_s > 0);
      CHECK(op.kind == OpKind::Compute);
      CHECK(op.phase != Phase::W);
    }
  });
}

TEST_CASE("the exact memory sums the lowering infers from the costs hold on the lowered DAG",
          "[sim][fold]") {
  // Dag::memory_exact lets the fold and the fast path skip memory_sums_exact: it must never claim
  // what the DAG does not satisfy, and it is found on uniform costs with M_a = 1.
  int known = 0;
  for (const double ma : {1.0, 0.1})
    for_every_schedule(
        4, 8,
        [&](const Schedule& s) {
          return uniform_cost_model(UniformCosts{4, 8, 8, 2, ma}, s.virtual_stages());
        },
        [&](const Schedule& s, const CostModel& cost) {
          const Dag dag = lower(s, cost);
          if (dag.memory_exact) CHECK(memory_sums_exact(dag));
          CHECK(dag.memory_exact == (ma == 1.0));
          known += dag.memory_exact;
        });
  CHECK(known > 0);
  on_default_study([](int pp, int m, auto cost_of) {
    for_every_schedule(pp, m, cost_of, [](const Schedule& s, const CostModel& cost) {
      const Dag dag = lower(s, cost);
      if (dag.memory_exact) CHECK(memory_sums_exact(dag));
    });
  });
}

TEST_CASE("the lowering finds the memory sums exact rank by rank, not only for the whole job",
          "[sim][fold]") {
  // 1F1B, p 8, m 8, M_a = 2^36 bytes: a rank's allocs and frees, times the microbatches, stay
  // within the 2^42 that memory_sums_exact allows per rank; the eight ranks together do not.
  const Schedule s = generated("1f1b", 8, 8);
  const CostModel cost = uniform_cost_model(UniformCosts{4, 8, 8, 2, 68719476736.0}, 8);
  const Dag dag = lower(s, cost);
  CHECK(memory_sums_exact(dag));
  CHECK(dag.memory_exact);
  // Eight times more: now one rank's sums could pass 2^42, and neither claims them exact.
  const Dag big = lower(s, uniform_cost_model(UniformCosts{4, 8, 8, 2, 549755813888.0}, 8));
  CHECK_FALSE(big.memory_exact);
  CHECK_FALSE(memory_sums_exact(big));
}

TEST_CASE("folding leaves ops that move memory and compute ops in place", "[sim][fold]") {
  // 1F1B, p 2, m 2 in uniform mode: the four sends (one F and one B per microbatch, no time)
  // go; the compute ops and the collectives (which take time) stay.
  const Schedule s = one_f_one_b_p2_m2();
  const CostModel cost = uniform_cost_model(unit_costs(), 2);
  LowerOptions fold;
  fold.fold_zero_time = true;
  const Dag full = lower(s, cost), lean = lower(s, cost, fold);
  int sends = 0;
  for (const DagOp& op : full.ops) sends += op.kind == OpKind::P2P;
  CHECK(sends == 4);
  CHECK(lean.size() == full.size() - sends);
  for (const DagOp& op : lean.ops) CHECK(op.kind != OpKind::P2P);
  const Timeline t = simulate(lean);
  CHECK(t.iteration_time_s == 66.0);
  CHECK(t.peak_activation_bytes == std::vector<double>{8.0, 4.0});
  CHECK(t.start_s[find_op(lean, "B0.0 MLP L1", 1)] == 12.0);
}
