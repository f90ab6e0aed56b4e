// The step tail of the lowering (lower_step.cpp): after the schedule's passes, the data-parallel
// gradient sync, the tied-embedding gradient all-reduce and the optimizer step, as ops on the dp
// and compute streams. Private to src/dag; lower() calls it before building the CSR lists.
#pragma once

#include <vector>

#include "braid/dag.hpp"

namespace braid::detail {

// What the tail needs from the lowering of the passes. Units are indexed in each chunk's unit
// order (prologue, layer units, epilogue); -1 = none.
struct StepInputs {
  std::vector<std::vector<int>> last_w;   // per virtual stage, per unit: its last W op
  std::vector<std::vector<int>> first_f;  // per virtual stage, per unit: its first F op
  std::vector<int> last_compute;          // per rank: the last compute op of the schedule
};

// Appends ops and edges to the Dag being lowered.
class StepEmitter {
 public:
  virtual ~StepEmitter() = default;
  // Appends `op`, costing `cost`, on op.rank's op.stream after the ops already there; returns its
  // index.
  virtual int emit(const DagOp& op, const OpCost& cost) = 0;
  virtual void edge(int from, int to) = 0;
};

void lower_step_tail(const Schedule& schedule, const CostModel& cost, const StepInputs& in,
                     StepEmitter& out);

}  // namespace braid::detail
