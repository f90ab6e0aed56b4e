// Lookups into measured tables: exact points, log-log interpolation between them, and the
// documented scaling rules for shapes and group sizes that were not measured.
#include <algorithm>
#include <cmath>
#include <limits>

#include "braid/measured.hpp"

namespace braid {

Lookup interpolate_loglog(const std::vector<std::pair<double, double>>& xy, double x,
                          bool floor_below) {
  // xy is sorted by x, x > 0, times > 0. Duplicate x values keep the first.
  const auto& first = xy.front();
  const auto& last = xy.back();
  if (x <= first.first) {
    if (x == first.first) return {first.second, LookupKind::Exact};
    return {floor_below ? first.second : first.second * (x / first.first),
            LookupKind::Extrapolated};
  }
  if (x >= last.first) {
    if (x == last.first) return {last.second, LookupKind::Exact};
    return {last.second * (x / last.first), LookupKind::Extrapolated};
  }
  const auto hi = std::lower_bound(xy.begin(), xy.end(), x,
                                   [](const auto& p, double v) { return p.first < v; });
  if (hi->first == x) return {hi->second, LookupKind::Exact};
  const auto lo = hi - 1;
  const double u = std::log(x / lo->first) / std::log(hi->first / lo->first);
  const double lt = std::log(lo->second) + u * (std::log(hi->second) - std::log(lo->second));
  return {std::exp(lt), LookupKind::Interpolated};
}

namespace {

void sort_xy(std::vector<std::pair<double, double>>& xy) {
  std::stable_sort(xy.begin(), xy.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
}

double log_distance(double a, double b) { return std::fabs(std::log(a / b)); }

}  // namespace

std::optional<Lookup> gemm_time(const MeasuredTables& t, std::int64_t m, std::int64_t n,
                                std::int64_t k) {
  if (t.gemm.empty() || m <= 0 || n <= 0 || k <= 0) return std::nullopt;
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * k;
  for (const GemmPoint& g : t.gemm)
    if (g.m == m && g.n == n && g.k == k) return Lookup{g.time_s, LookupKind::Exact};
  // Points sharing two dimensions: the third is the token dimension that varies with sequence
  // and micro-batch (m for forward and input-gradient GEMMs, k for weight-gradient ones).
  for (int free_dim = 0; free_dim < 3; ++free_dim) {
    std::vector<std::pair<double, double>> xy;
    for (const GemmPoint& g : t.gemm) {
      const bool same =
          (free_dim == 0 || g.m == m) && (free_dim == 1 || g.n == n) && (free_dim == 2 || g.k == k);
      if (same) xy.emplace_back(g.flops(), g.time_s);
    }
    if (xy.size() >= 2) {
      sort_xy(xy);
      return interpolate_loglog(xy, flops, false);
    }
  }
  // Nearest shape in log space, at its achieved FLOP/s.
  const GemmPoint* best = nullptr;
  double best_d = std::numeric_limits<double>::infinity();
  for (const GemmPoint& g : t.gemm) {
    const double dm = log_distance(g.m, m), dn = log_distance(g.n, n), dk = log_distance(g.k, k);
    const double d = dm * dm + dn * dn + dk * dk;
    if (d < best_d) best_d = d, best = &g;
  }
  return Lookup{best->time_s * flops / best->flops(), LookupKind::Scaled};
}

std::optional<Lookup> attention_time(const MeasuredTables& t, const AttentionPoint& shape,
                                     bool backward) {
  if (t.attention.empty()) return std::nullopt;
  auto time_of = [&](const AttentionPoint& a) { return backward ? a.bwd_s : a.fwd_s; };
  const double flops = attention_fwd_flops(shape);
  std::vector<std::pair<double, double>> xy;
  for (const AttentionPoint& a : t.attention) {
    if (a.heads == shape.heads && a.kv_heads == shape.kv_heads && a.head_dim == shape.head_dim &&
        a.causal == shape.causal)
      xy.emplace_back(attention_fwd_flops(a), time_of(a));
  }
  if (!xy.empty()) {
    sort_xy(xy);
    return interpolate_loglog(xy, flops, false);
  }
  const AttentionPoint* best = nullptr;
  double best_d = std::numeric_limits<double>::infinity();
  for (const AttentionPoint& a : t.attention) {
    if (a.causal != shape.causal) continue;
    const double df = log_distance(attention_fwd_flops(a), flops);
    const double dh = log_distance(a.heads, shape.heads);
    const double dd = log_distance(a.head_dim, shape.head_dim);
    const double d = df * df + dh * dh + dd * dd;
    if (d < best_d) best_d = d, best = &a;
  }
  if (!best) return std::nullopt;
  return Lookup{time_of(*best) * flops / attention_fwd_flops(*best), LookupKind::Scaled};
}

std::optional<Lookup> elementwise_time(const MeasuredTables& t, ElementwiseKernel k, double bytes) {
  std::vector<std::pair<double, double>> xy;
  for (const ElementwisePoint& p : t.elementwise)
    if (p.kernel == k) xy.emplace_back(p.bytes, p.time_s);
  if (xy.empty() || bytes <= 0) return std::nullopt;
  sort_xy(xy);
  return interpolate_loglog(xy, bytes);
}

std::optional<Lookup> comm_rows_time(const std::vector<MeasuredComm>& rows, CollectiveKind op,
                                     int ranks, double bytes, bool floor_below) {
  if (rows.empty() || bytes <= 0 || ranks < 2) return std::nullopt;
  // The listed group size nearest to `ranks` (exact when listed).
  int best = 0;
  for (const MeasuredComm& c : rows)
    if (best == 0 || std::abs(c.ranks - ranks) < std::abs(best - ranks) ||
        (std::abs(c.ranks - ranks) == std::abs(best - ranks) && c.ranks > best))
      best = c.ranks;
  std::vector<std::pair<double, double>> xy;
  for (const MeasuredComm& c : rows)
    if (c.ranks == best) xy.emplace_back(c.bytes, c.time_s);
  sort_xy(xy);
  Lookup r = interpolate_loglog(xy, bytes, floor_below);
  if (best != ranks) {
    // Same bus bandwidth at this size, so time scales with the bus factor.
    r.time_s *= bus_factor(op, ranks) / bus_factor(op, best);
    r.kind = LookupKind::Scaled;
  }
  return r;
}

std::optional<Lookup> comm_time(const MeasuredTables& t, const std::string& link, CollectiveKind op,
                                int ranks, double bytes) {
  const auto l = t.comm.find(link);
  if (l == t.comm.end()) return std::nullopt;
  const auto o = l->second.find(op);
  if (o == l->second.end()) return std::nullopt;
  return comm_rows_time(o->second, op, ranks, bytes);
}

std::optional<Lookup> copy_time(const std::vector<CopyPoint>& points, double bytes) {
  if (points.empty() || bytes <= 0) return std::nullopt;
  std::vector<std::pair<double, double>> xy;
  for (const CopyPoint& c : points) xy.emplace_back(c.bytes, c.time_s);
  sort_xy(xy);
  return interpolate_loglog(xy, bytes);
}

}  // namespace braid
