// The collective kinds' names and bus factors (profile.hpp), written once for every module.
#include "braid/profile.hpp"

namespace braid {

namespace {

constexpr CollectiveKind kMeasurable[] = {CollectiveKind::AllReduce, CollectiveKind::AllGather,
                                          CollectiveKind::ReduceScatter, CollectiveKind::P2P,
                                          CollectiveKind::AllToAll};

}  // namespace

const char* name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::None:
      return "none";
    case CollectiveKind::AllReduce:
      return "all_reduce";
    case CollectiveKind::AllGather:
      return "all_gather";
    case CollectiveKind::ReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::P2P:
      return "p2p";
    case CollectiveKind::AllToAll:
      return "all_to_all";
  }
  return "?";
}

std::optional<CollectiveKind> parse_collective_kind(const std::string& s) {
  for (CollectiveKind k : kMeasurable)
    if (s == name(k)) return k;
  return std::nullopt;
}

std::string collective_kind_names() {
  std::string out;
  for (CollectiveKind k : kMeasurable) {
    if (!out.empty()) out += ", ";
    out += name(k);
  }
  return out;
}

double bus_factor(CollectiveKind kind, int ranks) {
  const double n = ranks;
  switch (kind) {
    case CollectiveKind::AllReduce:
      return n > 0 ? 2.0 * (n - 1) / n : 0;
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter:
    // nccl-tests' alltoall (src/alltoall.cu, AlltoAllGetBw): each rank keeps 1/n of its buffer
    // and sends (n-1)/n of it.
    case CollectiveKind::AllToAll:
      return n > 0 ? (n - 1) / n : 0;
    case CollectiveKind::P2P:
      return 1.0;
    case CollectiveKind::None:
      break;
  }
  return 0;
}

}  // namespace braid
