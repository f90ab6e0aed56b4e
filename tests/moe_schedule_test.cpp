// The F&B pair of two MoE layers (docs/moe.md, "The F&B pair hides the all-to-all"): an FB block
// runs each MoE layer as three parts around its all-to-alls (LayerCost::dispatch, combine), so the
// partner microbatch's compute runs between each all-to-all and the unit that waits for it. By
// hand on a layer of round unit costs, against the same layer without its cut points (the halves'
// order every other layer keeps).
#include <catch2/catch.hpp>

#include <initializer_list>
#include <string>

#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "fixtures.hpp"
#include "hand_schedules.hpp"

using namespace braid;
using namespace braid::test;

namespace {

// A small MoE layer of round costs, the attention half one unit:
//   Attn     F 4, B 4, W 2
//   Dispatch F 0 then its all-to-all 1; B: the backward all-to-all 1, then 0; no W
//   Experts  F 4, B 4, W 4
//   Combine  F: the all-to-all 1, then 0; B 0 then its backward all-to-all 1; no W
// halves Attn | Dispatch..Combine; cut points dispatch 1, combine 3 unless `cuts` is false (the
// same layer as a layer without them). One such layer per chunk, uniform-cost rules (no P2P
// time, no contention, no step tail).
// One unit of a round-cost MoE layer: Attn F 4, B 4, W 2; Experts 4 in each phase; the
// Dispatch's all-to-all of `a2a_s` after its F and before its B, the Combine's the other way
// round; no time otherwise.
UnitCost round_unit(UnitKind kind, int layer, double a2a_s) {
  UnitCost u;
  u.kind = kind;
  u.layer = layer;
  if (kind == UnitKind::Attn) {
    u[Phase::F].time_s = 4;
    u[Phase::B].time_s = 4;
    u[Phase::W].time_s = 2;
  }
  if (kind == UnitKind::Experts)
    for (Phase p : {Phase::F, Phase::B, Phase::W}) u[p].time_s = 4;
  if (kind == UnitKind::Dispatch || kind == UnitKind::Combine) {
    const Collective after{.kind = CollectiveKind::AllToAll,
                           .group = Group::Ep,
                           .position = CollectivePosition::After,
                           .time_s = a2a_s};
    Collective before = after;
    before.position = CollectivePosition::Before;
    const bool dispatch = kind == UnitKind::Dispatch;
    u[Phase::F].collectives.push_back(dispatch ? after : before);
    u[Phase::B].collectives.push_back(dispatch ? before : after);
  }
  return u;
}

LayerCost moe_round_layer(int layer, bool cuts) {
  LayerCost l;
  l.half = 1;
  if (cuts) {
    l.dispatch = 1;
    l.combine = 3;
  }
  for (UnitKind k : {UnitKind::Attn, UnitKind::Dispatch, UnitKind::Experts, UnitKind::Combine})
    l.units.push_back(round_unit(k, layer, 1));
  return l;
}

CostModel moe_round_model(int chunks, bool cuts) {
  return test::one_layer_chunks(chunks, [cuts](int k) { return moe_round_layer(k, cuts); });
}

struct Run {
  Simulated sim;
  double iteration = 0, ep_exposed = 0;
};

Run run(const Schedule& s, const CostModel& cost) {
  Run r{simulated(s, cost, false)};
  check_pp_idle(r.sim.report, r.sim.dag, r.sim.timeline);
  r.iteration = r.sim.report.iteration_time_s;
  r.ep_exposed = r.sim.report.ranks.at(0).ep_exposed_s;
  return r;
}

// Start of the op named `name` (op_name), -1 if there is none.
double start_of(const Simulated& r, const std::string& name) {
  for (int i = 0; i < static_cast<int>(r.dag.ops.size()); ++i)
    if (op_name(r.dag, i) == name) return r.timeline.start_s[static_cast<std::size_t>(i)];
  return -1;
}

}  // namespace

TEST_CASE("the cut points are on the MoE layer's record: Dispatch and Combine", "[moe][fb]") {
  const CostModel cut = moe_round_model(1, true), plain = moe_round_model(1, false);
  const ChunkCost& c = cut.chunks[0];
  REQUIRE(c.has_all_to_all_cuts(0));
  CHECK(c.to_dispatch(0).size() == 2);  // Attn, Dispatch
  CHECK(c.to_dispatch(0).back().kind == UnitKind::Dispatch);
  REQUIRE(c.between_all_to_alls(0).size() == 1);
  CHECK(c.between_all_to_alls(0).front().kind == UnitKind::Experts);
  REQUIRE(c.from_combine(0).size() == 1);
  CHECK(c.from_combine(0).front().kind == UnitKind::Combine);
  CHECK_FALSE(plain.chunks[0].has_all_to_all_cuts(0));
}

