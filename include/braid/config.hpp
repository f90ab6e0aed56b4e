// Study configuration: the model, the cluster, the parallel layout and the training settings that
// one simulation is about, loaded from YAML (configs/models, configs/clusters, configs/studies)
// and overridden from the command line. Plain data, validated on load: every struct here is
// consistent once a loader has returned it. It knows nothing of costs or schedules.
#pragma once

#include <compare>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "braid/rank_layout.hpp"

namespace braid {

// The MLP's activation: SwiGLU is gated (fc1 is two ffn-wide projections); GELU and squared ReLU
// (Nemotron-4's) are not, and cost the same (one memory-bound elementwise kernel each way).
enum class MlpActivation { SwiGLU, GeLU, SquaredReLU };
// The norm of each layer and the final one: RMSNorm (a scale per hidden unit) or LayerNorm (scale
// and bias).
enum class Normalization { RMSNorm, LayerNorm };
enum class PositionEmbedding { Rotary, Learned };
enum class Recompute { None, Selective, Full };
// Where a multimodal model's ViT runs: on virtual stage(s) of its own (no LM layers with it), or
// folded into the first LM virtual stage.
enum class VisionPlacement { Separate, FirstStage };
// How layers are assigned to virtual stages when no explicit list is given: uniformly (LM layers
// evenly, the remainder on earlier stages; a separate ViT alone on virtual stage 0), or by cost
// (the contiguous split that minimises the slowest virtual stage's forward + backward time).
enum class StageBalance { Uniform, Cost };
// Which fused-attention kernel runs the core attention: the profile's default for the GPU
// (Transformer Engine's choice: cuDNN on Hopper, FlashAttention-2 on Ampere), FlashAttention-2,
// FlashAttention-3, cuDNN's fused attention, or Megatron's unfused core attention (batched GEMMs
// and softmax kernels; the same as flash_attention: false). The profile's attention rows give
// each fused kernel's rate by sequence length, head size and mask (profile.hpp).
enum class AttentionImpl { Default, Flash2, Flash3, Cudnn, Unfused };
// How the ranks of a context-parallel group exchange keys and values (Megatron's --cp-comm-type,
// Transformer Engine's attention/dot_product_attention/context_parallel.py): a ring of KV chunks
// overlapped with the attention steps (P2P, AttnFuncWithCPAndKVP2P), or an all-gather of KV
// before the attention and a reduce-scatter of dKV after its backward, exposed
// (AllGather, AttnFuncWithCPAndKVAllGather), or Ulysses-style all-to-alls that trade the
// sequence split for a head split around the attention, exposed (A2A, AttnFuncWithCPAndQKVOA2A).
// Or the hierarchy of both (A2AP2P, AttnFuncWithCPAndKVP2P given cp_group = [a2a group, p2p
// group]): all-to-alls inside sub-groups of consecutive cp ranks, a KV ring between them
// (ParallelConfig::hierarchical_cp gives the two sizes).
enum class CpCommType { P2P, A2A, AllGather, A2AP2P };
// The number format the linear layers' GEMMs run in (docs/cost-model.md, "FP8"): bf16, or one of
// Transformer Engine's FP8 recipes (transformer_engine/common/recipe/__init__.py): DelayedScaling
// (a per-tensor scale from an amax history, Megatron's default --fp8-recipe delayed),
// Float8CurrentScaling (a per-tensor scale from the tensor itself, --fp8-recipe tensorwise),
// Float8BlockScaling (per 128-block scales, --fp8-recipe blockwise) and MXFP8BlockScaling (per
// 32-element E8M0 scales, Blackwell only, --fp8-recipe mxfp8).
enum class Precision { Bf16, Fp8Delayed, Fp8Current, Fp8Blockwise, Mxfp8 };
// How a Mixture-of-Experts router turns its logits into expert scores (Megatron's
// --moe-router-score-function, megatron/core/transformer/moe/router.py TopKRouter): softmax
// (Mixtral, Qwen3-MoE) or sigmoid (DeepSeek-V3).
enum class RouterScore { Softmax, Sigmoid };
// How the tokens of an MoE layer reach their experts' GPUs (docs/moe.md, "The all-to-all across
// nodes"): Megatron-Core's all-to-all dispatcher (--moe-token-dispatcher-type alltoall,
// token_dispatcher.py MoEAlltoAllTokenDispatcher: NCCL all-to-all, one copy per routed expert) or
// DeepEP's fused kernels (--moe-token-dispatcher-type flex with the deepep backend,
// MoEFlexTokenDispatcher and fused_a2a.py: one copy per target node over the network, then
// NVLink to the GPUs of that node) or Megatron-Core's all-gather dispatcher
// (--moe-token-dispatcher-type allgather, MoEAllGatherTokenDispatcher: every token all-gathered
// over the expert TP x EP group, the combine a reduce-scatter over it; docs/moe.md).
enum class MoeDispatcher { AllToAll, DeepEp, AllGather };

// The YAML and command-line values of each enum above, in enum order: name() writes them,
// parse_*() reads them back where a command line or another format gives them (std::nullopt for
// any other text); a model file reads them through the names table.
const std::vector<std::string>& recompute_names();  // none, selective, full
const char* name(Recompute r);
std::optional<Recompute> parse_recompute(std::string_view text);
const std::vector<std::string>& vision_placement_names();  // separate, first-stage
const char* name(VisionPlacement p);
std::optional<VisionPlacement> parse_vision_placement(std::string_view text);
const std::vector<std::string>& stage_balance_names();  // uniform, cost
const char* name(StageBalance b);
std::optional<StageBalance> parse_stage_balance(std::string_view text);
const std::vector<std::string>& attention_impl_names();  // default, flash2, flash3, cudnn, unfused
const char* name(AttentionImpl a);
std::optional<AttentionImpl> parse_attention_impl(std::string_view text);
const std::vector<std::string>& activation_names();  // swiglu, gelu, squared-relu
const char* name(MlpActivation a);
const std::vector<std::string>& normalization_names();  // rmsnorm, layernorm
const char* name(Normalization n);
const std::vector<std::string>& cp_comm_type_names();  // p2p, a2a, allgather, a2a+p2p
const char* name(CpCommType c);
std::optional<CpCommType> parse_cp_comm_type(std::string_view text);
// bf16, fp8-delayed, fp8-current, fp8-blockwise, mxfp8
const std::vector<std::string>& precision_names();
const char* name(Precision p);
std::optional<Precision> parse_precision(std::string_view text);
const std::vector<std::string>& router_score_names();  // softmax, sigmoid
const char* name(RouterScore r);
std::optional<RouterScore> parse_router_score(std::string_view text);
const std::vector<std::string>& moe_dispatcher_names();  // alltoall, deepep, allgather
const char* name(MoeDispatcher d);
std::optional<MoeDispatcher> parse_moe_dispatcher(std::string_view text);

// The norm and linear biases of a model that does not name them, by its activation's family:
// SwiGLU models (Llama, Qwen2, Mistral) use RMSNorm and no biases; GELU and squared-ReLU ones
// Megatron's GPT defaults, LayerNorm and biases on every linear layer.
Normalization default_normalization(MlpActivation a);
bool default_linear_bias(MlpActivation a);

// The ViT encoder of a multimodal model (Qwen2-VL style).
struct VisionConfig {
  int depth = 0;   // transformer layers
  int hidden = 0;  // embed_dim
  int heads = 0;
  double mlp_ratio = 4.0;  // fc1 width = mlp_ratio * hidden, GELU, not gated
  int patch = 14;          // spatial patch size (pixels)
  int temporal_patch = 2;
  int in_channels = 3;
  int spatial_merge = 2;      // merge x merge patches become one LM token
  int tokens_per_sample = 0;  // LM tokens the image contributes per sample (after merging)
};

// The Mixture-of-Experts part of a model (model YAML `moe:`; docs/moe.md): what its MoE layers
// are made of and which layers they are, as Megatron-Core's MoE arguments say it
// (megatron/training/arguments.py, _add_moe_args). Plain data: the cost model turns it into the
// MoE layer's units (router, dispatch and combine all-to-all, experts; docs/moe.md).
struct MoeConfig {
  int experts = 0;            // routed experts per MoE layer (--num-experts)
  int top_k = 0;              // routed experts per token (--moe-router-topk)
  int expert_ffn = 0;         // one routed expert's FFN width, per gate (--moe-ffn-hidden-size)
  int shared_experts = 0;     // experts every token passes through (0: none)
  int shared_expert_ffn = 0;  // one shared expert's FFN width (Megatron's
                              // --moe-shared-expert-intermediate-size is count x this)
  // Which layers are MoE (0-based layer l): l >= first_k_dense and l % layer_freq == 0, the rule
  // of Megatron's integer --moe-layer-freq and of DeepSeek-V3's first_k_dense_replace.
  int layer_freq = 1;
  int first_k_dense = 0;
  RouterScore router_score = RouterScore::Softmax;
  // Group-limited routing (--moe-router-num-groups, --moe-router-group-topk; DeepSeek-V3's
  // node-limited routing): experts in router_groups groups, a token's top_k chosen within its
  // router_group_top_k best groups. 0 and 0: not limited.
  int router_groups = 0;
  int router_group_top_k = 0;
  // Tokens an expert takes, as a multiple of its balanced share (--moe-expert-capacity-factor);
  // none: dropless, Megatron's default.
  std::optional<double> capacity_factor;
  // With a capacity factor, every expert's input padded to its capacity
  // (--moe-pad-expert-input-to-capacity; moe_utils.py apply_router_token_dropping).
  bool pad_to_capacity = false;
  // The token dispatcher (MoeDispatcher): alltoall, Megatron-Core's all-to-all one, deepep or
  // allgather, Megatron-Core's all-gather one.
  MoeDispatcher dispatcher = MoeDispatcher::AllToAll;
  // DeepEP's FP8 dispatch (dispatcher deepep only): its dispatch kernel sends each token in FP8
  // with an FP32 scale per 128 values, in the forward's dispatch and in the backward of the
  // combine (the output gradient on its way to the experts); the combine kernel stays bf16
  // (DeepSeek-V3 report section 3.3.3, "Low-Precision Communication"; DeepEP's Buffer.dispatch
  // takes the FP8 data and its scales).
  bool fp8_dispatch = false;
  auto operator<=>(const MoeConfig&) const = default;  // NOLINT(modernize-use-nullptr)
};
// Multi-head latent attention (model YAML `mla:`; docs/moe.md), as Megatron-Core's
// MLASelfAttention builds it (megatron/core/transformer/multi_latent_attention.py): queries
// through a low-rank q_lora_rank bottleneck (0: none, a plain column-parallel q projection, as
// DeepSeek-V2-Lite), keys and values through a shared kv_lora_rank latent; each head's query and
// key are qk_head_dim without and qk_pos_emb_head_dim with rotary embedding, its value
// v_head_dim. With `mla` the model's head_dim is not used by attention.
struct MlaConfig {
  int q_lora_rank = 0;          // --q-lora-rank (0: no query compression)
  int kv_lora_rank = 0;         // --kv-lora-rank
  int qk_head_dim = 0;          // --qk-head-dim, the part without rotary embedding
  int qk_pos_emb_head_dim = 0;  // --qk-pos-emb-head-dim, the rotary part (shared by the heads in k)
  int v_head_dim = 0;           // --v-head-dim
  auto operator<=>(const MlaConfig&) const = default;  // NOLINT(modernize-use-nullptr)
};

// Whether 0-based layer `layer` of a model with `moe` is an MoE layer; the count of them.
bool is_moe_layer(const MoeConfig& moe, int layer);
int moe_layer_count(const MoeConfig& moe, int layers);

struct ModelConfig {
  std::string name;
  std::string file;  // where it was loaded from
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int ffn = 0;  // intermediate size (per gate for SwiGLU)
  int vocab = 0;
  bool tied_embeddings = false;
  bool qkv_bias = false;
  MlpActivation activation = MlpActivation::SwiGLU;
  // The norm and whether every linear layer (QKV, out-projection, both MLP projections) carries a
  // bias. A model file that leaves them out gets its activation's family (default_normalization,
  // default_linear_bias): Llama/Qwen2 for SwiGLU, GPT for GELU and squared ReLU.
  Normalization norm = Normalization::RMSNorm;
  bool linear_bias = false;
  PositionEmbedding position = PositionEmbedding::Rotary;
  int max_positions = 0;  // learned position embeddings only
  // Megatron GPT (Korthikanti et al.): dropout after attention softmax and after both residual
  // branches, saved as 1-byte masks. Qwen2 trains without dropout.
  bool dropout = false;
  // Fused FlashAttention (no s x s score matrix is stored) or Megatron's unfused core attention
  // (QK^T and P.V as batched GEMMs; softmax output, and with dropout its mask and output, saved).
  bool flash_attention = true;
  // The fused kernel when flash_attention is on (model field attention_impl; `unfused` is
  // flash_attention: false). Default: the profile's attention.default_impl.
  AttentionImpl attention_impl = AttentionImpl::Default;
  // Sliding-window attention: a windowed layer's query at position p attends to the
  // min(p + 1, sliding_window) keys ending at itself (HF config `sliding_window`; Megatron-Core's
  // window_size (sliding_window - 1, 0), as Megatron-Bridge's gpt-oss provider sets it). 0: every
  // layer full causal attention. Which layers: Megatron-Core's integer window_attn_skip_freq
  // (transformer/utils.py is_layer_window_attention): 0-based layer l is windowed unless
  // (l + 1) % full_attention_every == 0; 0 windows every layer.
  int sliding_window = 0;
  int full_attention_every = 0;
  std::optional<VisionConfig> vision;
  // Mixture-of-Experts layers (none: a dense model). `ffn` stays the dense layers' width.
  std::optional<MoeConfig> moe;
  // Multi-head latent attention in place of the q/k/v projections (none: standard attention).
  std::optional<MlaConfig> mla;
};

// A link class of the cluster (NVLink inside a node, InfiniBand between nodes, PCIe to the host).
struct LinkConfig {
  std::string name;  // link class name; the profile's collective model is keyed by it
};

// The network between nodes as the data-parallel sync sees it: NICs per node and their line rate.
// nics_per_node 0 = not given: the profile's inter-node bus bandwidth stands for the whole node.
struct NetworkConfig {
  int nics_per_node = 0;
  double nic_Bps = 0;           // line rate of one NIC, one direction, bytes/s
  double nic_efficiency = 0.9;  // achieved share of line rate in large collectives
};

// Whether 0-based LM layer `layer` runs sliding-window attention (ModelConfig::sliding_window).
bool is_window_layer(const ModelConfig& m, int layer);

struct ClusterConfig {
  std::string name;
  std::string file;
  int nodes = 0;
  int gpus_per_node = 0;
  std::string profile;  // profile name (profiles/<name>.yaml) or path
  LinkConfig intra_node;
  LinkConfig inter_node;
  LinkConfig host;
  NetworkConfig network;
  int gpus() const { return nodes * gpus_per_node; }
};

struct ParallelConfig {
  int tp = 1;
  int pp = 1;
  int vpp = 2;  // chunks per rank for loop-placement schedules (1f1b-i)
  bool sequence_parallel = false;
  // Context parallelism: each sequence split over cp ranks, attention as a ring of KV exchanges
  // (Megatron-Core's cp group with Transformer Engine's p2p context parallelism).
  int cp = 1;
  CpCommType cp_comm_type = CpCommType::P2P;  // Megatron's default
  // a2a+p2p: the sizes {A, P} of its two levels, A x P = cp (Megatron-Core's
  // --hierarchical-context-parallel-sizes; parallel_state.py create_hierarchical_groups): the
  // all-to-all group of A consecutive cp ranks and the ring of P ranks, one from each such group.
  // Empty: not given (every other type).
  std::vector<int> hierarchical_cp{};
  int dp = 1;  // derived by the rank layout (rank_layout(study)): the GPUs left per tp x cp x pp
  // Expert parallelism of the MoE layers (Megatron-Core's parallel folding): each expert lives on
  // one of ep ranks (--expert-model-parallel-size) and is split over etp
  // (--expert-tensor-parallel-size; 0: the dense tp, Megatron's default). edp is derived by the
  // rank layout: world / (etp x ep x pp).
  int ep = 1;
  int etp = 0;
  auto operator<=>(const ParallelConfig&) const = default;  // NOLINT(modernize-use-nullptr)
};

// How the MoE layers' routers spread the tokens' top-k choices over the experts
// (training.moe_routing, --moe-routing; docs/moe.md, "Load imbalance and capacity"). Every
// rank routes alike; experts sit in order on the EP ranks (rank 0 holds experts 0 .. El - 1).
enum class MoeRoutingKind { Balanced, Skew, Histogram, Multinomial };
struct MoeRouting {
  MoeRoutingKind kind = MoeRoutingKind::Balanced;
  double skew = 0;              // skew:S: expert e's share proportional to (e + 1)^-S
  std::string file;             // histogram:FILE, as given
  std::vector<double> weights;  // histogram: the file's per-expert counts or weights
  std::uint64_t seed = 0;       // multinomial:SEED
  auto operator<=>(const MoeRouting&) const = default;  // NOLINT(modernize-use-nullptr)
};
// The one name/parse pair: "balanced", "skew:S", "histogram:FILE", "multinomial:SEED". parse
// reads a histogram's file (relative to `relative_to` when given) and throws InputError(where,
// field, ...) for a bad value; the expert count is checked by the study's validation.
std::string name(const MoeRouting& r);
MoeRouting parse_moe_routing(const std::string& text, const std::string& where,
                             const std::string& field,
                             const std::filesystem::path& relative_to = {});
// Each expert's share of the top-k choices relative to the balanced 1 / experts (they sum to
// experts), before capacity. A token picks k distinct experts, so no share exceeds 1 / top_k
// (a load of experts / top_k): the excess goes to the others in proportion to their weights.
// `choices`: the draws of multinomial (tokens x top_k of one rank's microbatch).
std::vector<double> moe_expert_loads(const MoeRouting& r, int experts, int top_k, double choices);

struct TrainingConfig {
  int seq = 0;                            // tokens per sample
  int micro_batch_size = 1;               // samples per microbatch
  int microbatches = 0;                   // microbatches per iteration (per data-parallel replica)
  int dtype_bytes = 2;                    // bf16
  double optimizer_bytes_per_param = 12;  // Adam: fp32 master + two moments
  double grad_bytes_per_param = 4;        // fp32 main grads (Megatron)
  double weight_bytes_per_param = 2;      // bf16 weights
  bool distributed_optimizer = false;     // optimizer state divided by dp
  // Data-parallel gradient sync (Megatron-Core DistributedDataParallelConfig; defaults are its):
  // overlap the bucketed reduce with the backward, overlap the distributed optimizer's parameter
  // all-gather with the next forward, bucket size in parameters (0 = max(40M, 1M x dp)).
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  double bucket_params = 0;
  // Megatron's --gradient-accumulation-fusion (default on): each weight-gradient GEMM adds into
  // the fp32 main-gradient buffer, reading and writing it every microbatch.
  bool gradient_accumulation_fusion = true;
  // Megatron's --tp-comm-overlap (default off): Transformer Engine's userbuffers split each
  // sequence-parallel all-gather / reduce-scatter into chunks pipelined with the GEMM beside it
  // (docs/cost-model.md, "TP-communication overlap"). Needs sequence parallelism.
  bool tp_comm_overlap = false;
  // Megatron-Core's --moe-shared-expert-overlap (default off): an MoE layer's shared experts run
  // on a stream of their own, fc1 while the dispatch all-to-all is in flight and fc2 while the
  // combine all-to-all is (docs/moe.md, "Shared-expert overlap"). Needs shared experts.
  bool moe_shared_expert_overlap = false;
  // Megatron's scatter/gather of activations between pipeline stages (no SP): send 1/t of the
  // tensor over the inter-node link and all-gather it over NVLink on the receiver.
  bool p2p_scatter_gather = true;
  // Megatron's batch_p2p_comm (default on): a rank's sends after an instruction and the receives
  // of its next one go out as one batch_isend_irecv that it waits for; a send completes only once
  // the receiver has posted its receive. Off: the sender waits for its sends alone.
  bool p2p_batched = true;
  // Megatron's overlap_p2p_comm (--no-overlap-p2p-communication turns it off; on by default, and
  // only the interleaved schedule uses it): the steady state's sends and receives go out right
  // after each forward and backward instead of once per forward + backward pair, and each receive
  // is posted one instruction earlier (docs/simulator.md, "P2P"). Off: Megatron before it (2022).
  bool overlap_p2p_comm = true;
  // Megatron's defer_embedding_wgrad_compute (default off; needs pp > 1): the last pipeline stage
  // keeps the LM head's input and output gradient of its first wgrad_deferral_limit microbatches
  // (0: every one) and runs their weight-gradient GEMMs after its last backward, in the pipeline
  // flush (docs/simulator.md, "Deferred LM-head weight gradients").
  bool defer_embedding_wgrad_compute = false;
  int wgrad_deferral_limit = 0;
  Recompute recompute = Recompute::None;
  // Activation offloading for schedules other than stp-offload: share of the microbatches whose
  // chunk-0 activations are copied to host after their forward and back before their backward.
  // 0 = off (default).
  double offload = 0;
  // The linear layers' GEMM format (training.precision); bf16 by default.
  Precision precision = Precision::Bf16;
  // Megatron's --fp8-param-gather (default off; needs an FP8 recipe and the distributed
  // optimizer): the linear weights are FP8 parameters, all-gathered in 1 byte and kept without a
  // bf16 copy (docs/cost-model.md, "FP8").
  bool fp8_param_gather = false;
  // The MoE routers' distribution of tokens over experts (balanced by default).
  MoeRouting moe_routing;
  auto operator<=>(const TrainingConfig&) const = default;  // NOLINT(modernize-use-nullptr)
};

// How the layers of the model are laid out on virtual stages (docs/multimodal.md).
struct LayoutConfig {
  VisionPlacement vision_placement = VisionPlacement::Separate;
  StageBalance balance = StageBalance::Uniform;
  // Explicit layers per virtual stage (empty: the balance rule). With a ViT the list counts the
  // ViT's layers first, then the LM's: entries sum to vision depth + layers, each >= 1.
  std::vector<int> layers_per_stage;
};

struct Study {
  std::string name;
  std::string file;
  ModelConfig model;
  // The cluster, with `nodes` from the study's optional `nodes:` key (a study using part of a
  // cluster), else the cluster file's, overridden by --nodes.
  ClusterConfig cluster;
  ParallelConfig parallel;
  TrainingConfig training;
  LayoutConfig layout;
  std::vector<std::string> schedules;  // default schedule list for `compare`
};

// The process groups of a validated study's job (its GPUs, tp, cp, pp, ep, etp): the one place dp
// and edp are derived.
RankLayout rank_layout(const Study& study);

// Command-line overrides; an unset field keeps the study's value.
struct StudyOverrides {
  // Every member starts empty ({}), so that a set of overrides can be written with designated
  // initializers naming only what it sets.
  std::optional<std::string> model{}, cluster{};
  std::optional<int> tp{}, pp{}, vpp{}, seq{}, mbs{}, microbatches{}, nodes{}, cp{}, ep{}, etp{};
  std::optional<bool> sequence_parallel{};
  std::optional<Recompute> recompute{};
  std::optional<CpCommType> cp_comm_type{};
  std::optional<std::vector<int>> hierarchical_cp{};
  std::optional<Precision> precision{};
  std::optional<VisionPlacement> vision_placement{};
  std::optional<StageBalance> balance{};
  std::optional<std::vector<int>> layers_per_stage{};
  std::optional<double> offload{};
  std::optional<bool> distributed_optimizer{}, overlap_grad_reduce{}, overlap_param_gather{};
  std::optional<bool> p2p_scatter_gather{}, p2p_batched{}, overlap_p2p_comm{};
  std::optional<bool> gradient_accumulation_fusion{}, tp_comm_overlap{}, fp8_param_gather{};
  std::optional<bool> defer_embedding_wgrad_compute{}, moe_shared_expert_overlap{};
  std::optional<int> wgrad_deferral_limit{};
  std::optional<std::string> moe_routing{};  // --moe-routing, parsed by the study's load
  // --moe-dispatcher and --moe-fp8-dispatch: the MoE model's MoeConfig::dispatcher and
  // MoeConfig::fp8_dispatch.
  std::optional<MoeDispatcher> moe_dispatcher{};
  std::optional<bool> moe_fp8_dispatch{};
  // A model given whole (Megatron-LM arguments' sizes) instead of by name; replaces `model`.
  std::optional<ModelConfig> model_config{};
  // Megatron's --global-batch-size: microbatches per replica = global batch / (mbs x dp), dp
  // from the cluster's GPUs and tp x cp x pp; replaces `microbatches`.
  std::optional<int> global_batch{};
  // The explorer's base study, whose sizes are placeholders its configurations replace: the
  // rules tying a training switch to the layout (TP overlap needs SP, deferred head gradients a
  // pipeline) wait for each configuration's validate_study.
  bool sizes_from_explorer = false;
};

// A Megatron-LM launch (megatron_args.cpp; docs/megatron.md, "Megatron-LM arguments"): the flags
// of a pretrain_gpt.py command line as settings of a study. `model` when the sizes are given
// (--num-layers, --hidden-size, --num-attention-heads); `not_modelled` lists each flag braid
// reads but cannot model (expert parallelism, ...) or does not know, as given.
struct MegatronLaunch {
  StudyOverrides overrides;
  std::vector<std::string> not_modelled;
};
// `text`: the flags (--megatron-args), or a launch script (--megatron-args-file: continuation
// lines, comments, variables and bash arrays read as bash would; the flags are the words after
// the command's .py file). `where` names the source in errors. Throws InputError for a flag
// value that is not a number where one is needed, a model missing a required size, or a
// vocabulary size that cannot be known.
MegatronLaunch parse_megatron_args(const std::string& text, const std::string& where);
// Later overrides win: `top`'s set fields replace `base`'s.
void merge_overrides(StudyOverrides& base, const StudyOverrides& top);

// Where named configs live: $BRAID_HOME if set, else the source tree braid was built from.
std::filesystem::path data_root();
// Resolves a config name ("qwen2-7b") or a path to a YAML file under data_root()/configs/<kind>.
std::filesystem::path resolve_config(const std::string& kind, const std::string& name_or_path);

ModelConfig load_model(const std::filesystem::path& file);
ClusterConfig load_cluster(const std::filesystem::path& file);

// A model translated from a Hugging Face `config.json` (hf_import.cpp; the field mapping is in
// docs/configuration.md, "Hugging Face configs"): the model, the class it was read as, and one
// line per feature of it that braid reads but does not model (a sliding window, qk-norm, ...).
struct HfModel {
  ModelConfig model;
  std::string architecture;  // "LlamaForCausalLM"
  std::vector<std::string> notes;
};
// A model reference of this form names a Hugging Face config: `hf:PATH` (so does a path ending
// in .json).
inline constexpr std::string_view kHfModelPrefix = "hf:";
// Reads `path`: a config.json, or a folder holding one. Throws InputError(file, field, ...) for
// a missing or malformed file, a missing or invalid field, an unknown architecture (the known
// ones listed) and a Mixture-of-Experts class whose experts it does not read (the field named);
// Mixtral and Qwen3-MoE come with their experts (ModelConfig::moe).
HfModel import_hf_model(const std::filesystem::path& path);
// The imported model as a model YAML file that load_model reads back to the same model, with the
// source and the notes as comments.
std::string model_yaml(const HfModel& imported);
// A model named by `ref` ("qwen2-7b", a .yaml path, `hf:PATH` or a .json path), as --model
// (where "--model") or a study's `model:` (where = the study file, relative_to its folder) name it.
ModelConfig load_model_ref(const std::string& ref, const std::string& where,
                           const std::filesystem::path& relative_to = {});
// Loads a study and applies overrides, then validates the whole (divisibility, sizes). Throws
// InputError naming the file and field.
Study load_study(const std::filesystem::path& file, const StudyOverrides& overrides = {});
// Re-validates a study after it was edited in code (the explorer's cross product).
void validate_study(Study& study);

// Upper bounds of a study's sizes (docs/limits.md), far above any real job: a larger value is a
// typo, and would overflow the simulator's indices or fill memory before the size guard could
// estimate it. pp x vpp stays within the DAG's 16-bit virtual stage index.
inline constexpr int kMaxPp = 1024;
inline constexpr int kMaxVpp = 16;
inline constexpr int kMaxCp = 1024;
inline constexpr int kMaxMicrobatches = 1'000'000;
inline constexpr int kMaxSeq = 1 << 20;  // 1,048,576 tokens
inline constexpr int kMaxMbs = 4096;
inline constexpr int kMaxNodes = 16384;
// Throws InputError(where, field, ...) naming the bound when value > max (field "" for an option:
// "--pp: must be at most ...").
void check_at_most(int value, int max, const std::string& where, const std::string& field);

}  // namespace braid
