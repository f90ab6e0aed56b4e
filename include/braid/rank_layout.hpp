// RankLayout: how the GPUs of a job form its process groups — tensor (tp), context (cp), data
// (dp) and pipeline (pp) parallelism for the dense layers, and for expert layers expert tensor
// (etp), expert (ep) and expert data (edp) parallelism over the same ranks and the same pipeline
// ("parallel folding"). Ranks are numbered as Megatron-Core's parallel_state numbers them
// (initialize_model_parallel with order "tp-cp-ep-dp-pp", RankGenerator and
// generate_masked_orthogonal_rank_groups): tp fastest, then cp, then dp, pp slowest; the expert
// layers use etp, then ep, then edp, then the same pp. Nodes hold consecutive ranks. It answers,
// for every group: its ranks, whether it spans nodes, how many of its members share a node, and
// how many GPUs of a node drive the NICs at once for it. Plain data with no costs: the cost model,
// the explorer and the report ask it; nothing else derives a group size (dp included).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace braid {

// A process group. Tp, Cp, Dp, Pp: the dense layers' dimensions; DpCp: dp x cp, the group the
// gradients are reduced and the distributed optimizer shards over (Megatron-Core's
// get_data_parallel_group(with_context_parallel=True)); Etp, Ep, Edp: the expert layers';
// TpDpCp: tp x dp x cp, the group FP8's amax reduction runs over (Megatron-Core's
// get_amax_reduction_group(with_context_parallel=True)).
enum class Group : std::uint8_t { Tp, Cp, Dp, Pp, DpCp, Etp, Ep, Edp, TpDpCp };
// "tp", "cp", "dp", "pp", "dp-cp", "etp", "ep", "edp", "tp-dp-cp".
const char* name(Group g);
std::optional<Group> parse_group(std::string_view text);

struct RankLayout {
  int tp = 1, cp = 1, dp = 1, pp = 1;  // dense layers: tp x cp x dp x pp = world
  int etp = 1, ep = 1, edp = 1;        // expert layers: etp x ep x edp x pp = world
  int gpus_per_node = 1;

  int world() const { return tp * cp * dp * pp; }
  int size(Group g) const;
  // GPUs of one pipeline stage: tp x cp x dp consecutive ranks.
  int stage_size() const { return tp * cp * dp; }
  int first_rank_of_stage(int pp_rank) const { return pp_rank * stage_size(); }
  int node_of(int rank) const { return rank / gpus_per_node; }
  int stage_of(int rank) const { return rank / stage_size(); }

  // The ranks of the group of kind `g` that holds global rank `rank`, ascending.
  std::vector<int> ranks(Group g, int rank) const;
  // Of the group of kind `g` that holds rank 0 (every group of a kind is laid out alike when the
  // node size is a multiple of the stage's or the other way round, as in every supported job):
  bool spans_nodes(Group g) const;
  // ... its members on the node of its first member;
  int members_per_node(Group g) const;
  // ... and the GPUs of that node whose own group of kind `g` spans nodes and runs its collective
  // at the same time (the node's GPUs of the same pipeline stage): they share the node's NICs.
  // 0 when the group stays inside the node.
  int nic_users(Group g) const;
};

// The expert tensor-parallel size: etp as given, or with etp 0 (not given) the dense tp, as
// Megatron-Core's expert_tensor_parallel_size defaults. The one place of that rule.
int expert_tp(int tp, int etp);

// The layout of `world` GPUs in nodes of `gpus_per_node` with the given dense sizes (dp is what
// remains: world / (tp x cp x pp)) and expert sizes (edp likewise: world / (etp x ep x pp); etp 0:
// the dense tp, as Megatron-Core's expert_tensor_parallel_size defaults). Requires the sizes to
// divide world (the config's validation checks it and names the option).
RankLayout make_rank_layout(int world, int gpus_per_node, int tp, int cp, int pp, int ep = 1,
                            int etp = 0);

}  // namespace braid
