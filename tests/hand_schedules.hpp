// Hand-written schedules and cost models for the dag, simulator and report tests: small enough to
// work out by hand (the expected values in the tests are derived in their comments).
#pragma once

#include <string>
#include <vector>

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
  Schedule s;
  s.name = name;
  s.pp = pp;
  s.vpp = vpp;
  s.microbatches = m;
  s.placement = placement;
  for (int r = 0; r < pp; ++r) s.ranks.push_back(RankProgram{r, programs[r]});
  return s;
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

}  // namespace braid::test
