// The size guard (size_limit.hpp).
#include "braid/size_limit.hpp"

#include <iterator>

#include "../util/format.hpp"
#include "braid/error.hpp"

namespace braid {

namespace {

// A phase's compute (in one op, or one piece per step beside the collectives inside it, with the
// compute before and after their segment), plus
// one op per collective (inside_transfers for one inside the compute).
std::int64_t phase_ops(const PhaseCost& phase) {
  std::int64_t ops = phase.compute_ops();
  for (const Collective& c : phase.collectives)
    ops += c.position == CollectivePosition::Inside ? inside_transfers(c) : 1;
  return ops;
}

// F, B and W; with full recomputation a layer unit runs its forward (and its collectives) once
// more before the backward.
std::int64_t unit_ops(const UnitCost& unit, bool recomputed) {
  std::int64_t ops = 0;
  for (const PhaseCost& phase : unit.phase) ops += phase_ops(phase);
  if (recomputed) ops += phase_ops(unit.recompute);
  return ops;
}

std::string count(double ops) { return util::format("%.0f", ops); }

std::string gib(double bytes) { return util::format("%.1f GiB", bytes / (1ull << 30)); }

SizeEstimate from_ops(double ops) { return {ops, ops * kEdgesPerOp, ops * kBytesPerOp}; }

}  // namespace

SizeEstimate estimate_size(const CostModel& cost, double cost_repeats, double virtual_stages,
                           double microbatches) {
  std::int64_t per_microbatch = 0;
  const bool full_recompute = cost.recompute == Recompute::Full;
  for (const ChunkCost& chunk : cost.chunks) {
    for (const UnitCost& u : chunk.prologue) per_microbatch += unit_ops(u, false);
    for (const UnitCost& u : chunk.layer_units) per_microbatch += unit_ops(u, full_recompute);
    for (const UnitCost& u : chunk.epilogue) per_microbatch += unit_ops(u, false);
  }
  // Per virtual stage and microbatch: an activation send, a gradient send, an offload, a reload.
  return from_ops((static_cast<double>(per_microbatch) * cost_repeats + 4 * virtual_stages) *
                  microbatches);
}

SizeEstimate estimate_study_size(const Study& study, double virtual_stages, double microbatches) {
  // Per layer: at most 5 units (attention, MLP, norms, MoE router) x F, B, W, and per phase
  // with TP its collectives (two, four with sequence parallelism); full recomputation reruns
  // the forward and its collectives once more. Per virtual stage: embedding/head/loss units.
  const double collectives = study.parallel.tp > 1 ? (study.parallel.sequence_parallel ? 4 : 2) : 0;
  // Context parallelism runs the attention's F and B (and a full recomputation's rerun) in cp
  // pieces beside cp - 1 ring transfers: 2 (cp - 1) more ops each.
  const double ring = 2.0 * (study.parallel.cp - 1);
  // TP-communication overlap runs four GEMMs of a layer (the two column forwards, the two row
  // dgrads) in tp pieces beside tp - 1 ring transfers, with the compute before and after them
  // as ops of their own: 2 (tp - 1) + 2 more ops each, two of them in a rerun forward.
  const double tp_ring = study.training.tp_comm_overlap ? 2.0 * (study.parallel.tp - 1) + 2 : 0;
  // It also pipelines the two row forwards' reduce-scatters: TE's 4 GEMM chunks (kTeRsSplits)
  // beside 4 transfers, with the compute before and after, in place of one compute and one
  // collective: 8 more ops each, in a rerun forward too.
  const double tp_pipeline = study.training.tp_comm_overlap ? 2.0 * 4 : 0;
  // Sequence parallelism runs the two column backwards' dgrad in 4 pieces (kRegatherPieces)
  // beside 3 transfers of the re-gather of their saved input, with the compute before and after
  // them as ops of their own, in place of one compute: 8 more ops each (the LM head's too).
  const double regather = study.parallel.tp > 1 && study.parallel.sequence_parallel ? 2.0 * 4 : 0;
  double per_layer = 15 + 3 * collectives + 2 * ring + 4 * tp_ring + 2 * tp_pipeline + 2 * regather;
  if (study.training.recompute == Recompute::Full)
    per_layer += 5 + collectives + ring + 2 * tp_ring + 2 * tp_pipeline;
  double layers = study.model.layers;
  if (study.model.vision) layers += study.model.vision->depth;
  const double per_stage =
      12 + 3 * collectives + 4 + regather;  // prologue/epilogue units, sends, copies
  return from_ops((layers * per_layer + per_stage * virtual_stages) * microbatches);
}

SizeEstimate combined(const SizeEstimate& a, const SizeEstimate& b) {
  return {a.ops + b.ops, a.edges + b.edges, a.bytes + b.bytes};
}

void check_size(const SizeEstimate& estimate, double max_bytes, bool force,
                const std::string& where, const std::string& reduce, bool can_force) {
  const std::string what =
      "estimated " + count(estimate.ops) + " ops and " + gib(estimate.bytes) + " of memory";
  if (estimate.ops > kMaxOps || estimate.edges > kMaxEdges)
    throw InputError(where, "size",
                     what + ", above the hard limit of " + count(kMaxOps) + " ops or " +
                         count(kMaxEdges) + " edges (int32 indices); use " + reduce);
  if (estimate.bytes > max_bytes && !force)
    throw InputError(where, "size",
                     what + ", above the limit of " + gib(max_bytes) + "; use " + reduce +
                         (can_force ? ", or --force to run anyway" : ""));
}

void check_virtual_stages(double virtual_stages, const std::string& where) {
  if (virtual_stages > kMaxVirtualStages)
    throw InputError(where, "size",
                     count(virtual_stages) + " virtual stages (pp x chunks per rank), above the " +
                         "limit of " + count(kMaxVirtualStages) + "; use a smaller --pp or --vpp");
}

void check_schedule_size(int pp, int chunks_per_rank, int microbatches, const std::string& where) {
  if (pp <= 0 || chunks_per_rank <= 0 || microbatches <= 0) return;
  const double instructions = 3.0 * pp * chunks_per_rank * microbatches;
  if (instructions > kMaxScheduleInstructions)
    throw InputError(where, "size",
                     "estimated " + count(instructions) + " instructions (pp x chunks x " +
                         "microbatches x 3), above the limit of " +
                         count(kMaxScheduleInstructions) + "; use fewer microbatches or stages");
}

}  // namespace braid
