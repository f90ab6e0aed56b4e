// Collective time on one link class (cost_model.hpp: collective_time_s).
#include <algorithm>
#include <vector>

#include "braid/cost_model.hpp"
#include "braid/measured.hpp"

namespace braid {

namespace {

const char* measured_key(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllReduce:
      return "all_reduce";
    case CollectiveKind::AllGather:
      return "all_gather";
    case CollectiveKind::ReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::None:
      break;
  }
  return "";
}

// Log-log interpolation in bytes over the rows of one group size (sorted by bytes); below the
// first row its time (the latency floor), above the last row its time scaled by bytes
// (measured.hpp: interpolate_loglog).
double interpolate(const std::vector<MeasuredComm>& rows, double bytes) {
  std::vector<std::pair<double, double>> xy;
  xy.reserve(rows.size());
  for (const MeasuredComm& m : rows) xy.emplace_back(m.bytes, m.time_s);
  return interpolate_loglog(xy, bytes).time_s;
}

}  // namespace

double collective_time_s(const LinkProfile& link, CollectiveKind kind, int ranks, double bytes) {
  if (kind == CollectiveKind::None || ranks <= 1 || bytes <= 0) return 0;
  if (auto it = link.measured.find(measured_key(kind)); it != link.measured.end()) {
    std::vector<MeasuredComm> rows;
    for (const auto& m : it->second) {
      if (m.ranks == ranks) rows.push_back(m);
    }
    if (!rows.empty()) return interpolate(rows, bytes);
  }
  double n = ranks;
  double factor = kind == CollectiveKind::AllReduce ? 2 * (n - 1) / n : (n - 1) / n;
  return link.latency_s + factor * bytes / link.bus_bandwidth_Bps;
}

}  // namespace braid
