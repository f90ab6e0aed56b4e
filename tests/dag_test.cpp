#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "braid/profile.hpp"
#include "braid/simulator.hpp"
#include "fixtures.hpp"
#include "hand_schedules.hpp"

using namespace braid;
using namespace braid::test;

namespace {

std::vector<std::string> stream_names(const Dag& dag, int rank, StreamKind s) {
  std::vector<std::string> out;
  const int id = dag.stream_id(rank, s);
  for (int k = dag.stream_begin[id]; k < dag.stream_begin[id + 1]; ++k)
    out.push_back(op_name(dag, dag.stream_ops[k]));
  return out;
}

int find_op(const Dag& dag, const std::string& name, int rank = 0) {
  for (int i = 0; i < dag.size(); ++i)
    if (dag.ops[i].rank == rank && op_name(dag, i) == name) return i;
  FAIL("no op " << name << " on rank " << rank);
  return -1;
}

bool has_pred(const Dag& dag, int op, int pred) {
  return std::binary_search(dag.preds.begin() + dag.pred_begin[op],
                            dag.preds.begin() + dag.pred_begin[op + 1], pred);
}

}  // namespace

TEST_CASE("a plain forward is four units with an All-Reduce after Attn and after MLP", "[dag]") {
  const Schedule s = make("one", 1, 1, 1, Placement::Loop, {{F(0, 0), B(0, 0)}});
  const Dag dag = lower(s, uniform_cost_model(unit_costs(), 1));
  CHECK(stream_names(dag, 0, StreamKind::Compute) ==
        std::vector<std::string>{"F0.0 PreAttn L0", "F0.0 Attn L0", "F0.0 PreMLP L0", "F0.0 MLP L0",
                                 // full backward: per unit B then W
                                 "B0.0 MLP L0", "W0.0 MLP L0", "B0.0 PreMLP L0", "W0.0 PreMLP L0",
                                 "B0.0 Attn L0", "W0.0 Attn L0", "B0.0 PreAttn L0",
                                 "W0.0 PreAttn L0"});
  CHECK(stream_names(dag, 0, StreamKind::Tp) ==
        std::vector<std::string>{"AR F0.0 Attn L0", "AR F0.0 MLP L0", "AR B0.0 PreMLP L0",
                                 "AR B0.0 PreAttn L0"});
  // Synchronous forward collectives: PreMLP waits for the Attn All-Reduce, and the first op of
  // the next instruction for the MLP one.
  CHECK(has_pred(dag, find_op(dag, "F0.0 PreMLP L0"), find_op(dag, "AR F0.0 Attn L0")));
  CHECK(has_pred(dag, find_op(dag, "B0.0 MLP L0"), find_op(dag, "AR F0.0 MLP L0")));
  // Full backward: the B All-Reduce is consumed by the next B unit, not by the W under it.
  CHECK(has_pred(dag, find_op(dag, "B0.0 Attn L0"), find_op(dag, "AR B0.0 PreMLP L0")));
  CHECK_FALSE(has_pred(dag, find_op(dag, "W0.0 PreMLP L0"), find_op(dag, "AR B0.0 PreMLP L0")));
  CHECK(dag.size() == 16);
}

TEST_CASE("a split backward makes its collectives synchronous and runs W at the W instruction",
          "[dag]") {
  const Schedule s = make("split", 1, 1, 1, Placement::Loop, {{F(0, 0), B(0, 0, true), W(0, 0)}});
  const Dag dag = lower(s, uniform_cost_model(unit_costs(), 1));
  CHECK(stream_names(dag, 0, StreamKind::Compute) ==
        std::vector<std::string>{"F0.0 PreAttn L0", "F0.0 Attn L0", "F0.0 PreMLP L0", "F0.0 MLP L0",
                                 "B0.0 MLP L0", "B0.0 PreMLP L0", "B0.0 Attn L0", "B0.0 PreAttn L0",
                                 "W0.0 MLP L0", "W0.0 PreMLP L0", "W0.0 Attn L0",
                                 "W0.0 PreAttn L0"});
  // The last B All-Reduce blocks the first W unit.
  CHECK(has_pred(dag, find_op(dag, "W0.0 MLP L0"), find_op(dag, "AR B0.0 PreAttn L0")));
}

TEST_CASE("an FB block interleaves the units exactly as DESIGN section 2 draws them", "[dag]") {
  const Schedule s =
      make("fb", 1, 1, 2, Placement::Loop, {{F(0, 0), FB({0, 1, false}, {0, 0, false}), B(0, 1)}});
  const Dag dag = lower(s, uniform_cost_model(unit_costs(), 1));
  const std::vector<std::string> compute = stream_names(dag, 0, StreamKind::Compute);
  const std::vector<std::string> block(compute.begin() + 4, compute.begin() + 16);
  CHECK(block == std::vector<std::string>{"F0.1 PreAttn L0", "F0.1 Attn L0", "B0.0 MLP L0",
                                          "B0.0 PreMLP L0", "W0.0 MLP L0", "W0.0 PreMLP L0",
                                          "F0.1 PreMLP L0", "F0.1 MLP L0", "B0.0 Attn L0",
                                          "B0.0 PreAttn L0", "W0.0 Attn L0", "W0.0 PreAttn L0"});
  // Collectives in the block are asynchronous: nothing but the consumer waits.
  const int ar_f = find_op(dag, "AR F0.1 Attn L0");
  CHECK_FALSE(has_pred(dag, find_op(dag, "B0.0 MLP L0"), ar_f));
  CHECK(has_pred(dag, find_op(dag, "F0.1 PreMLP L0"), ar_f));
  // The block's last collective overlaps what follows: B0.1 needs F0.1's output (the loss) but
  // not B0.0's gradient All-Reduce.
  CHECK(has_pred(dag, find_op(dag, "B0.1 MLP L0"), find_op(dag, "AR F0.1 MLP L0")));
  CHECK_FALSE(has_pred(dag, find_op(dag, "B0.1 MLP L0"), find_op(dag, "AR B0.0 PreAttn L0")));
}

