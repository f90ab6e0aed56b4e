// The step after the backward (cost_model.hpp): data-parallel collective times on the links the
// DP group spans, the gradient buckets of a chunk and its optimizer step. Megatron-Core sources:
// core/distributed/distributed_data_parallel.py (DistributedDataParallel.__init__: bucket size,
// no bucketing past the first pipeline stage), core/distributed/param_and_grad_buffer.py
// (buckets in reverse parameter order, one collective per bucket), core/optimizer/ (Adam over
// the shard, gradient norm). Formulas: docs/cost-model.md.
#include <algorithm>
#include <utility>
#include <vector>

#include "braid/cost_model.hpp"
#include "data_parallel.hpp"

namespace braid {

double dp_collective_time_s(const Study& study, const Profile& profile, CollectiveKind kind,
                            int group, int members_per_node, int nic_users, double bytes) {
  if (group <= 1 || bytes <= 0) return 0;
  const ClusterConfig& c = study.cluster;
  const LinkProfile& intra = profile.link(c.intra_node.name);
  if (members_per_node >= group) return collective_time_s(intra, kind, group, bytes);
  // Across nodes: a ring enters and leaves each node through the NICs, which every GPU of the
  // node syncing at the same time shares (`nic_users` of them: the rank layout's); a group with k
  // members on a node drives k of those GPUs' share.
  const LinkProfile& inter = profile.link(c.inter_node.name);
  const NetworkConfig& net = c.network;
  const double node_Bps = net.nics_per_node > 0
                              ? net.nics_per_node * net.nic_Bps * net.nic_efficiency
                              : inter.bus_bandwidth_Bps;
  const double share = node_Bps * std::max(1, members_per_node) / std::max(1, nic_users);
  LinkProfile shared = inter;
  shared.bus_bandwidth_Bps = std::min(intra.bus_bandwidth_Bps, share);
  shared.measured.reset();  // measured tables are for the TP groups' sizes, not this sharing
  shared.published = false;
  const double shared_s = collective_time_s(shared, kind, group, bytes);
  // Published rows were taken with every GPU of each node in the collective, as all TP ranks of a
  // stage sync at once: the curve by size of what the nodes' NICs deliver together. The slower of
  // it and the NIC share rules (a cluster with fewer or slower NICs than the table's is slower).
  if (!inter.published || !has_measured_rows(inter, kind, group)) return shared_s;
  return std::max(shared_s, collective_time_s(inter, kind, group, bytes));
}

namespace detail {

namespace {

constexpr double kFp8ParamBytes = 1;  // an FP8 parameter's data (the transpose is not gathered)

}  // namespace

std::vector<GradBucket> grad_buckets(const Study& study, const Profile& profile,
                                     const std::vector<std::pair<int, double>>& unit_params,
                                     bool bucketed, Group group,
                                     const std::vector<double>& fp8_params) {
  const TrainingConfig& tr = study.training;
  // Gradients are reduced over dp x cp (Megatron-Core's DistributedDataParallel uses
  // get_data_parallel_group(with_context_parallel=True)).
  const RankLayout layout = rank_layout(study);
  const int dp = layout.size(group);
  std::vector<GradBucket> out;
  if (dp <= 1) return out;
  // DistributedDataParallel.__init__: bucket_size = max(40M, 1M x dp) parameters by default,
  // infinite (one bucket per buffer) when overlap_grad_reduce is off or past the first stage.
  const double limit =
      !bucketed ? 0 : (tr.bucket_params > 0 ? tr.bucket_params : std::max(40e6, 1e6 * dp));
  const int k = layout.members_per_node(group), users = layout.nic_users(group);
  // With --fp8-param-gather the FP8 parameters live in a uint8 buffer and are all-gathered in 1
  // byte (param_and_grad_buffer.py: param_dtype torch.uint8 for FP8 parameters). Megatron gives
  // that buffer buckets of its own; braid charges each bucket its mix of both.
  double fp8 = 0;  // FP8 parameters of the bucket being filled
  auto close = [&](GradBucket b) {
    const double fp8_in = fp8;
    fp8 = 0;
    if (b.params <= 0) return;
    b.reduce = tr.distributed_optimizer ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
    b.reduce_bytes = b.params * tr.grad_bytes_per_param;
    b.reduce_s = dp_collective_time_s(study, profile, b.reduce, dp, k, users, b.reduce_bytes);
    if (tr.distributed_optimizer) {
      b.gather_bytes = (b.params - fp8_in) * tr.weight_bytes_per_param + fp8_in * kFp8ParamBytes;
      b.gather_s = dp_collective_time_s(study, profile, CollectiveKind::AllGather, dp, k, users,
                                        b.gather_bytes);
    }
    out.push_back(b);
  };
  GradBucket cur;
  // The buffer holds the parameters in reverse order (the backward's): walk the units from last
  // to first; a bucket closes once it holds `limit` parameters.
  for (auto it = unit_params.rbegin(); it != unit_params.rend(); ++it) {
    if (it->second <= 0) continue;
    const auto i = static_cast<std::size_t>(unit_params.rend() - it - 1);
    if (tr.fp8_param_gather && i < fp8_params.size()) fp8 += fp8_params[i];
    cur.params += it->second;
    cur.ready_unit = it->first;
    if (limit > 0 && cur.params >= limit) {
      close(cur);
      cur = GradBucket{};
    }
  }
  close(cur);
  return out;
}

double optimizer_bytes(const TrainingConfig& tr, double params, int dp) {
  const double shard = tr.distributed_optimizer ? params / dp : params;
  const double g = tr.grad_bytes_per_param, o = tr.optimizer_bytes_per_param,
               w = tr.weight_bytes_per_param;
  // Adam over the shard reads the gradient, reads and writes the fp32 state (master weights and
  // both moments); copying the master weights into the low-precision ones reads the fp32 master
  // (4 of the state's bytes) and writes the weights (Float16OptimizerWithFloat16Params and
  // DistributedOptimizer._copy_main_params_to_model_params); the gradient norm reads the shard's
  // gradients once more; zeroing writes the whole gradient buffer (every rank holds all of it).
  const double master = std::min(4.0, o);
  return shard * (g + 2 * o + master + w) + shard * g + params * g;
}

}  // namespace detail

}  // namespace braid