TEST_CASE("one FB block of two MoE layers hides every all-to-all", "[moe][fb]") {
  // One rank, one chunk, m 2: F0.0, then F0.1&B0.0, then B0.1.
  // F0.0 alone (synchronous): Attn 0-4, Dispatch 4, its all-to-all 4-5, Experts 5-9, Combine's
  // all-to-all 9-10, Combine 10: 10, EP exposed 2.
  // The block, three parts a side (B from the combine | F to the dispatch | B, W experts | F
  // experts | B, W to the dispatch | F from the combine): B Combine 10, its all-to-all 10-11;
  // F Attn 10-14, Dispatch 14, its all-to-all 14-15; B Experts (its input at 11) 14-18, W
  // 18-22; F Experts (its input at 15) 22-26; B Dispatch's all-to-all 18-19, B Dispatch 26,
  // Attn B 26-30, W 30-32; F Combine's all-to-all 26-27, Combine 32. 22 long, nothing exposed.
  // B0.1 (full backward): Combine 32, its all-to-all 32-33 (exposed: Experts waits), Experts B
  // 33-37, W 37-41, Dispatch's all-to-all 37-38 under it, Dispatch 41, Attn B 41-45, W 45-47.
  // Iteration 47, EP exposed 2 + 0 + 1 = 3.
  // Without the cut points (the halves' order): F Attn 10-14; B Combine 14, its all-to-all 14-15
  // (exposed), Experts B 15-19, Dispatch's all-to-all 19-20 (exposed), Dispatch 20, Experts W
  // 20-24; F Dispatch 24, its all-to-all 24-25 (exposed), Experts 25-29, Combine's all-to-all
  // 29-30 (exposed), Combine 30; B Attn 30-34, W 34-36: 26 long, 4 exposed. B0.1 36-51 as
  // above: iteration 51, EP exposed 2 + 4 + 1 = 7.
  const Schedule s =
      make("fb", 1, 1, 2, Placement::Loop, {{F(0, 0), FB({0, 1, false}, {0, 0, false}), B(0, 1)}});
  const Run cut = run(s, moe_round_model(1, true));
  CHECK(cut.iteration == 47);
  CHECK(cut.ep_exposed == 3);
  CHECK(start_of(cut.sim, "F0.1 Experts L0") == 22);
  CHECK(start_of(cut.sim, "B0.0 Experts L0") == 14);
  CHECK(start_of(cut.sim, "B0.0 Attn L0") == 26);
  CHECK(start_of(cut.sim, "B0.1 Combine L0") == 32);
  const Run halves = run(s, moe_round_model(1, false));
  CHECK(halves.iteration == 51);
  CHECK(halves.ep_exposed == 7);
  CHECK(start_of(halves.sim, "B0.1 Combine L0") == 36);
}

TEST_CASE("an FB block of an MoE layer and a layer without cut points keeps the halves' order",
          "[moe][fb]") {
  // DualPipeV on one rank pairs chunk 1's forward with chunk 0's backward and the other way round
  // (F1.1&B0.0 F0.2&B1.1 F1.2&B0.1): with the cut points on chunk 0's layer only, every block
  // pairs a layer that has them with one that does not, and runs the halves, as the next case
  // without cut points: 154, EP exposed 22.
  const Schedule s = generated("dualpipe-v", 1, 3);
  CostModel mixed = moe_round_model(2, true);
  mixed.chunks[1].layers[0].dispatch = 0;
  mixed.chunks[1].layers[0].combine = 0;
  const Run r = run(s, mixed);
  CHECK(r.iteration == 154);
  CHECK(r.ep_exposed == 22);
}

