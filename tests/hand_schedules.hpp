// Hand-written schedules and cost models for the dag, simulator and report tests: small enough to
// work out by hand (the expected values in the tests are derived in their comments).
#pragma once

#include <string>
#include <vector>

#include "../src/schedule/builder.hpp"
#include "braid/cost_model.hpp"
#include "braid/schedule.hpp"

namespace braid::test {

inline Instruction F(int c, int i) { return {InstructionKind::F, {c, i, false}, {}}; }
inline Instruction B(int c, int i, bool defer_w = false) {
  return {InstructionKind::B, {c, i, defer_w}, {}};
}
inline Instruction W(int c, int i) { return {InstructionKind::W, {c, i, false}, {}}; }
inline Instruction FB(Pass f, Pass b) { return {InstructionKind::FB, f, b}; }
inline Instruction FW(Pass f, Pass w) { return {InstructionKind::FW, f, w}; }
inline Instruction FF(Pass a, Pass b) { return {InstructionKind::FF, a, b}; }
inline Instruction Offload(int c, int i) { return {InstructionKind::Offload, {c, i, false}, {}}; }
inline Instruction Reload(int c, int i) { return {InstructionKind::Reload, {c, i, false}, {}}; }

inline Schedule make(const std::string& name, int pp, int vpp, int m, Placement placement,
                     std::vector<std::vector<Instruction>> programs) {
  Schedule s = detail::empty_schedule(pp, vpp, m, placement);
  s.name = name;
  for (int r = 0; r < pp; ++r) s.ranks.push_back(RankProgram{r, programs[r]});
  return s;
}

// A generated schedule (`braid schedule NAME --pp P --microbatches M`, default chunks per rank).
inline Schedule generated(const std::string& name, int pp, int m) {
  ScheduleOptions o;
  o.pp = pp;
  o.microbatches = m;
  return make_schedule(name, o);
}

// 1F1B, p = 2, m = 2 (Megatron's order: warm-up p-1-r forwards, then one F one B), run by
// Megatron's runtime as the generator's is.
inline Schedule one_f_one_b_p2_m2() {
  Schedule s = make("1f1b", 2, 1, 2, Placement::Loop,
                    {{F(0, 0), F(0, 1), B(0, 0), B(0, 1)}, {F(0, 0), B(0, 0), F(0, 1), B(0, 1)}});
  s.p2p_runtime = P2pRuntime::Megatron;
  return s;
}

// 1F1B-I (Megatron interleaved), p = 2, v = 2, m = 2: rank 0 warms up with all four forwards,
// rank 1 with two, then one F one B, then the cool-down; Megatron's runtime.
inline Schedule interleaved_p2_m2() {
  Schedule s = make("1f1b-i", 2, 2, 2, Placement::Loop,
                    {{F(0, 0), F(0, 1), F(1, 0), F(1, 1), B(1, 0), B(1, 1), B(0, 0), B(0, 1)},
                     {F(0, 0), F(0, 1), F(1, 0), B(1, 0), F(1, 1), B(1, 1), B(0, 0), B(0, 1)}});
  s.p2p_runtime = P2pRuntime::Megatron;
  return s;
}

// The unit costs of most hand cases: a unit's F takes 1, B 2, W 2, each collective 1
// (tf = 4, tb = 8, tw = 8, tar = 2), M_a = 4 (1 per forward unit).
inline UniformCosts unit_costs() { return UniformCosts{4, 8, 8, 2, 4}; }

// Keeps only a TP All-Reduce after (unit u, phase ph) of every layer, with time `t`; removes the
// rest.
inline void keep_only_collective(CostModel& cost, int u, Phase ph, double t) {
  for (ChunkCost& c : cost.chunks)
    for (int l = 0; l < c.layer_count(); ++l)
      for (int k = 0; k < static_cast<int>(c.layer(l).size()); ++k)
        for (Phase p : {Phase::F, Phase::B, Phase::W}) {
          Collectives& cols = c.layer(l)[k][p].collectives;
          cols.clear();
          if (k == u && p == ph) {
            Collective col;
            col.kind = CollectiveKind::AllReduce;
            col.position = CollectivePosition::After;
            col.time_s = t;
            cols.push_back(col);
          }
        }
}

// A synthetic layer kind of five units, the lowering's only view of it being the data:
//   PreAttn (F 1, B 1, W 1), Attn (F 1, then a TP All-Reduce of 1) | Dispatch (F 1, then an EP
//   collective of 2 and a CP collective of 1: two groups in one phase), Experts (F 2, B 2, W 2),
//   Combine (F 1, B 1 after an EP collective of 1, W 1).
// Every other phase takes 1 with no collective; the halves braided blocks pair are the first two
// units and the last three. One such layer per chunk, uniform-cost rules (no P2P time, no
// contention, no step tail).
inline Collective group_collective(Group g, CollectiveKind kind, CollectivePosition pos, double t) {
  return Collective{.kind = kind, .group = g, .position = pos, .time_s = t};
}

inline LayerCost five_unit_layer(int layer) {
  LayerCost l;
  l.half = 2;
  for (UnitKind k : {UnitKind::PreAttn, UnitKind::Attn, UnitKind::Dispatch, UnitKind::Experts,
                     UnitKind::Combine}) {
    UnitCost u;
    u.kind = k;
    u.layer = layer;
    const double t = k == UnitKind::Experts ? 2 : 1;
    for (Phase p : {Phase::F, Phase::B, Phase::W}) u[p].time_s = t;
    l.units.push_back(u);
  }
  using K = CollectiveKind;
  using P = CollectivePosition;
  l.units[1][Phase::F].collectives.push_back(
      group_collective(Group::Tp, K::AllReduce, P::After, 1));
  l.units[2][Phase::F].collectives.push_back(
      group_collective(Group::Ep, K::AllGather, P::After, 2));
  l.units[2][Phase::F].collectives.push_back(
      group_collective(Group::Cp, K::ReduceScatter, P::After, 1));
  l.units[4][Phase::B].collectives.push_back(
      group_collective(Group::Ep, K::AllGather, P::Before, 1));
  return l;
}

// A uniform model without contention of `chunks` chunks, chunk k one layer, layer_of(k).
template <typename LayerOf>
CostModel one_layer_chunks(int chunks, LayerOf layer_of) {
  CostModel cost;
  cost.uniform = true;
  cost.contention = Contention{1.0, 1.0};
  for (int k = 0; k < chunks; ++k) {
    ChunkCost c;
    c.virtual_stage = k;
    c.add_layer(layer_of(k));
    cost.chunks.push_back(std::move(c));
  }
  return cost;
}

inline CostModel five_unit_model(int chunks) { return one_layer_chunks(chunks, five_unit_layer); }

}  // namespace braid::test
