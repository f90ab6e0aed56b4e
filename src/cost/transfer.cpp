// Transfer times between pipeline ranks and between device and host: latency + bytes / bandwidth
// of the link class the two ranks share (NVLink inside a node, the inter-node fabric otherwise).
// Uniform (theory) cost models move data in no time.
#include <cstddef>

#include "braid/cost_model.hpp"

namespace braid {

double CostModel::p2p_time_s(int from_rank, int to_rank, double bytes) const {
  if (uniform || bytes <= 0) return 0;
  auto node = [&](int rank) {
    return rank >= 0 && static_cast<std::size_t>(rank) < node_of_rank.size() ? node_of_rank[rank]
                                                                             : 0;
  };
  const double bandwidth = node(from_rank) == node(to_rank) ? intra_p2p_Bps : inter_p2p_Bps;
  if (p2p_scatter_gather && tp > 1) {
    // Megatron's scatter/gather (p2p_communication._communicate with
    // scatter_gather_tensors_in_pipeline): each TP rank sends its 1/tp slice, the receiver
    // all-gathers the slices over NVLink before the tensor is used.
    const double slice = bytes / tp;
    const double gather =
        gather_Bps > 0 ? gather_latency_s + (tp - 1.0) / tp * bytes / gather_Bps : 0;
    return p2p_latency_s + (bandwidth > 0 ? slice / bandwidth : 0) + gather;
  }
  return p2p_latency_s + (bandwidth > 0 ? bytes / bandwidth : 0);
}

double CostModel::d2h_time_s(double bytes) const {
  if (uniform || bytes <= 0 || d2h_Bps <= 0) return 0;
  return bytes / d2h_Bps;
}

double CostModel::h2d_time_s(double bytes) const {
  if (uniform || bytes <= 0 || h2d_Bps <= 0) return 0;
  return bytes / h2d_Bps;
}

}  // namespace braid
