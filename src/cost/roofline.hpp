// Roofline timing of the kernels a unit runs, from a Profile: GEMMs by the tile and wave model
// (or the older saturation curve when the profile has no tiles), fused attention at the
// published rate of its implementation for the sequence length, head size and mask (or the flat
// forward / backward efficiency), memory-bound kernels at a fraction of HBM bandwidth plus a
// fixed time per kernel (efficiency.hpp has the formulas). Where the profile carries
// braid-profile's measured tables, the shape-aware lookups (linear_s, attention_s, kernel_s)
// answer from them instead and count the hit, so the caller can tag the phase Measured.
// Private to src/cost.
#pragma once

#include <initializer_list>
#include <vector>

#include "braid/cost_model.hpp"
#include "braid/measured.hpp"
#include "braid/profile.hpp"
#include "efficiency.hpp"

namespace braid::detail {

// A GEMM's dimensions: C[m x n] = A[m x k] B[k x n], `batch` times (a batched GEMM).
struct GemmDims {
  double m = 0, n = 0, k = 0, batch = 1;
  double flops() const { return 2 * m * n * k * batch; }
};

struct Roofline {
  const Profile* profile = nullptr;

  // Achieved fraction of peak for one GEMM of `flops` on one GPU (the saturation curve).
  double gemm_efficiency(double flops) const {
    const GemmEfficiency& g = profile->gemm;
    return g.max_efficiency * flops / (flops + g.half_flops);
  }
  // `peak`: the tensor-core peak the GEMM runs at (0: the profile's bf16 peak_flops; FP8 GEMMs
  // pass fp8_peak_flops and keep the efficiencies measured in bf16, docs/cost-model.md "FP8").
  double gemm_s(double flops, double peak = 0) const {
    const double p = peak > 0 ? peak : profile->peak_flops;
    return flops <= 0 ? 0 : flops / (p * gemm_efficiency(flops));
  }
  // One GEMM of these dimensions: the tile model when the profile has one, else the curve on its
  // FLOPs.
  double gemm_s(const GemmDims& g, double peak = 0) const;
  // GEMMs run one after another (the batched GEMMs of unfused attention): the sum of their tile
  // model times, or without tiles the curve on their summed FLOPs (what braid did before the
  // tile model, kept exactly for such profiles).
  double gemms_s(std::initializer_list<GemmDims> gemms) const;
  double attention_fwd_s(double flops) const {
    return flops / (profile->peak_flops * profile->attention_fwd_efficiency);
  }
  // `flops` as FlashAttention counts its backward: 2.5 x the forward (it recomputes QK^T).
  double attention_bwd_s(double flops) const {
    return flops / (profile->peak_flops * profile->attention_bwd_efficiency);
  }
  // `kernels` memory-bound kernels moving `bytes` in all (0 kernels: traffic inside another
  // kernel, such as a GEMM epilogue's, which pays no fixed time).
  double memory_s(double bytes, double kernels = 1) const {
    return memory_kernel_s(bytes, kernels, profile->hbm_bandwidth_Bps,
                           profile->memory_bound_efficiency, profile->memory_kernel_s);
  }

  // --- measured where the profile has tables (measured_costs.cpp), else the formulas above ---
  mutable int measured_hits = 0;  // lookups answered from profile->measured

  // One GEMM (F, B or W; linear_gemms' shapes) of a linear layer `in` -> `out` over `tokens`.
  // fp8: at the profile's FP8 peak, by the spec model (the measured tables hold bf16 GEMMs).
  double linear_s(double tokens, double in, double out, Phase phase, bool fp8 = false) const;
  // Attention of `samples` sequences of `seq` tokens, per-GPU heads, with kernel `impl`
  // (Default: the profile's default); `flops` as the spec model counts them (the forward's, or
  // FlashAttention's 2.5 x for the backward).
  double attention_s(double samples, double seq, double heads, double kv_heads, double head_dim,
                     bool causal, bool backward, double flops,
                     AttentionImpl impl = AttentionImpl::Default) const;
  // A memory-bound kernel moving `bytes` (the measured kernel at that size, else memory_s).
  double kernel_s(ElementwiseKernel kernel, double bytes) const;

  // --- what the lookups answered, for `braid info` (null: not recorded) ---
  mutable std::vector<KernelCall>* log = nullptr;
  mutable int log_phase = -1;  // the phase being timed (timed() advances it)
  void record(KernelCall call) const {
    if (!log) return;
    call.phase_index = log_phase;
    log->push_back(call);
  }
};

// Sets a phase's compute time from `time` and tags it Measured when a measured table answered
// any of its terms.
template <typename F>
void timed(PhaseCost& phase, const Roofline& roof, F&& time) {
  const int before = roof.measured_hits;
  ++roof.log_phase;
  phase.time_s = time();
  if (roof.measured_hits > before) phase.source = Source::Measured;
}

}  // namespace braid::detail