TEST_CASE("FW and FF blocks pair the units of both sides per layer", "[dag]") {
  // FW's F side must be a new forward: m = 3, the FW forwards microbatch 2.
  Schedule s3 = make("fw", 1, 1, 3, Placement::Loop, {{}});
  s3.ranks[0].instructions = {FF({0, 0, false}, {0, 1, false}), B(0, 0, true),
                              FW({0, 2, false}, {0, 0, false}), B(0, 1), B(0, 2)};
  const Dag dag = lower(s3, uniform_cost_model(unit_costs(), 1));
  const std::vector<std::string> compute = stream_names(dag, 0, StreamKind::Compute);
  CHECK(std::vector<std::string>(compute.begin(), compute.begin() + 8) ==
        std::vector<std::string>{"F0.0 PreAttn L0", "F0.0 Attn L0", "F0.1 PreAttn L0",
                                 "F0.1 Attn L0", "F0.0 PreMLP L0", "F0.0 MLP L0", "F0.1 PreMLP L0",
                                 "F0.1 MLP L0"});
  CHECK(std::vector<std::string>(compute.begin() + 12, compute.begin() + 20) ==
        std::vector<std::string>{"F0.2 PreAttn L0", "F0.2 Attn L0", "W0.0 MLP L0", "W0.0 PreMLP L0",
                                 "F0.2 PreMLP L0", "F0.2 MLP L0", "W0.0 Attn L0",
                                 "W0.0 PreAttn L0"});
}

TEST_CASE("P2P sends go between ranks only, none on the V's turn", "[dag]") {
  // V placement, p = 2: stages 0 (r0) 1 (r1) 2 (r1) 3 (r0). Stage 1 -> 2 stays on rank 1.
  const Schedule s =
      make("v", 2, 2, 1, Placement::V,
           {{F(0, 0), F(1, 0), B(1, 0), B(0, 0)}, {F(0, 0), F(1, 0), B(1, 0), B(0, 0)}});
  const Dag dag = lower(s, uniform_cost_model(unit_costs(), 4));
  CHECK(stream_names(dag, 0, StreamKind::P2pNext) ==
        std::vector<std::string>{"send F0.0 r0->r1", "send B1.0 r0->r1"});
  CHECK(stream_names(dag, 1, StreamKind::P2pNext) ==
        std::vector<std::string>{"send F1.0 r1->r0", "send B0.0 r1->r0"});
  CHECK(stream_names(dag, 1, StreamKind::P2pPrev).empty());
  // The turn: stage 2's forward reads stage 1's output directly.
  CHECK(has_pred(dag, find_op(dag, "F1.0 PreAttn L2", 1), find_op(dag, "AR F0.0 MLP L1", 1)));
  // The loss: B of the last stage (rank 0, chunk 1) needs its own forward.
  CHECK(has_pred(dag, find_op(dag, "B1.0 MLP L3", 0), find_op(dag, "AR F1.0 MLP L3", 0)));
}

TEST_CASE("a schedule with a dependency cycle is rejected naming the ops on it", "[dag]") {
  // Rank 1 runs F0.1 before B0.0, but rank 0 only sends F0.1 after B0.0, which needs rank 1's
  // B0.0 gradient.
  const Schedule s =
      make("deadlock", 2, 1, 2, Placement::Loop,
           {{F(0, 0), B(0, 0), F(0, 1), B(0, 1)}, {F(0, 1), F(0, 0), B(0, 0), B(0, 1)}});
  const Dag dag = lower(s, uniform_cost_model(unit_costs(), 2));
  const std::vector<int> cycle = find_cycle(dag);
  REQUIRE_FALSE(cycle.empty());
  std::vector<std::string> names;
  for (int op : cycle) names.push_back(op_name(dag, op));
  CHECK(std::find(names.begin(), names.end(), "send F0.1 r0->r1") != names.end());
  CHECK(std::find(names.begin(), names.end(), "send B0.0 r1->r0") != names.end());
  try {
    check_acyclic(dag);
    FAIL("no error");
  } catch (const InputError& e) {
    const std::string what = e.what();
    CHECK(what.find("dependency cycle") != std::string::npos);
    CHECK(what.find("send F0.1 r0->r1") != std::string::npos);
  }
  CHECK(find_cycle(lower(one_f_one_b_p2_m2(), uniform_cost_model(unit_costs(), 2))).empty());
}

TEST_CASE("lowering rejects passes that are missing, repeated or out of order", "[dag]") {
  const CostModel cost = uniform_cost_model(unit_costs(), 1);
  auto lower_program = [&](const std::vector<Instruction>& program, int m = 1) {
    return lower(make("bad", 1, 1, m, Placement::Loop, {program}), cost);
  };
  CHECK_THROWS_AS(lower_program({F(0, 0)}), InputError);                    // B missing
  CHECK_THROWS_AS(lower_program({B(0, 0), F(0, 0)}), InputError);           // B before F
  CHECK_THROWS_AS(lower_program({F(0, 0), F(0, 0), B(0, 0)}), InputError);  // F twice
  CHECK_THROWS_AS(lower_program({F(0, 0), B(0, 0, true)}), InputError);     // W missing
  CHECK_THROWS_AS(lower_program({F(0, 0), B(0, 0), W(0, 0)}), InputError);  // W not deferred
  CHECK_THROWS_AS(lower_program({F(0, 0), Reload(0, 0), B(0, 0)}), InputError);
  CHECK_THROWS_AS(lower_program({F(0, 0), Offload(0, 0), B(0, 0)}), InputError);  // not reloaded
  CHECK_THROWS_AS(lower_program({F(0, 3), B(0, 3)}), InputError);  // microbatch range
  CHECK_THROWS_AS(lower(make("bad", 1, 1, 1, Placement::Loop, {{F(0, 0), B(0, 0)}}),
                        uniform_cost_model(unit_costs(), 2)),
                  InputError);  // stage count mismatch
}

