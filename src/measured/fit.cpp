// fit_profile: the spec model's parameters (profile.hpp) fitted to measured tables by
// relative-error least squares, with the error of every measured point under the fitted model.
#include <algorithm>
#include <cmath>

#include "../util/format.hpp"
#include "braid/error.hpp"
#include "braid/measured.hpp"

namespace braid {

namespace {

struct Line {
  double slope = 0;
  double intercept = 0;
};

// Minimises sum(((slope*x + intercept) - t) / t)^2 over points (x, t). A negative intercept
// (a "latency" below zero, which noise at the small sizes can produce) is not physical: the line
// is then refitted through the origin.
Line fit_line(const std::vector<std::pair<double, double>>& xt) {
  double sw = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
  for (const auto& [x, t] : xt) {
    const double w = 1.0 / (t * t);
    sw += w, sx += w * x, sxx += w * x * x, st += w * t, sxt += w * x * t;
  }
  const double det = sw * sxx - sx * sx;
  Line l;
  if (xt.size() >= 2 && det > 1e-12 * sw * sxx) {
    l.slope = (sw * sxt - sx * st) / det;
    l.intercept = (st - l.slope * sx) / sw;
    if (l.intercept >= 0 && l.slope > 0) return l;
  }
  l.intercept = 0;
  l.slope = sxx > 0 ? sxt / sxx : 0;
  return l;
}

// Minimises sum((c*x - t) / t)^2: t = c * x.
double fit_proportional(const std::vector<std::pair<double, double>>& xt) {
  double num = 0, den = 0;
  for (const auto& [x, t] : xt) num += x / t, den += (x / t) * (x / t);
  return den > 0 ? num / den : 0;
}

std::string bytes_label(double b) { return util::format("%.0f B", b); }

std::string attention_label(const AttentionPoint& a) {
  return util::format("b%d s%d h%d/%d d%d", a.batch, a.seq, a.heads, a.kv_heads, a.head_dim);
}

}  // namespace

ProfileFit fit_profile(const MeasuredTables& t) {
  ProfileFit fit;
  const bool needs_peak = !t.gemm.empty() || !t.attention.empty();
  if (needs_peak && !(t.peak_flops > 0))
    throw InputError("measured", "peak_flops", "missing or not > 0; efficiencies need a peak");

  if (!t.gemm.empty()) {
    std::vector<std::pair<double, double>> xt;
    for (const GemmPoint& g : t.gemm) xt.emplace_back(g.flops(), g.time_s);
    const Line l = fit_line(xt);
    fit.gemm.max_efficiency = 1.0 / (t.peak_flops * l.slope);
    fit.gemm.half_flops = l.intercept / l.slope;
    for (const GemmPoint& g : t.gemm) {
      const double f = g.flops();
      const double eff = fit.gemm.max_efficiency * f / (f + fit.gemm.half_flops);
      fit.points.push_back(
          {"gemm:" + (g.label.empty() ? std::string("?") : g.label),
           std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k), g.time_s,
           f / (t.peak_flops * eff)});
    }
  }

  if (!t.attention.empty()) {
    for (const bool bwd : {false, true}) {
      std::vector<std::pair<double, double>> xt;
      for (const AttentionPoint& a : t.attention)
        xt.emplace_back(bwd ? attention_bwd_flops(a) : attention_fwd_flops(a),
                        bwd ? a.bwd_s : a.fwd_s);
      const double c = fit_proportional(xt);
      const double eff = 1.0 / (t.peak_flops * c);
      (bwd ? fit.attention_bwd_efficiency : fit.attention_fwd_efficiency) = eff;
      for (const AttentionPoint& a : t.attention) {
        const double f = bwd ? attention_bwd_flops(a) : attention_fwd_flops(a);
        fit.points.push_back(
            {std::string("attention.") + (bwd ? "bwd" : "fwd") + (a.causal ? ".causal" : ".full"),
             attention_label(a), bwd ? a.bwd_s : a.fwd_s, f / (t.peak_flops * eff)});
      }
    }
  }

  if (!t.elementwise.empty() && t.hbm_bandwidth_Bps > 0) {
    std::vector<std::pair<double, double>> xt;
    for (const ElementwisePoint& p : t.elementwise) xt.emplace_back(p.bytes, p.time_s);
    fit.memory_bound_efficiency = 1.0 / (t.hbm_bandwidth_Bps * fit_proportional(xt));
    for (const ElementwisePoint& p : t.elementwise)
      fit.points.push_back({name(p.kernel), bytes_label(p.bytes), p.time_s,
                            p.bytes / (t.hbm_bandwidth_Bps * fit.memory_bound_efficiency)});
  }

  for (const auto& [link, ops] : t.comm) {
    LinkFit lf;
    std::vector<std::pair<double, double>> coll, p2p;
    // The link's bus bandwidth is fitted to the ring collectives; all-to-all rows are listed
    // against it but do not move it (its rows time it: cost/collective.cpp).
    for (const auto& [op, points] : ops)
      for (const MeasuredComm& c : points)
        if (op != CollectiveKind::AllToAll)
          (op == CollectiveKind::P2P ? p2p : coll)
              .emplace_back(bus_factor(op, c.ranks) * c.bytes, c.time_s);
    if (!coll.empty()) {
      const Line l = fit_line(coll);
      lf.latency_s = l.intercept;
      lf.bus_bandwidth_Bps = 1.0 / l.slope;
    }
    if (!p2p.empty()) {
      const Line l = fit_line(p2p);
      lf.p2p_latency_s = l.intercept;
      lf.p2p_bandwidth_Bps = 1.0 / l.slope;
    }
    for (const auto& [op, points] : ops) {
      for (const MeasuredComm& c : points) {
        const double model =
            op == CollectiveKind::P2P
                ? lf.p2p_latency_s + c.bytes / lf.p2p_bandwidth_Bps
                : lf.latency_s + bus_factor(op, c.ranks) * c.bytes / lf.bus_bandwidth_Bps;
        fit.points.push_back({link + ":" + name(op) + ":" + std::to_string(c.ranks),
                              bytes_label(c.bytes), c.time_s, model});
      }
    }
    fit.links[link] = lf;
  }

  for (const bool d2h : {true, false}) {
    const std::vector<CopyPoint>& pts = d2h ? t.d2h : t.h2d;
    if (pts.empty()) continue;
    std::vector<std::pair<double, double>> xt;
    for (const CopyPoint& c : pts) xt.emplace_back(c.bytes, c.time_s);
    const Line l = fit_line(xt);
    (d2h ? fit.host_d2h_Bps : fit.host_h2d_Bps) = 1.0 / l.slope;
    (d2h ? fit.d2h_latency_s : fit.h2d_latency_s) = l.intercept;
    for (const CopyPoint& c : pts)
      fit.points.push_back(
          {d2h ? "d2h" : "h2d", bytes_label(c.bytes), c.time_s, l.intercept + l.slope * c.bytes});
  }
  return fit;
}

std::map<std::string, FitSummary> summarize_fit(const ProfileFit& fit) {
  std::map<std::string, FitSummary> out;
  for (const FitPoint& p : fit.points) {
    FitSummary& s = out[p.unit];
    const double e = std::fabs(p.rel_error());
    s.mean_abs_error = (s.mean_abs_error * s.points + e) / (s.points + 1);
    s.max_abs_error = std::max(s.max_abs_error, e);
    ++s.points;
  }
  return out;
}

}  // namespace braid
