// Roofline timing of the kernels a unit runs, from a Profile: GEMMs at the shape-dependent
// efficiency of the profile's saturation curve, fused attention at its forward / backward
// efficiency, elementwise kernels at a fraction of HBM bandwidth. Private to src/cost.
#pragma once

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
};

}  // namespace braid::detail