TEST_CASE("the longest path through the dag follows the heaviest chain", "[dag]") {
  const Schedule s = one_f_one_b_p2_m2();
  const Dag dag = lower(s, uniform_cost_model(unit_costs(), 2));
  std::vector<double> w(dag.size());
  for (int i = 0; i < dag.size(); ++i) w[i] = dag.cost(i).duration_s;
  const std::vector<int> path = longest_path(dag, w);
  double total = 0;
  for (int i : path) total += w[i];
  // Worked out in simulator_test: the iteration takes 66 with these costs, and without
  // contention the longest path is the iteration.
  CHECK(total == 66.0);
  CHECK(op_name(dag, path.front()) == "F0.0 PreAttn L0");
  CHECK(op_name(dag, path.back()) == "W0.1 PreAttn L0");
}

TEST_CASE("a send leaves at the end of its instruction, after its data", "[dag]") {
  // Megatron (and the STP / DualPipe runtimes) send after forward_step / backward_step returns,
  // so a send waits for the instruction's last compute op as well as for the data it carries.
  // p = 2, loop placement: rank 1 (the last stage) runs F0.0, then FB(F0.1, B0.0 full).
  const Schedule s = make(
      "sends", 2, 1, 2, Placement::Loop,
      {{F(0, 0), F(0, 1), B(0, 0), B(0, 1)}, {F(0, 0), FB({0, 1, false}, {0, 0, false}), B(0, 1)}});
  const Dag dag = lower(s, uniform_cost_model(unit_costs(), 2));
  // Rank 1's B0.0 gradient goes to rank 0 after the block's last op, W.PreAttn.
  const int send_b = find_op(dag, "send B0.0 r1->r0", 1);
  CHECK(has_pred(dag, send_b, find_op(dag, "AR B0.0 PreAttn L1", 1)));  // its data
  CHECK(has_pred(dag, send_b, find_op(dag, "W0.0 PreAttn L1", 1)));     // the instruction's end
  // Rank 0's F0.0 output: the plain F ends with its All-Reduce, the data itself.
  const int send_f = find_op(dag, "send F0.0 r0->r1", 0);
  CHECK(has_pred(dag, send_f, find_op(dag, "AR F0.0 MLP L0", 0)));
  CHECK(has_pred(dag, send_f, find_op(dag, "F0.0 MLP L0", 0)));
  // In the simulation rank 0's B0.0 starts when rank 1's block ends, not when the gradient is
  // ready: rank 1 runs F0.0 [6,11] + its All-Reduce [11,12], then the block from 12: F.PreAttn
  // F.Attn [12,14], B.MLP B.PreMLP [14,18], W.MLP W.PreMLP [18,22], F.PreMLP F.MLP [22,24], B.Attn
  // B.PreAttn [24,28] (gradient ready at 29 after its All-Reduce), W.Attn W.PreAttn [28,32].
  const Timeline t = simulate(dag);
  CHECK(t.end_s[find_op(dag, "AR B0.0 PreAttn L1", 1)] == 29.0);
  CHECK(t.start_s[send_b] == 32.0);
  CHECK(t.start_s[find_op(dag, "B0.0 MLP L0", 0)] == 32.0);
}

TEST_CASE("lowering a misordered schedule reports the validator's own message", "[dag]") {
  const Schedule s = make("bad", 1, 1, 1, Placement::Loop, {{B(0, 0), F(0, 0)}});
  REQUIRE(validate(s).error == "rank 0, position 0 (B0.0): B of chunk 0 microbatch 0 before its F");
  CHECK_THROWS_WITH(lower(s, uniform_cost_model(unit_costs(), 1)),
                    "schedule: bad: " + validate(s).error);
}

TEST_CASE("every send goes to the rank that peer_of derives from its rank and stream", "[dag]") {
  for (const char* name : {"1f1b", "1f1b-i", "zb-v", "dualpipe-v"})
    for (const int pp : {2, 3, 4}) {
      const Schedule s = generated(name, pp, 2 * pp);
      const Dag dag = lower(s, uniform_cost_model(unit_costs(), s.virtual_stages()));
      const Successors succ = successors(dag);
      int sends = 0;
      for (int i = 0; i < dag.size(); ++i) {
        const DagOp& op = dag.ops[i];
        if (op.kind != OpKind::P2P) {
          CHECK(peer_of(dag, i) == -1);
          continue;
        }
        ++sends;
        // The consumers on other ranks (the data flow) all sit on the derived peer.
        for (int j = succ.begin[i]; j < succ.begin[i + 1]; ++j)
          if (dag.ops[succ.list[j]].rank != op.rank)
            CHECK(dag.ops[succ.list[j]].rank == peer_of(dag, i));
      }
      CHECK(sends > 0);
    }
  // p = 4, loop placement: the backward of stage 4 (rank 0, chunk 1) sends to rank 3.
  const Dag dag = lower(generated("1f1b-i", 4, 4), uniform_cost_model(unit_costs(), 8));
  CHECK(peer_of(dag, find_op(dag, "send B1.0 r0->r3")) == 3);
}

TEST_CASE("a layer index above the 16-bit limit of a DAG op is refused with one line", "[dag]") {
  CostModel cost = uniform_cost_model(unit_costs(), 1);
  for (UnitCost& u : cost.chunks[0].layer(0)) u.layer = kMaxDagLayer + 1;
  const Schedule s = make("one", 1, 1, 1, Placement::Loop, {{F(0, 0), B(0, 0)}});
  CHECK_THROWS_WITH(lower(s, cost),
                    "model: layers: layer 32768 is above the limit of 32767 layers; use a "
                    "shallower model");
  for (UnitCost& u : cost.chunks[0].layer(0)) u.layer = kMaxDagLayer;
  CHECK(lower(s, cost).ops[0].layer == kMaxDagLayer);
}

