// Collective time on one link class (cost_model.hpp: collective_time_s).
#include <algorithm>
#include <vector>

#include "braid/cost_model.hpp"
#include "braid/measured.hpp"

namespace braid {

namespace {

// The link's own rows of `kind` (measured or published); null when there are none.
const std::vector<MeasuredComm>* own_rows(const LinkProfile& link, CollectiveKind kind) {
  if (!link.measured) return nullptr;
  const auto rows = link.measured->find(kind);
  if (rows == link.measured->end() || rows->second.empty()) return nullptr;
  return &rows->second;
}

// The kind whose rows and model time `kind` on this link. An all-to-all without rows of its own
// is timed as the all-gather of the same nccl-tests size: nccl-tests gives both the bus factor
// (n-1)/n (doc/PERFORMANCE.md for all-gather; src/alltoall.cu, AlltoAllGetBw, for alltoall, its
// size each rank's whole send buffer), so equal bus bandwidths mean equal times. That alltoall's
// bus bandwidth equals all-gather's is an assumption (no published H100/A100 alltoall table was
// found; docs/cost-model.md, "All-to-all"); measured or published all_to_all rows replace it.
CollectiveKind timed_as(const LinkProfile& link, CollectiveKind kind) {
  if (kind == CollectiveKind::AllToAll && own_rows(link, kind) == nullptr)
    return CollectiveKind::AllGather;
  return kind;
}

const std::vector<MeasuredComm>* rows_of(const LinkProfile& link, CollectiveKind kind) {
  return own_rows(link, timed_as(link, kind));
}

}  // namespace

bool has_measured_rows(const LinkProfile& link, CollectiveKind kind, int ranks) {
  return ranks > 1 && rows_of(link, kind) != nullptr;
}

double collective_time_s(const LinkProfile& link, CollectiveKind kind, int ranks, double bytes) {
  if (kind == CollectiveKind::None || ranks <= 1 || bytes <= 0) return 0;
  if (const auto* rows = rows_of(link, kind)) {
    // braid-profile sweeps from a few bytes up, so below its first row the time is that row's (the
    // latency floor). A published table may start at tens of MiB: below its first row the time
    // follows that row's bus bandwidth down to the link's latency, not the row's time.
    const auto r = comm_rows_time(*rows, timed_as(link, kind), ranks, bytes, !link.published);
    return link.published ? std::max(link.latency_s, r->time_s) : r->time_s;
  }
  return link.latency_s + bus_factor(kind, ranks) * bytes / link.bus_bandwidth_Bps;
}

}  // namespace braid
