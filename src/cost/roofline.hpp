// Roofline timing of the kernels a unit runs, from a Profile: GEMMs at the shape-dependent
// efficiency of the profile's saturation curve, fused attention at its forward / backward
// efficiency, elementwise kernels at a fraction of HBM bandwidth. Where the profile carries
// braid-profile's measured tables, the shape-aware lookups (linear_s, attention_s, kernel_s)
// answer from them instead and count the hit, so the caller can tag the phase Measured.
// Private to src/cost.
#pragma once

#include "braid/cost_model.hpp"
#include "braid/measured.hpp"
#include "braid/profile.hpp"

namespace braid::detail {

struct Roofline {
  const Profile* profile = nullptr;

  // Achieved fraction of peak for one GEMM of `flops` on one GPU.
  double gemm_efficiency(double flops) const {
    const GemmEfficiency& g = profile->gemm;
    return g.max_efficiency * flops / (flops + g.half_flops);
  }
  double gemm_s(double flops) const {
    return flops <= 0 ? 0 : flops / (profile->peak_flops * gemm_efficiency(flops));
  }
  double attention_fwd_s(double flops) const {
    return flops / (profile->peak_flops * profile->attention_fwd_efficiency);
  }
  // `flops` as FlashAttention counts its backward: 2.5 x the forward (it recomputes QK^T).
  double attention_bwd_s(double flops) const {
    return flops / (profile->peak_flops * profile->attention_bwd_efficiency);
  }
  double memory_s(double bytes) const {
    return bytes / (profile->hbm_bandwidth_Bps * profile->memory_bound_efficiency);
  }

  // --- measured where the profile has tables (measured_costs.cpp), else the formulas above ---
  mutable int measured_hits = 0;  // lookups answered from profile->measured

  // One GEMM (F, B or W; linear_gemms' shapes) of a linear layer `in` -> `out` over `tokens`.
  double linear_s(double tokens, double in, double out, Phase phase) const;
  // Attention of `samples` sequences of `seq` tokens, per-GPU heads; `flops` as the spec model
  // counts them (the forward's, or FlashAttention's 2.5 x for the backward).
  double attention_s(double samples, double seq, double heads, double kv_heads, double head_dim,
                     bool causal, bool backward, double flops) const;
  // A memory-bound kernel moving `bytes` (the measured kernel at that size, else memory_s).
  double kernel_s(ElementwiseKernel kernel, double bytes) const;
};

// Sets a phase's compute time from `time` and tags it Measured when a measured table answered
// any of its terms.
template <typename F>
void timed(PhaseCost& phase, const Roofline& roof, F&& time) {
  const int before = roof.measured_hits;
  phase.time_s = time();
  if (roof.measured_hits > before) phase.source = Source::Measured;
}

}  // namespace braid::detail