TEST_CASE("a schedule beyond what the packed fields of a DAG op hold is refused with one line",
          "[dag]") {
  // A hand-made (or imported) schedule is the only way past the configuration's bounds (kMaxPp,
  // kMaxVpp, kMaxMicrobatches), which stay within these limits.
  const CostModel cost = uniform_cost_model(unit_costs(), 1);
  Schedule s = make("one", 1, 1, 1, Placement::Loop, {{F(0, 0), B(0, 0)}});
  s.vpp = kMaxDagChunks + 1;
  CHECK_THROWS_WITH(lower(s, cost),
                    "schedule: one: 257 chunks per rank, above the limit of 256 that a DAG op "
                    "holds; use a smaller --vpp");
  s.pp = 128;
  s.vpp = kMaxDagChunks;
  CHECK_THROWS_WITH(lower(s, cost),
                    "schedule: one: 32768 virtual stages (pp x vpp), above the limit of 32767 that "
                    "a DAG op holds; use a smaller --pp or --vpp");
  s.pp = 1;
  s.vpp = 1;
  s.microbatches = kMaxDagMicrobatches + 1;
  CHECK_THROWS_WITH(lower(s, cost),
                    "schedule: one: 1048577 microbatches, above the limit of 1048576 that a DAG op "
                    "holds; use fewer --microbatches");
}

TEST_CASE("the packed chunk field of a DAG op holds the last chunk its limit allows", "[dag]") {
  // One rank with kMaxDagChunks chunks, one microbatch: the forwards in chunk order, the backwards
  // in reverse; the last chunk is 255. (The microbatch and instruction limits are pinned at
  // compile time in dag.hpp: a case at them takes millions of ops.)
  std::vector<Instruction> program;
  for (int c = 0; c < kMaxDagChunks; ++c) program.push_back(F(c, 0));
  for (int c = kMaxDagChunks - 1; c >= 0; --c) program.push_back(B(c, 0));
  const Schedule deep = make("chunks", 1, kMaxDagChunks, 1, Placement::Loop, {program});
  const Dag chunks = lower(deep, uniform_cost_model(unit_costs(), kMaxDagChunks));
  int last_chunk = 0;
  for (const DagOp& op : chunks.ops) last_chunk = std::max<int>(last_chunk, op.chunk);
  CHECK(last_chunk == kMaxDagChunks - 1);
}

// ---- re-timing (retime) ---------------------------------------------------------------------

namespace {

// Every array and field of two DAGs, op by op.
void check_same_dag(const Dag& a, const Dag& b) {
  REQUIRE(a.size() == b.size());
  for (int i = 0; i < a.size(); ++i) {
    INFO("op " << i << " " << op_name(b, i));
    CHECK(a.ops[i] == b.ops[i]);
  }
  CHECK(a.costs == b.costs);
  CHECK(a.pred_begin == b.pred_begin);
  CHECK(a.preds == b.preds);
  CHECK(a.stream_begin == b.stream_begin);
  CHECK(a.stream_ops == b.stream_ops);
  CHECK(a.stream_prev == b.stream_prev);
  CHECK(a.schedule == b.schedule);
  CHECK(a.pp == b.pp);
  CHECK(a.vpp == b.vpp);
  CHECK(a.microbatches == b.microbatches);
  CHECK(a.placement == b.placement);
  CHECK(a.contention.compute_slowdown == b.contention.compute_slowdown);
  CHECK(a.contention.comm_slowdown == b.contention.comm_slowdown);
  CHECK(a.copy_contention.d2h_slowdown == b.copy_contention.d2h_slowdown);
  CHECK(a.copy_contention.h2d_slowdown == b.copy_contention.h2d_slowdown);
  CHECK(a.p2p_blocking == b.p2p_blocking);
  CHECK(a.memory_exact == b.memory_exact);
}

// A schedule and the cost model of one configuration of the default study (seq 2048).
struct Lowered {
  Schedule schedule;
  CostModel cost;
};
Lowered lowered(const std::string& name, const Configuration& c, double offload = 0) {
  const test::StudyFixture& f = test::short_default_study();
  Study base = f.study;
  base.training.offload = offload;
  const Study study = configure(base, c);
  ScheduleOptions o;
  o.pp = c.pp;
  o.vpp = c.vpp;
  o.microbatches = c.microbatches;
  o.offload = study.training.offload;
  Lowered l{make_schedule(name, o), {}};
  l.cost = build_cost_model(study, f.profile, l.schedule.virtual_stages());
  return l;
}

Configuration sized(int tp, int seq, int mbs, int pp = 4) {
  Configuration c;
  c.tp = tp;
  c.pp = pp;
  c.vpp = 2;
  c.seq = seq;
  c.mbs = mbs;
  c.microbatches = 8;
  return c;
}

}  // namespace