TEST_CASE("DualPipeV and STP on one rank: their MoE FB blocks hide the all-to-all", "[moe][fb]") {
  // One rank, the V's two chunks one layer each, m 3. Every instruction finds its inputs ready,
  // so the iteration is the sum of the instructions (one FB block above: 22 with the cut points,
  // 26 without; a plain F 10 with 2 exposed; a full B 15 with 1 exposed; a B with its W deferred,
  // synchronous: Combine 0, its all-to-all 1, Experts 4, Dispatch's all-to-all 1, Dispatch 0,
  // Attn 4: 10 with 2 exposed; its W: Experts 4, Attn 2: 6).
  SECTION("dualpipe-v: F0.0 F1.0 F0.1 B1.0 F1.1&B0.0 F0.2&B1.1 F1.2&B0.1 B1.2 B0.2* W") {
    const Schedule s = generated("dualpipe-v", 1, 3);
    // 3 x 10 + 15 + 3 x 22 + 15 + 10 + 6 = 142; EP 3 x 2 + 1 + 0 + 1 + 2 = 10.
    const Run cut = run(s, moe_round_model(2, true));
    CHECK(cut.iteration == 142);
    CHECK(cut.ep_exposed == 10);
    // 3 x 26 instead: 154; EP 3 x 4 more: 22.
    const Run halves = run(s, moe_round_model(2, false));
    CHECK(halves.iteration == 154);
    CHECK(halves.ep_exposed == 22);
  }
  SECTION("stp: F0.0 F1.0 F0.1 F1.1&B1.0 F0.2&B0.0 F1.2&B1.1 B0.1 B1.2 B0.2") {
    const Schedule s = generated("stp", 1, 3);
    // 3 x 10 + 3 x 22 + 3 x 15 = 141; EP 3 x 2 + 0 + 3 x 1 = 9.
    const Run cut = run(s, moe_round_model(2, true));
    CHECK(cut.iteration == 141);
    CHECK(cut.ep_exposed == 9);
    // 3 x 26 instead: 153; EP 21.
    const Run halves = run(s, moe_round_model(2, false));
    CHECK(halves.iteration == 153);
    CHECK(halves.ep_exposed == 21);
  }
}

TEST_CASE("combined 1F1B on one rank: F0, F(i+1)&B(i), B(m-1) against 1F1B", "[moe][combined]") {
  // Megatron's combined_1f1b_schedule_for_no_pipelining, one chunk of one layer, m 3. One rank:
  // every instruction finds its inputs ready, so the iteration is the sum of the instructions
  // (the costs of the FB case above: a plain F 10 with 2 exposed, an FB block 22 with nothing
  // exposed, 26 with 4 exposed without the cut points, a full B 15 with 1 exposed).
  ScheduleOptions o;
  o.pp = 1;
  o.vpp = 1;
  o.microbatches = 3;
  const Schedule s = make_schedule("combined-1f1b", o);
  REQUIRE(format_program(s.ranks[0]) == "F0.0 F0.1&B0.0 F0.2&B0.1 B0.2");
  REQUIRE(validate(s).ok());
  // 10 + 2 x 22 + 15 = 69; EP 2 + 0 + 0 + 1 = 3.
  const Run cut = run(s, moe_round_model(1, true));
  CHECK(cut.iteration == 69);
  CHECK(cut.ep_exposed == 3);
  CHECK(start_of(cut.sim, "B0.2 Combine L0") == 54);  // after 10 + 22 + 22
  // 1F1B on one rank, F B three times: 3 x (10 + 15) = 75; EP 3 x (2 + 1) = 9.
  const Run plain = run(generated("1f1b", 1, 3), moe_round_model(1, true));
  CHECK(plain.iteration == 75);
  CHECK(plain.ep_exposed == 9);
  // Without the cut points the blocks run the halves' order: 10 + 2 x 26 + 15 = 77, EP
  // 2 + 2 x 4 + 1 = 11, behind 1F1B's 75 (which the cut points do not change: 3 x 25).
  const Run halves = run(s, moe_round_model(1, false));
  CHECK(halves.iteration == 77);
  CHECK(halves.ep_exposed == 11);
  CHECK(run(generated("1f1b", 1, 3), moe_round_model(1, false)).iteration == 75);
}

namespace {

// The MoE layer above with shared experts (moe_layer_cost's units), round costs:
//   Attn     F 4, B 4, W 2
//   PreMLP   (shared fc1) F 1, B 1, W 1
//   MLP      (shared fc2) F 1, B 1, W 1
//   Dispatch F 0 then its all-to-all 2; B: the backward all-to-all 2, then 0; no W
//   Experts  F 4, B 4, W 4
//   Combine  F: the all-to-all 2, then 0; B 0 then its backward all-to-all 2; no W
// Serial (Megatron's default): Attn | PreMLP MLP Dispatch Experts Combine. `overlap`
// (--moe-shared-expert-overlap): Attn | Dispatch PreMLP Experts MLP Combine, the shared units
// beside the all-to-alls (UnitCost::beside_all_to_all). Cut points at Dispatch and Combine.
LayerCost shared_round_layer(int layer, bool overlap) {
  LayerCost l;
  l.half = 1;
  const std::initializer_list<UnitKind> serial = {UnitKind::Attn,    UnitKind::PreMLP,
                                                  UnitKind::MLP,     UnitKind::Dispatch,
                                                  UnitKind::Experts, UnitKind::Combine};
  const std::initializer_list<UnitKind> overlapped = {UnitKind::Attn,   UnitKind::Dispatch,
                                                      UnitKind::PreMLP, UnitKind::Experts,
                                                      UnitKind::MLP,    UnitKind::Combine};
  for (UnitKind k : overlap ? overlapped : serial) {
    UnitCost u = round_unit(k, layer, 2);
    if (k == UnitKind::PreMLP || k == UnitKind::MLP) {
      for (Phase p : {Phase::F, Phase::B, Phase::W}) u[p].time_s = 1;
      u.beside_all_to_all = overlap;
    }
    if (k == UnitKind::Dispatch) l.dispatch = static_cast<int>(l.units.size());
    if (k == UnitKind::Combine) l.combine = static_cast<int>(l.units.size());
    l.units.push_back(u);
  }
  return l;
}

CostModel shared_round_model(int chunks, bool overlap) {
  return test::one_layer_chunks(chunks,
                                [overlap](int k) { return shared_round_layer(k, overlap); });
}

}  // namespace

