// Kernel efficiencies of the spec model as pure functions of a kernel's shape and the profile's
// sourced parameters (docs/cost-model.md): a GEMM by tile and wave quantization, a fused
// attention kernel by its published rate at the sequence length, head size and mask, a
// memory-bound kernel by its bytes plus a fixed time per kernel, and the compute slowdown while
// communication kernels hold some of the SMs. No I/O, no state. Roofline (roofline.hpp) calls
// them; `braid info` lists what they answered for one layer (KernelCall). Private to src/cost.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "braid/config.hpp"
#include "braid/profile.hpp"

namespace braid::detail {

// One GEMM (or `batch` equal GEMMs launched as one batched kernel) as the tile model times it.
struct GemmEstimate {
  double time_s = 0;
  double efficiency = 0;       // FLOPs / (time x peak)
  int waves = 0;               // waves of tiles of the chosen decomposition
  int split_k = 1;             // K split into this many slices (1: none)
  int tile_m = 0, tile_n = 0;  // the orientation of the tile that was chosen
};

// The tile and wave model (GemmTileModel, profile.hpp) for C[m x n] = A[m x k] B[k x n], `batch`
// times: over both orientations of the tile and, when the unsplit tiles are fewer than the SMs,
// split-K in {2, 3, 4, 6, 8, 12, 16} (slices of at least kMinSplitK), the fastest of
//   fixed_s + waves x 2 tile_m tile_n (k / split + k_overhead) / (peak / sms x wave_efficiency),
//   waves = ceil(ceil(m / tile_m) ceil(n / tile_n) x split x batch / sms_available).
// `sms` sets each SM's share of peak; `sms_available` (default: all of them) the SMs the GEMM
// gets, fewer while communication kernels hold some (overlapped_gemm). Requires
// model.enabled(), sms > 0, 0 < sms_available <= sms; a dimension <= 0 gives time 0.
GemmEstimate tile_gemm(const GemmTileModel& model, int sms, double peak_flops, double m, double n,
                       double k, double batch = 1, int sms_available = 0);
constexpr double kMinSplitK = 128;

// The same GEMM while communication kernels hold `comm_sms` of the GPU's SMs (the wave count
// on the SMs left: a GEMM of exactly one wave of tiles takes two). The simulator's one factor
// per rank is the fluid form of this, sm_share_slowdown (profile.hpp).
GemmEstimate overlapped_gemm(const GemmTileModel& model, int sms, double peak_flops, double m,
                             double n, double k, int comm_sms);

// A fused attention kernel's rate from the profile's rows (AttentionRow): the rows of `impl`
// with `causal`'s mask; at each head size the rate is interpolated linearly in log2(seq)
// between the two sequence lengths around `seq` (clamped to the first and last); between two
// head sizes, linearly in log2(head_dim) (clamped likewise). A backward without published rows
// takes the forward rate x `bwd_over_fwd`. nullopt when no row of impl and mask exists.
struct AttentionEstimate {
  double flops_per_s = 0;
  const AttentionRow* lower = nullptr;  // the rows used: the head size at or below head_dim,
  const AttentionRow* upper = nullptr;  // and the one at or above (the same row when exact)
  bool backward_from_forward = false;   // backward rate derived from the forward rows
};
std::optional<AttentionEstimate> attention_rate(const std::vector<AttentionRow>& rows,
                                                AttentionImpl impl, double head_dim, bool causal,
                                                double seq, bool backward, double bwd_over_fwd);

// A memory-bound kernel (or `kernels` of them) moving `bytes` in all: kernels x fixed_s + bytes /
// (hbm_Bps x efficiency); 0 when bytes <= 0 (nothing runs).
double memory_kernel_s(double bytes, double kernels, double hbm_Bps, double efficiency,
                       double fixed_s);

// What the spec model answered for one kernel of a unit (`braid info`'s per-layer list).
enum class KernelKind : std::uint8_t { Gemm, Attention };
struct KernelCall {
  int phase_index = 0;  // which timed phase it belongs to, in the order the phases were timed
  KernelKind kind = KernelKind::Gemm;
  double m = 0, n = 0, k = 0, batch = 1;  // GEMM dimensions
  double seq = 0, head_dim = 0;           // attention
  bool causal = false, backward = false;
  AttentionImpl impl = AttentionImpl::Default;
  double flops = 0;
  double time_s = 0;
  double efficiency = 0;  // of peak
  bool measured = false;  // a measured table answered
  GemmEstimate gemm;      // the tile model's decomposition (waves 0: another model answered)
  std::optional<AttentionEstimate> attention;  // the rows used (nullopt: flat efficiency)
};

}  // namespace braid::detail