TEST_CASE("a DAG keeps each distinct cost once: its cost table does not grow with m", "[dag]") {
  // Every microbatch's pass through a unit costs the same: twice the microbatches, twice the ops,
  // the same table. No two entries hold the same bits, and each op's cost is the one it was
  // lowered with (the re-timing tests compare whole DAGs, tables included).
  for (const std::string name : {"1f1b-i", "stp", "zb-v"}) {
    INFO(name);
    Configuration c = sized(2, 2048, 1);
    const Lowered eight = lowered(name, c);
    c.microbatches = 16;
    const Lowered sixteen = lowered(name, c);
    const Dag a = lower(eight.schedule, eight.cost), b = lower(sixteen.schedule, sixteen.cost);
    CHECK(b.size() > a.size() + a.size() / 2);
    CHECK(a.costs == b.costs);
    CHECK(a.costs.size() < 64);
    auto bits = [](const OpCost& c) {
      return std::array{
          std::bit_cast<std::uint64_t>(c.duration_s), std::bit_cast<std::uint64_t>(c.alloc_bytes),
          std::bit_cast<std::uint64_t>(c.free_bytes), std::bit_cast<std::uint64_t>(c.bytes)};
    };
    for (std::size_t i = 0; i < a.costs.size(); ++i)
      for (std::size_t j = 0; j < i; ++j) CHECK(bits(a.costs[i]) != bits(a.costs[j]));
    std::vector<char> used(a.costs.size(), 0);
    for (const DagOp& op : a.ops) used[static_cast<std::size_t>(op.cost)] = 1;
    CHECK(std::count(used.begin(), used.end(), 1) == static_cast<long>(a.costs.size()));
  }
}

TEST_CASE("a re-timed DAG equals a fresh lowering of the new costs on every schedule", "[dag]") {
  const std::vector<std::string> schedules = {"gpipe", "1f1b", "1f1b-i",     "zb-h1",
                                              "zb-v",  "stp",  "dualpipe-v", "stp-offload"};
  for (const std::string& name : schedules)
    for (const int pp : {2, 4})
      for (const P2pMode p2p : {P2pMode::Auto, P2pMode::Blocking, P2pMode::Async}) {
        INFO(name << ", pp " << pp << ", P2P mode " << static_cast<int>(p2p));
        // Costs only: seq and mbs; at pp 2 (dp 4, then 2) tp 2 to 4 keeps the structure as well.
        std::vector<Configuration> others = {sized(2, 4096, 1, pp), sized(2, 2048, 2, pp)};
        if (pp == 2) others.push_back(sized(4, 3072, 2, pp));
        LowerOptions options;
        options.p2p = p2p;
        const Lowered first = lowered(name, sized(2, 2048, 1, pp));
        Dag dag = lower(first.schedule, first.cost, options);
        // Once with the schedule of each configuration, once with the first one's and a memo
        // kept across the calls (its pass-order check and P2P batch plan made once).
        Dag kept = dag;
        RetimeMemo memo;
        for (const Configuration& c : others) {
          INFO("tp " << c.tp << ", seq " << c.seq << ", mbs " << c.mbs);
          const Lowered next = lowered(name, c);
          const Dag fresh = lower(next.schedule, next.cost, options);
          REQUIRE(retime(dag, next.schedule, next.cost, options));
          check_same_dag(dag, fresh);
          REQUIRE(retime(kept, first.schedule, next.cost, options, &memo));
          check_same_dag(kept, fresh);
          CHECK(memo.schedule == &first.schedule);
        }
      }
}

TEST_CASE("re-timing covers offloading and full recomputation", "[dag]") {
  for (const char* name : {"1f1b-i", "zb-v", "stp"}) {
    INFO(name);
    Configuration a = sized(2, 2048, 1, 2), b = sized(4, 4096, 2, 2);
    a.recompute = b.recompute = Recompute::Full;
    const Lowered first = lowered(name, a, 0.5), next = lowered(name, b, 0.5);
    Dag dag = lower(first.schedule, first.cost);
    const bool copies = std::any_of(dag.ops.begin(), dag.ops.end(),
                                    [](const DagOp& op) { return op.kind == OpKind::Offload; });
    const bool reruns =
        std::any_of(dag.ops.begin(), dag.ops.end(), [](const DagOp& op) { return op.recompute; });
    CHECK(copies);
    CHECK(reruns);
    REQUIRE(retime(dag, next.schedule, next.cost));
    check_same_dag(dag, lower(next.schedule, next.cost));
  }
}

TEST_CASE("re-timing refuses a DAG of another structure and the caller lowers afresh", "[dag]") {
  const Lowered base = lowered("1f1b-i", sized(2, 2048, 1));
  const Dag lowered_base = lower(base.schedule, base.cost);
  auto refuses = [&](const Schedule& s, const CostModel& c, const LowerOptions& o = {}) {
    Dag dag = lowered_base;
    return !retime(dag, s, c, o);
  };
  // Sequence parallelism: All-Gather and Reduce-Scatter instead of All-Reduce (op kinds).
  Configuration sp = sized(2, 2048, 1);
  sp.sp = true;
  CHECK(refuses(base.schedule, lowered("1f1b-i", sp).cost));
  // tp 1: no TP collectives. dp 1 (tp 4 x pp 4 of 16 GPUs): no data-parallel gradient sync.
  CHECK(refuses(base.schedule, lowered("1f1b-i", sized(1, 2048, 1)).cost));
  CHECK(refuses(base.schedule, lowered("1f1b-i", sized(4, 2048, 1)).cost));
  // Full recomputation: more ops.
  Configuration full = sized(2, 2048, 1);
  full.recompute = Recompute::Full;
  CHECK(refuses(base.schedule, lowered("1f1b-i", full).cost));
  // Another schedule of the same sizes, another microbatch count.
  const Lowered zb = lowered("zb-v", sized(2, 2048, 1));
  CHECK(refuses(zb.schedule, zb.cost));
  Configuration more = sized(2, 2048, 1);
  more.microbatches = 16;
  const Lowered m16 = lowered("1f1b-i", more);
  CHECK(refuses(m16.schedule, m16.cost));
  // Batched against blocking P2P: the same ops, other dependencies (the batch's rendezvous).
  LowerOptions blocking;
  blocking.p2p = P2pMode::Blocking;
  CHECK(refuses(base.schedule, base.cost, blocking));
  // Async P2P: the blocking flag differs.
  LowerOptions async;
  async.p2p = P2pMode::Async;
  CHECK(refuses(base.schedule, base.cost, async));
  // The fold leaves out ops by their costs.
  LowerOptions fold;
  fold.fold_zero_time = true;
  CHECK(refuses(base.schedule, base.cost, fold));
  // An empty DAG.
  Dag empty;
  CHECK_FALSE(retime(empty, base.schedule, base.cost));
  // And the same costs again fit.
  Dag same = lowered_base;
  REQUIRE(retime(same, base.schedule, base.cost));
  check_same_dag(same, lowered_base);
  // A memo made for one schedule is made anew for another one.
  RetimeMemo memo;
  REQUIRE(retime(same, base.schedule, base.cost, {}, &memo));
  CHECK(memo.schedule == &base.schedule);
  Dag other = lower(zb.schedule, zb.cost);
  const Dag fresh = other;
  REQUIRE(retime(other, zb.schedule, zb.cost, {}, &memo));
  CHECK(memo.schedule == &zb.schedule);
  check_same_dag(other, fresh);
}

