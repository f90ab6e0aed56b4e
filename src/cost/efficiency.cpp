// Kernel efficiencies (efficiency.hpp). Formulas and sources: docs/cost-model.md.
#include "efficiency.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "braid/error.hpp"

namespace braid::detail {

GemmEstimate tile_gemm(const GemmTileModel& model, int sms, double peak_flops, double m, double n,
                       double k, double batch, int sms_available) {
  if (!model.enabled() || sms <= 0 || peak_flops <= 0 || model.wave_efficiency <= 0)
    throw InternalError("tile_gemm: the profile's tile model or SM count is not set");
  if (sms_available <= 0) sms_available = sms;
  if (sms_available > sms) throw InternalError("tile_gemm: more SMs available than the GPU has");
  GemmEstimate best;
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return best;
  // Each SM's share of peak at the wave efficiency: a full wave of tiles runs at this rate.
  const double sm_rate = peak_flops / sms * model.wave_efficiency;
  best.time_s = std::numeric_limits<double>::infinity();
  const std::array<std::array<int, 2>, 2> orientations = {
      {{model.tile_m, model.tile_n}, {model.tile_n, model.tile_m}}};
  const std::array<int, 8> splits = {1, 2, 3, 4, 6, 8, 12, 16};
  for (const auto& [tm, tn] : orientations) {
    const double tiles = std::ceil(m / tm) * std::ceil(n / tn) * batch;
    for (int split : splits) {
      // Split-K only fills a grid of less than one wave (the unsplit tiles leave SMs idle).
      if (split > 1 && (k / split < kMinSplitK || tiles >= sms_available)) break;
      const double waves = std::ceil(tiles * split / sms_available);
      const double t =
          model.fixed_s + waves * 2.0 * tm * tn * (k / split + model.k_overhead) / sm_rate;
      if (t < best.time_s) {
        best.time_s = t;
        best.waves = static_cast<int>(waves);
        best.split_k = split;
        best.tile_m = tm;
        best.tile_n = tn;
      }
    }
  }
  best.efficiency = 2.0 * m * n * k * batch / (best.time_s * peak_flops);
  return best;
}

GemmEstimate overlapped_gemm(const GemmTileModel& model, int sms, double peak_flops, double m,
                             double n, double k, int comm_sms) {
  if (comm_sms < 0 || comm_sms >= sms)
    throw InternalError("overlapped_gemm: communication must leave some SMs to the GEMM");
  return tile_gemm(model, sms, peak_flops, m, n, k, 1, sms - comm_sms);
}

namespace {

// Linear interpolation of y over log2(x) through the row's points, clamped at both ends.
double rate_at(const std::vector<double>& xs, const std::vector<double>& ys, double x) {
  if (x <= xs.front()) return ys.front();
  if (x >= xs.back()) return ys.back();
  const auto hi = std::upper_bound(xs.begin(), xs.end(), x);
  const std::size_t i = static_cast<std::size_t>(hi - xs.begin());
  const double u = std::log2(x / xs[i - 1]) / std::log2(xs[i] / xs[i - 1]);
  return ys[i - 1] + u * (ys[i] - ys[i - 1]);
}

}  // namespace

std::optional<AttentionEstimate> attention_rate(const std::vector<AttentionRow>& rows,
                                                AttentionImpl impl, double head_dim, bool causal,
                                                double seq, bool backward, double bwd_over_fwd) {
  const AttentionRow* lower = nullptr;  // largest head size <= head_dim
  const AttentionRow* upper = nullptr;  // smallest head size >= head_dim
  for (const AttentionRow& r : rows) {
    if (r.impl != impl || r.causal != causal) continue;
    if (r.head_dim <= head_dim && (!lower || r.head_dim > lower->head_dim)) lower = &r;
    if (r.head_dim >= head_dim && (!upper || r.head_dim < upper->head_dim)) upper = &r;
  }
  if (!lower && !upper) return std::nullopt;
  if (!lower) lower = upper;
  if (!upper) upper = lower;
  AttentionEstimate est;
  est.lower = lower;
  est.upper = upper;
  auto rate = [&](const AttentionRow& r) {
    if (!backward) return rate_at(r.seq, r.fwd_flops_per_s, seq);
    if (!r.bwd_flops_per_s.empty()) return rate_at(r.seq, r.bwd_flops_per_s, seq);
    est.backward_from_forward = true;
    return rate_at(r.seq, r.fwd_flops_per_s, seq) * bwd_over_fwd;
  };
  const double lo = rate(*lower), hi = rate(*upper);
  if (lower == upper) {
    est.flops_per_s = lo;
  } else {
    const double u = std::log2(head_dim / lower->head_dim) /
                     std::log2(static_cast<double>(upper->head_dim) / lower->head_dim);
    est.flops_per_s = lo + u * (hi - lo);
  }
  return est;
}

double memory_kernel_s(double bytes, double kernels, double hbm_Bps, double efficiency,
                       double fixed_s) {
  if (bytes <= 0) return 0;
  return kernels * fixed_s + bytes / (hbm_Bps * efficiency);
}

}  // namespace braid::detail