TEST_CASE("shared-expert overlap: fc1 under the dispatch all-to-all, fc2 under the combine's",
          "[moe][shared-overlap]") {
  // One rank, one chunk of one layer, m 1: F0.0 then B0.0 with its W, synchronous.
  // Serial F: Attn 0-4, PreMLP 4-5, MLP 5-6, Dispatch 6, its all-to-all 6-8 (exposed), Experts
  // 8-12, Combine's all-to-all 12-14 (exposed), Combine 14: F ends at 14, EP exposed 4.
  // Serial B: Combine 14, its all-to-all 14-16 (exposed), Experts B 16-20, W 20-24, Dispatch's
  // all-to-all 20-22 under the W, Dispatch 24, MLP B 24-25, W 25-26, PreMLP B 26-27, W 27-28,
  // Attn B 28-32, W 32-34. Iteration 34, EP exposed 4 + 2 = 6.
  const Schedule s = generated("1f1b", 1, 1);
  const Run serial = run(s, shared_round_model(1, false));
  CHECK(serial.iteration == 34);
  CHECK(serial.ep_exposed == 6);
  CHECK(start_of(serial.sim, "B0.0 Combine L0") == 14);
  // Overlapped F: Attn 0-4, Dispatch 4, its all-to-all 4-6 not waited for by the compute
  // stream: PreMLP 4-5 beside it (1 exposed), Experts (the all-to-all's output) 6-10, MLP (from
  // the Experts' compute) 10-11 beside the combine's all-to-all 10-12 (1 exposed), Combine (the
  // all-to-all and MLP) 12: F ends at 12, EP exposed 2.
  // Overlapped B (the mirror: Combine, MLP, Experts, PreMLP, Dispatch, Attn): Combine 12, its
  // all-to-all 12-14 beside MLP B 12-13 and W 13-14 (hidden), Experts B (the all-to-all's
  // output, MLP's end) 14-18, W 18-22, PreMLP B (from Experts B; the compute stream behind the
  // W) 22-23, W 23-24, Dispatch's all-to-all 18-20 under the W, Dispatch 24, Attn B 24-28, W
  // 28-30. Iteration 30, EP exposed 2 + 0 = 2: 4 less, fc1 and fc2 each hidden once forward
  // and fc2's B and W backward.
  const Run overlap = run(s, shared_round_model(1, true));
  CHECK(overlap.iteration == 30);
  CHECK(overlap.ep_exposed == 2);
  CHECK(start_of(overlap.sim, "F0.0 PreMLP L0") == 4);
  CHECK(start_of(overlap.sim, "F0.0 Experts L0") == 6);
  CHECK(start_of(overlap.sim, "F0.0 MLP L0") == 10);
  CHECK(start_of(overlap.sim, "F0.0 Combine L0") == 12);
  CHECK(start_of(overlap.sim, "B0.0 MLP L0") == 12);
  CHECK(start_of(overlap.sim, "B0.0 Experts L0") == 14);
  CHECK(start_of(overlap.sim, "B0.0 Dispatch L0") == 24);
}

TEST_CASE("shared-expert overlap inside DualPipeV's FB blocks still validates and simulates",
          "[moe][shared-overlap][fb]") {
  // The cut points keep the shared units between the all-to-alls (PreMLP, Experts, MLP), so the
  // FB blocks run them in their middle part; the run keeps the sum identity (run()) and the
  // overlap takes nothing away: every shared unit is off the data flow it joined serially.
  const Schedule s = generated("dualpipe-v", 1, 3);
  REQUIRE(validate(s).ok());
  const CostModel overlap = shared_round_model(2, true);
  REQUIRE(overlap.chunks[0].has_all_to_all_cuts(0));
  REQUIRE(overlap.chunks[0].between_all_to_alls(0).size() == 3);
  const Run with = run(s, overlap);
  const Run without = run(s, shared_round_model(2, false));
  CHECK(with.iteration > 0);
  CHECK(with.iteration <= without.iteration);
  CHECK(with.ep_exposed <= without.ep_exposed);
}