namespace {
void check_index_arrays(const Dag& dag);  // below, with the builder's tests
}  // namespace

// Instructions of one shape are lowered once and copied after (pass stamping); re-timing
// lowers every instruction afresh and checks each op and dependency against the DAG, so a copy
// that differs from a fresh lowering in anything fails here.
TEST_CASE("instructions of one shape copied from the first one equal a fresh lowering of each",
          "[dag]") {
  Configuration sp = sized(2, 2048, 1), full = sized(2, 2048, 1);
  sp.sp = true;  // an All-Gather before a unit, issued early inside braided blocks
  full.recompute = Recompute::Full;
  for (const char* name : {"1f1b", "1f1b-i", "zb-h1", "zb-v", "stp", "dualpipe-v", "stp-offload"})
    for (const Configuration& c : {sized(2, 2048, 1), sp, full})
      for (const P2pMode p2p : {P2pMode::Auto, P2pMode::Blocking, P2pMode::Async}) {
        INFO(name << ", sp " << c.sp << ", recompute " << static_cast<int>(c.recompute)
                  << ", P2P mode " << static_cast<int>(p2p));
        const Lowered l = lowered(name, c, std::string(name) == "stp-offload" ? 0.5 : 0);
        LowerOptions options;
        options.p2p = p2p;
        const Dag dag = lower(l.schedule, l.cost, options);
        // The microbatches differ op by op between the copies of a shape.
        int mbs = 0;
        for (int i = 1; i < dag.size(); ++i) mbs = std::max<int>(mbs, dag.ops[i].mb);
        CHECK(mbs == l.schedule.microbatches - 1);
        // Re-timing does not rebuild the index arrays: the copies' lists and stream links are
        // checked here.
        check_index_arrays(dag);
        Dag again = dag;
        REQUIRE(retime(again, l.schedule, l.cost, options));
        check_same_dag(again, dag);
      }
  // The data-parallel step tail waits for each unit's first F and last W, which the copies note
  // as the first lowering of their shape did.
  Study overlapped = test::short_default_study().study;
  overlapped.training.distributed_optimizer = true;
  overlapped.training.overlap_grad_reduce = true;
  overlapped.training.overlap_param_gather = true;
  for (const char* name : {"1f1b-i", "zb-v", "stp"}) {
    INFO(name << ", overlapped gradient reduce and parameter gather");
    const Study study = configure(overlapped, sized(2, 2048, 1));
    ScheduleOptions o;
    o.pp = study.parallel.pp;
    o.vpp = study.parallel.vpp;
    o.microbatches = study.training.microbatches;
    const Schedule schedule = make_schedule(name, o);
    const CostModel cost =
        build_cost_model(study, test::short_default_study().profile, schedule.virtual_stages());
    const Dag dag = lower(schedule, cost);
    CHECK(std::count_if(dag.ops.begin(), dag.ops.end(),
                        [](const DagOp& op) { return op.kind == OpKind::DpSync; }) > 0);
    Dag again = dag;
    REQUIRE(retime(again, schedule, cost));
    check_same_dag(again, dag);
  }
  // FF and FW blocks (uniform costs), each shape twice.
  Schedule s = make("fw", 1, 1, 6, Placement::Loop, {{}});
  s.ranks[0].instructions = {FF({0, 0, false}, {0, 1, false}),
                             FF({0, 2, false}, {0, 3, false}),
                             B(0, 0, true),
                             FW({0, 4, false}, {0, 0, false}),
                             B(0, 1, true),
                             FW({0, 5, false}, {0, 1, false}),
                             B(0, 2),
                             B(0, 3),
                             B(0, 4),
                             B(0, 5)};
  const CostModel uniform = uniform_cost_model(unit_costs(), 1);
  const Dag blocks = lower(s, uniform);
  CHECK(stream_names(blocks, 0, StreamKind::Compute)[10] == "F0.3 PreAttn L0");
  Dag again = blocks;
  REQUIRE(retime(again, s, uniform));
  check_same_dag(again, blocks);
}

// ---- the builder's index arrays -------------------------------------------------------------

