// A greedy list scheduler that builds seeds for the designer: every rank runs, whenever it is
// free, the most urgent ready pass (a backward, else a forward the memory limit admits, else a
// deferred weight gradient), on per-chunk times taken from the cost model. Its variants — memory
// limit, split or full backward, which chunk's forward goes first — form a family that holds
// zero-bubble-like and 1F1B-like V schedules. Internal to src/design/.
#pragma once

#include <optional>

#include "braid/cost_model.hpp"
#include "braid/schedule.hpp"

namespace braid::designer {

struct GreedyPolicy {
  int mem_limit = 0;              // chunk-microbatches alive per rank
  bool hold_until_w = false;      // a split backward keeps its activations until the W
  bool split = true;              // B defers its W; false: full backward
  bool later_chunk_first = true;  // among ready forwards, the chunk nearer the loss first
  bool w_when_full = false;       // at the memory limit a deferred W goes before a ready backward
  int reserve = 1;
  // Warm-up depth: before its first backward, rank r runs at most max(mem_limit - 1 - r,
  // mem_limit / 2) chunk-0 forwards (ZB-V's 2p - 1 - r at mem_limit 2p); false: as memory allows.
  bool warmup_cap =
      false;  // slots a chunk-0 forward leaves free for chunk-1 forwards (0 may starve)
};

// A V schedule (vpp = 2) built by the policy on `cost` (2p virtual stages); nullopt when the
// memory limit leaves some rank unable to make progress.
std::optional<Schedule> greedy_v_schedule(int pp, int microbatches, const CostModel& cost,
                                          const GreedyPolicy& policy);

// Fuses adjacent lone F and lone B (or W) into braided blocks wherever the result still
// validates.
void braid_adjacent(Schedule& s);

}  // namespace braid::designer
