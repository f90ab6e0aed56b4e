// copy_pipeline_sizes: the pipeline's sizes, pp, vpp (chunks per rank) and microbatches, which a
// Schedule, its ScheduleOptions, the lowered Dag and the result rows of the report, theory and
// design modules each carry under these names. Header-only; it knows none of those types.
#pragma once

namespace braid::util {

// Copies them from one struct that carries them to another.
template <typename To, typename From>
void copy_pipeline_sizes(To& to, const From& from) {
  to.pp = from.pp;
  to.vpp = from.vpp;
  to.microbatches = from.microbatches;
}

}  // namespace braid::util