namespace {

// The builder's index arrays of `dag`: sorted unique dependency lists (successors() their mirror),
// each stream's ops ascending.
void check_index_arrays(const Dag& dag) {
  REQUIRE(dag.pred_begin.size() == dag.ops.size() + 1);
  REQUIRE(dag.pred_begin.front() == 0);
  REQUIRE(dag.pred_begin.back() == dag.edges());
  std::vector<std::vector<int>> succs(dag.ops.size());
  int cross_rank = 0;
  for (int i = 0; i < dag.size(); ++i)
    for (int j = dag.pred_begin[i]; j < dag.pred_begin[i + 1]; ++j) {
      const int p = dag.preds[j];
      REQUIRE(p >= 0);
      REQUIRE(p < dag.size());
      REQUIRE(p != i);
      if (j > dag.pred_begin[i]) REQUIRE(dag.preds[j - 1] < p);
      succs[p].push_back(i);
      cross_rank += dag.ops[p].rank != dag.ops[i].rank;
    }
  CHECK(cross_rank > 0);  // the edges added after their target are there
  const Successors succ = successors(dag);
  for (int i = 0; i < dag.size(); ++i)
    CHECK(std::vector<int>(succ.list.begin() + succ.begin[i],
                           succ.list.begin() + succ.begin[i + 1]) == succs[i]);
  // finish() fills the first half of the ops forward from each stream's start and the second
  // backward from its end; an odd op count leaves the middle op to place alone.
  std::vector<std::vector<int>> streams(dag.stream_begin.size() - 1);
  for (int i = 0; i < dag.size(); ++i)
    streams[dag.stream_id(dag.ops[i].rank, dag.ops[i].stream)].push_back(i);
  for (std::size_t s = 0; s < streams.size(); ++s)
    CHECK(std::vector<int>(dag.stream_ops.begin() + dag.stream_begin[s],
                           dag.stream_ops.begin() + dag.stream_begin[s + 1]) == streams[s]);
  // Each op's stream predecessor is the op before it there (a stamped copy links its first op on
  // a stream to the last one before the copy).
  REQUIRE(dag.stream_prev.size() == dag.ops.size());
  std::vector<int> prev(dag.ops.size(), -1);
  for (const std::vector<int>& ops : streams)
    for (std::size_t k = 1; k < ops.size(); ++k) prev[ops[k]] = ops[k - 1];
  CHECK(dag.stream_prev == prev);
}

}  // namespace

TEST_CASE("every dependency list is sorted without duplicates and the successors mirror it",
          "[dag]") {
  // Real costs (synchronous collectives give an op the same input twice, cross-stage edges arrive
  // after their target, some ops' inputs arrive out of order) and uniform ones, with and without
  // the fold.
  int parity[2] = {0, 0};  // lowerings with an even and an odd op count
  for (const char* name : {"1f1b", "1f1b-i", "zb-v", "stp", "dualpipe-v", "stp-offload"})
    for (const bool fold : {false, true}) {
      INFO(name << (fold ? ", folded" : ""));
      const Lowered l = lowered(name, sized(2, 2048, 1, 4));
      LowerOptions options;
      options.fold_zero_time = fold;
      const Dag dag = lower(l.schedule, l.cost, options);
      check_index_arrays(dag);
      ++parity[dag.size() % 2];
    }
  // Three stages, batched P2P, no weight-gradient time: an odd op count.
  for (const char* name : {"dualpipe-v", "stp"})
    for (const bool fold : {false, true}) {
      INFO(name << ", uniform" << (fold ? ", folded" : ""));
      const Schedule s = generated(name, 3, 9);
      LowerOptions options;
      options.p2p = P2pMode::Batched;
      options.fold_zero_time = fold;
      const Dag dag = lower(s, uniform_cost_model({1, 2, 0, 0.25, 1}, s.virtual_stages()), options);
      check_index_arrays(dag);
      ++parity[dag.size() % 2];
    }
  CHECK(parity[0] > 0);
  CHECK(parity[1] > 0);
}

namespace {

struct TimedOp {
  std::string name;
  double start_s, end_s;
};

// Each op of `expected` (by name, rank 0) starts and ends as listed, and nothing else runs.
void check_timeline(const Dag& dag, const Timeline& t, const std::vector<TimedOp>& expected) {
  REQUIRE(dag.size() == static_cast<int>(expected.size()));
  for (const TimedOp& e : expected) {
    INFO(e.name);
    const int i = find_op(dag, e.name);
    CHECK(t.start_s[i] == e.start_s);
    CHECK(t.end_s[i] == e.end_s);
  }
}

}  // namespace

