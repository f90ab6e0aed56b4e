// The measured side of Roofline (roofline.hpp): GEMM, attention and elementwise times looked up
// in braid-profile's tables (measured.hpp's interpolation and scaling rules) when the profile has
// them; the spec model otherwise.
#include <algorithm>
#include <cmath>

#include "braid/profile_plan.hpp"
#include "roofline.hpp"

namespace braid::detail {

double Roofline::linear_s(double tokens, double in, double out, Phase phase) const {
  const double flops = 2 * tokens * in * out;
  if (profile->measured && flops > 0) {
    const auto shapes = linear_gemms(std::llround(tokens), std::llround(in), std::llround(out), "");
    const GemmShape& g = shapes[static_cast<int>(phase)];
    if (auto l = gemm_time(*profile->measured, g.m, g.n, g.k)) {
      ++measured_hits;
      return l->time_s;
    }
  }
  return gemm_s(flops);
}

double Roofline::attention_s(double samples, double seq, double heads, double kv_heads,
                             double head_dim, bool causal, bool backward, double flops) const {
  if (flops <= 0) return 0;
  if (profile->measured) {
    AttentionPoint a;
    a.batch = static_cast<int>(std::lround(samples));
    a.seq = static_cast<int>(std::lround(seq));
    a.heads = static_cast<int>(std::lround(heads));
    a.kv_heads = std::max(1, static_cast<int>(std::lround(kv_heads)));
    a.head_dim = static_cast<int>(std::lround(head_dim));
    a.causal = causal;
    if (a.batch > 0 && a.seq > 0 && a.heads > 0) {
      if (auto l = attention_time(*profile->measured, a, backward)) {
        ++measured_hits;
        return l->time_s;
      }
    }
  }
  return backward ? attention_bwd_s(flops) : attention_fwd_s(flops);
}

double Roofline::kernel_s(ElementwiseKernel kernel, double bytes) const {
  if (bytes <= 0) return 0;
  if (profile->measured) {
    if (auto l = elementwise_time(*profile->measured, kernel, bytes)) {
      ++measured_hits;
      return l->time_s;
    }
  }
  return memory_s(bytes);
}

}  // namespace braid::detail
