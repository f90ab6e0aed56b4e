// Collective time on one link class (cost_model.hpp: collective_time_s).
#include <algorithm>
#include <vector>

#include "braid/cost_model.hpp"
#include "braid/measured.hpp"

namespace braid {

namespace {

// The measured rows of `kind` for a group of `ranks` on `link` as (bytes, time) sorted by bytes;
// empty when there are none.
std::vector<std::pair<double, double>> measured_points(const LinkProfile& link, CollectiveKind kind,
                                                       int ranks) {
  std::vector<std::pair<double, double>> xy;
  if (!link.measured) return xy;
  const auto rows = link.measured->find(kind);
  if (rows == link.measured->end()) return xy;
  for (const MeasuredComm& m : rows->second)
    if (m.ranks == ranks) xy.emplace_back(m.bytes, m.time_s);
  std::stable_sort(xy.begin(), xy.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return xy;
}

}  // namespace

bool has_measured_rows(const LinkProfile& link, CollectiveKind kind, int ranks) {
  return !measured_points(link, kind, ranks).empty();
}

double collective_time_s(const LinkProfile& link, CollectiveKind kind, int ranks, double bytes) {
  if (kind == CollectiveKind::None || ranks <= 1 || bytes <= 0) return 0;
  // Log-log in bytes over the rows of this group size: below the first row its time (the latency
  // floor), above the last its time scaled by bytes (measured.hpp: interpolate_loglog).
  if (const auto xy = measured_points(link, kind, ranks); !xy.empty())
    return interpolate_loglog(xy, bytes).time_s;
  return link.latency_s + bus_factor(kind, ranks) * bytes / link.bus_bandwidth_Bps;
}

}  // namespace braid
