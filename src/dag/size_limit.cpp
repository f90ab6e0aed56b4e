// The size guard (size_limit.hpp).
#include "braid/size_limit.hpp"

#include <cstdio>

#include "braid/error.hpp"

namespace braid {

namespace {

// Compute F, B, W, plus one op per phase that has a TP collective; with full recomputation a
// layer unit runs its forward (and its collective) once more before the backward.
std::int64_t unit_ops(const UnitCost& unit, bool recomputed) {
  std::int64_t ops = 3;
  for (const PhaseCost& phase : unit.phase)
    if (phase.collective.kind != CollectiveKind::None) ++ops;
  if (recomputed) ops += unit.recompute.collective.kind != CollectiveKind::None ? 2 : 1;
  return ops;
}

std::string count(double ops) {
  char text[64];
  std::snprintf(text, sizeof text, "%.0f", ops);
  return text;
}

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1ull << 30));
  return text;
}

}  // namespace

SizeEstimate estimate_size(const CostModel& cost, double cost_repeats, double virtual_stages,
                           double microbatches) {
  std::int64_t per_microbatch = 0;
  const bool full_recompute = cost.recompute == Recompute::Full;
  for (const ChunkCost& chunk : cost.chunks) {
    for (const UnitCost& u : chunk.prologue) per_microbatch += unit_ops(u, false);
    for (const LayerCost& layer : chunk.layers)
      for (const UnitCost& u : layer) per_microbatch += unit_ops(u, full_recompute);
    for (const UnitCost& u : chunk.epilogue) per_microbatch += unit_ops(u, false);
  }
  // Per virtual stage and microbatch: an activation send, a gradient send, an offload, a reload.
  SizeEstimate e;
  e.ops = (static_cast<double>(per_microbatch) * cost_repeats + 4 * virtual_stages) * microbatches;
  e.bytes = e.ops * kBytesPerOp;
  return e;
}

void check_size(const SizeEstimate& estimate, double max_bytes, bool force,
                const std::string& where) {
  const std::string what =
      "estimated " + count(estimate.ops) + " ops and " + gib(estimate.bytes) + " of memory";
  if (estimate.ops > kMaxOps)
    throw InputError(where, "size",
                     what + ", above the hard limit of " + count(kMaxOps) +
                         " ops (int32 indices); use fewer microbatches, stages or layers");
  if (estimate.bytes > max_bytes && !force)
    throw InputError(where, "size",
                     what + ", above the limit of " + gib(max_bytes) +
                         "; use fewer microbatches, stages or layers, or --force to run anyway");
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
