#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "braid/dag.hpp"
#include "braid/error.hpp"
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

TEST_CASE("a deadlocked schedule is rejected by the simulator naming the cycle", "[sim]") {
  const Schedule s =
      make("deadlock", 2, 1, 2, Placement::Loop,
           {{F(0, 0), B(0, 0), F(0, 1), B(0, 1)}, {F(0, 1), F(0, 0), B(0, 0), B(0, 1)}});
  const Dag dag = lower(s, uniform_cost_model(unit_costs(), 2));
  CHECK_THROWS_WITH(simulate(dag),
                    Catch::Contains("dependency cycle") && Catch::Contains("send B0.0 r1->r0"));
}