TEST_CASE("a five-unit layer kind with two groups' collectives in one phase lowers from its data",
          "[dag][layer]") {
  SECTION("1F1B, p 1, m 2: plain forwards wait for every collective, full backwards hide none") {
    // F: PreAttn 0-1, Attn 1-2, its All-Reduce 2-3 (synchronous: Dispatch waits), Dispatch 3-4,
    // the EP collective 4-6 then the CP one 6-7 (a chain on two streams), Experts 7-9, Combine
    // 9-10. B (the last stage's, after its F): Combine's EP collective 10-11 before its B 11-12,
    // then B and W unit by unit in reverse: W 12-13, Experts B 13-15 W 15-17, Dispatch 17-18
    // 18-19, Attn 19-20 20-21, PreAttn 21-22 22-23. Microbatch 1 the same from 23.
    const Schedule s =
        make("1f1b", 1, 1, 2, Placement::Loop, {{F(0, 0), B(0, 0), F(0, 1), B(0, 1)}});
    const Dag dag = lower(s, five_unit_model(1));
    const Timeline t = simulate(dag);
    std::vector<TimedOp> expected;
    for (int mb = 0; mb < 2; ++mb) {
      const double o = 23.0 * mb;
      const std::string f = "F0." + std::to_string(mb) + " ", b = "B0." + std::to_string(mb) + " ",
                        w = "W0." + std::to_string(mb) + " ";
      for (const TimedOp& op : std::vector<TimedOp>{{f + "PreAttn L0", 0, 1},
                                                    {f + "Attn L0", 1, 2},
                                                    {"AR " + f + "Attn L0", 2, 3},
                                                    {f + "Dispatch L0", 3, 4},
                                                    {"AG " + f + "Dispatch L0", 4, 6},
                                                    {"RS " + f + "Dispatch L0", 6, 7},
                                                    {f + "Experts L0", 7, 9},
                                                    {f + "Combine L0", 9, 10},
                                                    {"AG " + b + "Combine L0", 10, 11},
                                                    {b + "Combine L0", 11, 12},
                                                    {w + "Combine L0", 12, 13},
                                                    {b + "Experts L0", 13, 15},
                                                    {w + "Experts L0", 15, 17},
                                                    {b + "Dispatch L0", 17, 18},
                                                    {w + "Dispatch L0", 18, 19},
                                                    {b + "Attn L0", 19, 20},
                                                    {w + "Attn L0", 20, 21},
                                                    {b + "PreAttn L0", 21, 22},
                                                    {w + "PreAttn L0", 22, 23}})
        expected.push_back({op.name, op.start_s + o, op.end_s + o});
    }
    check_timeline(dag, t, expected);
    CHECK(t.iteration_time_s == 46);
    // Each collective on its group's stream.
    CHECK(stream_names(dag, 0, StreamKind::Tp) ==
          std::vector<std::string>{"AR F0.0 Attn L0", "AR F0.1 Attn L0"});
    CHECK(stream_names(dag, 0, StreamKind::Cp) ==
          std::vector<std::string>{"RS F0.0 Dispatch L0", "RS F0.1 Dispatch L0"});
    CHECK(stream_names(dag, 0, StreamKind::Ep) ==
          std::vector<std::string>{"AG F0.0 Dispatch L0", "AG B0.0 Combine L0",
                                   "AG F0.1 Dispatch L0", "AG B0.1 Combine L0"});
  }
  SECTION("STP, p 1, m 2: the braided block hides each side's collectives under the other side") {
    // F0.1 F1.1&B1.0 ... on one rank (V placement: chunk 0 is stage 0 with layer L0, chunk 1
    // stage 1 with L1). The three plain forwards run as in 1F1B, each waiting on its collectives:
    // 0-10, 10-20, 20-30. The FB block: F1.1's first half 30-32 (its All-Reduce 32-33 under the
    // backward), B1.0's second half in reverse 32-36 (Combine's EP collective already ran at
    // 26-27, once F1.0 ended at 20 and the EP stream was free) and its W 36-40, F1.1's second
    // half: Dispatch 40-41, its EP and CP collectives 41-43 and 43-44 (nothing of B1.0 is left
    // to hide them: Experts waits 41-44), Experts 44-46, Combine 46-47; then B1.0's first half
    // 47-49 and its W 49-51. B0.0 waits for B1.0's last B (49): its EP collective 49-50, then B
    // and W unit by unit 51-63; B1.1 (its EP collective 50-51) 63-75; B0.1 (EP 74-75) 75-87.
    const Schedule s = make(
        "stp", 1, 2, 2, Placement::V,
        {{F(0, 0), F(1, 0), F(0, 1), FB({1, 1, false}, {1, 0, false}), B(0, 0), B(1, 1), B(0, 1)}});
    const Dag dag = lower(s, five_unit_model(2));
    const Timeline t = simulate(dag);
    std::vector<TimedOp> expected;
    const auto forward = [&](int chunk, int mb, double o) {
      const std::string f = "F" + std::to_string(chunk) + "." + std::to_string(mb) + " ",
                        l = " L" + std::to_string(chunk);
      for (const TimedOp& op : std::vector<TimedOp>{{f + "PreAttn" + l, 0, 1},
                                                    {f + "Attn" + l, 1, 2},
                                                    {"AR " + f + "Attn" + l, 2, 3},
                                                    {f + "Dispatch" + l, 3, 4},
                                                    {"AG " + f + "Dispatch" + l, 4, 6},
                                                    {"RS " + f + "Dispatch" + l, 6, 7},
                                                    {f + "Experts" + l, 7, 9},
                                                    {f + "Combine" + l, 9, 10}})
        expected.push_back({op.name, op.start_s + o, op.end_s + o});
    };
    // A full backward on its own: the EP collective at `ep`, the units from `o` on.
    const auto backward = [&](int chunk, int mb, double ep, double o) {
      const std::string id = std::to_string(chunk) + "." + std::to_string(mb) + " ", b = "B" + id,
                        w = "W" + id, l = " L" + std::to_string(chunk);
      expected.push_back({"AG " + b + "Combine" + l, ep, ep + 1});
      double at = o;
      for (const char* unit : {"Combine", "Experts", "Dispatch", "Attn", "PreAttn"}) {
        const double d = std::string(unit) == "Experts" ? 2 : 1;
        expected.push_back({b + unit + l, at, at + d});
        expected.push_back({w + unit + l, at + d, at + 2 * d});
        at += 2 * d;
      }
    };
    forward(0, 0, 0);
    forward(1, 0, 10);
    forward(0, 1, 20);
    for (const TimedOp& op : std::vector<TimedOp>{{"F1.1 PreAttn L1", 30, 31},
                                                  {"F1.1 Attn L1", 31, 32},
                                                  {"AR F1.1 Attn L1", 32, 33},
                                                  {"AG B1.0 Combine L1", 26, 27},
                                                  {"B1.0 Combine L1", 32, 33},
                                                  {"B1.0 Experts L1", 33, 35},
                                                  {"B1.0 Dispatch L1", 35, 36},
                                                  {"W1.0 Combine L1", 36, 37},
                                                  {"W1.0 Experts L1", 37, 39},
                                                  {"W1.0 Dispatch L1", 39, 40},
                                                  {"F1.1 Dispatch L1", 40, 41},
                                                  {"AG F1.1 Dispatch L1", 41, 43},
                                                  {"RS F1.1 Dispatch L1", 43, 44},
                                                  {"F1.1 Experts L1", 44, 46},
                                                  {"F1.1 Combine L1", 46, 47},
                                                  {"B1.0 Attn L1", 47, 48},
                                                  {"B1.0 PreAttn L1", 48, 49},
                                                  {"W1.0 Attn L1", 49, 50},
                                                  {"W1.0 PreAttn L1", 50, 51}})
      expected.push_back(op);
    backward(0, 0, 49, 51);
    backward(1, 1, 50, 63);
    backward(0, 1, 74, 75);
    check_timeline(dag, t, expected);
    CHECK(t.iteration_time_s == 87);
  }
}
