// A greedy list scheduler that builds seeds for the designer: every rank runs, whenever it is
// free, the most urgent ready pass (a backward, else a forward the memory limit admits, else a
// deferred weight gradient), on per-chunk times taken from the cost model. Its variants — memory
// limit, split or full backward, which chunk's forward goes first — form a family that holds
// zero-bubble-like and 1F1B-like V schedules; with target times (blocks.hpp) it follows a
// periodic building block instead, choosing or in fixed order. Internal to src/design/.
#pragma once

#include <optional>
#include <vector>

#include "braid/cost_model.hpp"
#include "braid/schedule.hpp"

namespace braid::designer {

struct GreedyPolicy {
  int mem_limit = 0;              // chunk-microbatches alive per rank
  bool hold_until_w = false;      // a split backward keeps its activations until the W
  bool split = true;              // B defers its W; false: full backward
  bool later_chunk_first = true;  // among ready forwards, the chunk nearer the loss first
  bool w_when_full = false;       // at the memory limit a deferred W goes before a ready backward
  int reserve = 1;  // slots a chunk-0 forward leaves free for chunk-1 forwards (0 may starve)
  // Warm-up depth: before its first backward, rank r runs at most max(mem_limit - 1 - r,
  // mem_limit / 2) chunk-0 forwards (ZB-V's 2p - 1 - r at mem_limit 2p); false: as memory allows.
  bool warmup_cap = false;
  // Target times (blocks.hpp): pass `phase` of microbatch mb on virtual stage k aims at
  // target_period * mb + target[3 * k + phase]; among the passes that can start earliest the
  // rank runs the one aimed earliest. Empty: the fixed priorities (backward, forward, W).
  std::vector<double> target;
  double target_period = 0;
  // Per-pass target times, index (3 * k + phase) * microbatches + mb; when not empty they replace
  // the periodic ones (blocks.hpp's block_program).
  std::vector<double> pass_target;
  // Each rank runs its passes in target order (a fixed program, run as soon as inputs are there)
  // instead of choosing among the ready ones; the memory limit is then not enforced, only counted.
  bool strict_order = false;
  // Once a rank has run all its forwards it runs backwards first and weight gradients only in
  // waits, whatever the targets say (the drain's idle time is what W can fill).
  bool drain_w_last = false;
};

// The list scheduler's own clock at the end (its estimate of the iteration time).
struct GreedyResult {
  Schedule schedule;
  double makespan = 0;
  int peak_live = 0;  // largest rank's chunk-microbatches alive (as the policy counts)
};

// A V schedule (vpp = 2) built by the policy on `cost` (2p virtual stages); nullopt when the
// memory limit leaves some rank unable to make progress.
std::optional<GreedyResult> greedy_v_schedule(int pp, int microbatches, const CostModel& cost,
                                              const GreedyPolicy& policy);

// Fuses adjacent lone F and lone B (or W) into braided blocks wherever the result still
// validates.
void braid_adjacent(Schedule& s);

}  // namespace braid::designer
