// The shape-aware side of Roofline (roofline.hpp): GEMM, attention and elementwise times looked up
// in braid-profile's tables (measured.hpp's interpolation and scaling rules) when the profile has
// them; the spec model otherwise (the tile model, the attention rows, efficiency.hpp).
#include <algorithm>
#include <cmath>

#include "braid/profile_plan.hpp"
#include "roofline.hpp"

namespace braid::detail {

namespace {

KernelCall gemm_call(const GemmDims& g) {
  KernelCall c;
  c.kind = KernelKind::Gemm;
  c.m = g.m;
  c.n = g.n;
  c.k = g.k;
  c.batch = g.batch;
  c.flops = g.flops();
  return c;
}

}  // namespace

double Roofline::gemm_s(const GemmDims& g, double peak) const {
  KernelCall call = gemm_call(g);
  const double p = peak > 0 ? peak : profile->peak_flops;
  if (profile->gemm.tiles.enabled()) {
    call.gemm = tile_gemm(profile->gemm.tiles, profile->sms, p, g.m, g.n, g.k, g.batch);
    call.time_s = call.gemm.time_s;
  } else {
    call.time_s = gemm_s(call.flops, p);
  }
  // Of the peak the GEMM ran at (FP8's for an FP8 GEMM).
  call.efficiency = call.time_s > 0 ? call.flops / (call.time_s * p) : 0;
  record(call);
  return call.time_s;
}

double Roofline::gemms_s(std::initializer_list<GemmDims> gemms) const {
  if (profile->gemm.tiles.enabled()) {
    double t = 0;
    for (const GemmDims& g : gemms) t += gemm_s(g);
    return t;
  }
  double flops = 0;
  for (const GemmDims& g : gemms) flops += g.flops();
  const double t = gemm_s(flops);
  for (const GemmDims& g : gemms) {
    KernelCall call = gemm_call(g);
    call.time_s = flops > 0 ? t * call.flops / flops : 0;  // the curve's time, by FLOP share
    call.efficiency = call.time_s > 0 ? call.flops / (call.time_s * profile->peak_flops) : 0;
    record(call);
  }
  return t;
}

double Roofline::linear_s(double tokens, double in, double out, Phase phase, bool fp8) const {
  const double flops = 2 * tokens * in * out;
  if (flops <= 0) return 0;
  const auto shapes = linear_gemms(std::llround(tokens), std::llround(in), std::llround(out), "");
  const GemmShape& g = shapes[static_cast<int>(phase)];
  if (profile->measured && !fp8) {
    if (auto l = gemm_time(*profile->measured, g.m, g.n, g.k)) {
      ++measured_hits;
      KernelCall call = gemm_call(
          {static_cast<double>(g.m), static_cast<double>(g.n), static_cast<double>(g.k), 1});
      call.time_s = l->time_s;
      call.efficiency = call.flops / (call.time_s * profile->peak_flops);
      call.measured = true;
      record(call);
      return l->time_s;
    }
  }
  // The phase's GEMM with linear_gemms' orientation (F: tokens x out x in, B: tokens x in x out,
  // W: out x in x tokens), as the measured tables see it.
  const double dims[3][3] = {{tokens, out, in}, {tokens, in, out}, {out, in, tokens}};
  const auto& d = dims[static_cast<int>(phase)];
  return gemm_s(GemmDims{d[0], d[1], d[2], 1}, fp8 ? profile->fp8_peak_flops : 0);
}

double Roofline::attention_s(double samples, double seq, double heads, double kv_heads,
                             double head_dim, bool causal, bool backward, double flops,
                             AttentionImpl impl) const {
  if (flops <= 0) return 0;
  KernelCall call;
  call.kind = KernelKind::Attention;
  call.seq = seq;
  call.head_dim = head_dim;
  call.causal = causal;
  call.backward = backward;
  call.flops = flops;
  call.batch = samples * heads;
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
        call.time_s = l->time_s;
        call.measured = true;
        call.efficiency = flops / (call.time_s * profile->peak_flops);
        record(call);
        return l->time_s;
      }
    }
  }
  call.impl = impl == AttentionImpl::Default ? profile->attention_default_impl : impl;
  // A backward without published rows keeps the profile's backward-to-forward ratio.
  const double bwd_over_fwd = profile->attention_bwd_efficiency / profile->attention_fwd_efficiency;
  call.attention = attention_rate(profile->attention_rows, call.impl, head_dim, causal, seq,
                                  backward, bwd_over_fwd);
  if (call.attention) {
    call.time_s = flops / call.attention->flops_per_s;
  } else {
    call.time_s = backward ? attention_bwd_s(flops) : attention_fwd_s(flops);
  }
  call.efficiency = flops / (call.time_s * profile->peak_flops);
  record(call);
  return call.time_s;
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
