// Per-unit costs of one microbatch on one GPU of a TP group: the four units of a transformer layer
// (LM or ViT, one shape description for both), the embedding, the LM head + loss and the ViT
// patch embedding and merger. Each phase gets its compute time, model and hardware FLOPs, TP
// collective and activation bytes. Private to src/cost; formulas in docs/cost-model.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "braid/cost_model.hpp"
#include "roofline.hpp"

namespace braid::detail {

// How a unit shares the TP group's work (DESIGN §2 table): a column-parallel unit gathers its input
// (sequence parallelism) or reduces its input gradient; a row-parallel unit reduces its output.
enum class TpSplit : std::uint8_t { Column, Row };

// One unit of a layer kind: what it is and how it splits over the TP group.
struct UnitRole {
  UnitKind kind;
  TpSplit tp;
};

// A layer kind as data: its units in forward order and where its second half begins (the halves
// braided blocks pair). layer_cost builds a layer from it and uniform_cost_model a symbolic one.
struct LayerKind {
  std::span<const UnitRole> units;
  int half;
};
// The dense transformer layer: PreAttn (column), Attn (row) | PreMLP (column), MLP (row).
const LayerKind& dense_layer();

// The shape of one transformer layer as one microbatch sees it.
struct LayerShape {
  double tokens = 0;  // tokens (or ViT patches) of a microbatch this GPU holds
  double seq = 0;     // length of one attention sequence (tokens attend within it)
  // Context parallelism: the GPU holds tokens / cp of every sequence and its attention meets the
  // other chunks' keys in a ring of cp steps (1: no context parallelism).
  double cp = 1;
  double hidden = 0;
  double heads = 0;
  double kv_heads = 0;
  double head_dim = 0;
  double ffn = 0;      // per gate for SwiGLU
  bool gated = true;   // SwiGLU (gate + up) or a plain GELU MLP
  bool causal = true;  // causal attention does half the score / value FLOPs
  // Sliding-window attention (ModelConfig::sliding_window): a query attends to at most `window`
  // keys, itself and the window - 1 before it (0: the whole causal prefix).
  double window = 0;
  bool qkv_bias = false;
  bool proj_bias = false;  // out-projection and FC2 biases (ViT)
  bool mlp_bias = false;   // FC1 bias (ViT)
  double norm_params = 1;  // parameters per norm per hidden unit: 1 RMSNorm, 2 LayerNorm
  bool flash = true;       // fused FlashAttention; false: Megatron's unfused core attention
  AttentionImpl attention_impl = AttentionImpl::Default;  // which fused kernel (flash only)
  bool dropout = false;  // attention-probability and two hidden dropouts (1-byte masks)
  bool rope = true;      // rotary position embedding on q and k (not with learned positions)
  // Multi-head latent attention (none: q, k, v from one QKV GEMM). With it head_dim is the
  // query/key width per head (qk_head_dim + qk_pos_emb_head_dim) and kv_heads = heads.
  std::optional<MlaConfig> mla;
};

// Keys one query attends to, averaged over the `seq` positions of a causal sequence: seq / 2 for
// full causal attention (the model-FLOP convention of half the s x s scores), and with a window w
// < seq the exact count, position p seeing min(p + 1, w) keys: (w (w + 1) / 2 + (seq - w) w) / seq.
double causal_keys_per_query(double seq, double window);

// How the TP group runs the units.
// Transformer Engine's default configuration of the pipelined reduce-scatter ("pipeline", the
// method of proj_fprop and fc2_fprop) and the bulk overlaps ("bulk", qkv_wgrad and fc1_wgrad):
// the pipeline's GEMM in 4 splits, the communication kernels of both on 16 SMs
// (pytorch/module/base.py initialize_ub, get_default_config).
inline constexpr int kTeRsSplits = 4;
inline constexpr int kTeUbCommSms = 16;
// The pieces a column-parallel layer's dgrad runs in beside the sequence-parallel re-gather of its
// saved input (add_sp_regather): a device of the lowering, which lets the op after the pieces wait
// for the gather; the gather ends hidden once it takes at most (pieces - 1) / pieces of the dgrad.
inline constexpr int kRegatherPieces = 4;

struct TpSetup {
  int tp = 1;
  bool sp = false;  // sequence parallelism
  double dtype_bytes = 2;
  const LinkProfile* link = nullptr;  // the link class the TP group spans
  // The context-parallel ring the attention's KV exchanges run over (cp 1: none).
  int cp = 1;
  CpCommType cp_comm = CpCommType::P2P;  // the ring, the exposed all-gather or all-to-alls
  const LinkProfile* cp_link = nullptr;
  // a2a+p2p: the all-to-all group's size A (cp / A ranks form the ring, over cp_link) and the
  // link it spans; 1 and unused for the other types.
  int cp_a2a = 1;
  const LinkProfile* cp_a2a_link = nullptr;
  // Selective recomputation (Megatron: core attention): B runs the attention forward again.
  bool recompute_attention = false;
  // Full recomputation: each layer keeps only its input; its forward runs again before its
  // backward (UnitCost::recompute).
  bool recompute_full = false;
  // Bytes per weight the W units move into the fp32 main-gradient buffer each microbatch: read +
  // write of it with gradient-accumulation fusion (the GEMM accumulates into it), plus writing and
  // re-reading a bf16 gradient without. 0 = not modelled (theory checks).
  double main_grad_bytes = 0;
  // With gradient-accumulation fusion the accumulation is the GEMM's epilogue (no kernel of its
  // own); without, an add kernel re-reads the bf16 gradient.
  bool main_grad_fused = true;
  // Transformer Engine's TP-communication overlap (training.tp_comm_overlap, SP on): the
  // all-gathers before the layer's column GEMMs' forward and its row GEMMs' dgrad run as a ring
  // of tp chunks beside the GEMM (add_tp_ring_gather).
  bool tp_comm_overlap = false;
  // With it, the row GEMMs' forward reduce-scatter runs pipelined inside the GEMM, and the column
  // GEMMs' backward reduce-scatter in bulk beside the wgrad, on TE's num_sm = 16 SMs: the GEMM
  // runs this many times slower on the rest (sm_share_slowdown of the profile's SMs;
  // add_tp_pipelined_rs, bulk_wgrad_scatters).
  double ub_sm_slowdown = 1;
  // The linear layers' GEMM format: with an FP8 recipe their GEMMs run at the FP8 peak and
  // Transformer Engine's cast kernels run around them (docs/cost-model.md, "FP8").
  Precision precision = Precision::Bf16;
  Source source = Source::SpecDerived;
};

// A dense layer (dense_layer()) of `shape`.
LayerCost layer_cost(const LayerShape& shape, const TpSetup& tp, const Roofline& roof, int layer,
                     bool vision);
// How an MoE layer's experts are laid out and what its dispatch costs besides the bytes
// (moe_units.cpp; docs/moe.md, "The MoE layer's units").
struct MoeSetup {
  double experts = 0, top_k = 0;
  double expert_ffn = 0;  // one routed expert's width, per gate, before the etp split
  int ep = 1, etp = 1;
  const LinkProfile* ep_link = nullptr;   // the link the EP group spans (and its counts' gather)
  const LinkProfile* etp_link = nullptr;  // the link the expert-TP group spans
  // The device-to-host copy of the split sizes and the host's wait for it before the dispatch
  // all-to-all can be issued (kMoeHostSyncS in build.cpp): on the critical path, charged to the
  // counts' all-gather.
  double host_sync_s = 0;
  // The EP all-to-all across nodes (docs/moe.md, "The all-to-all across nodes"): the EP group's
  // members on one node (ep when the group stays inside it), the links inside and across nodes,
  // the dispatcher and, for DeepEP, the expected nodes other than its own that a token's copies
  // reach (ep_remote_nodes).
  int ep_per_node = 1;
  const LinkProfile* ep_intra_link = nullptr;
  const LinkProfile* ep_inter_link = nullptr;
  MoeDispatcher dispatcher = MoeDispatcher::AllToAll;
  bool fp8_dispatch = false;  // MoeConfig::fp8_dispatch
  double remote_nodes = 0;
  // DeepEP: the expected GPUs of the EP group that a token's top_k copies reach
  // (ep_target_gpus); it sends one copy to each.
  double target_gpus = 0;
  double shared_ffn = 0;  // the shared experts' width together (count x width); 0: none
  // TrainingConfig::moe_shared_expert_overlap: the shared experts' units run beside the EP
  // all-to-alls (UnitCost::beside_all_to_all).
  bool shared_overlap = false;
  // Routing (moe_load; docs/moe.md, "Load imbalance and capacity"), relative to balanced: the
  // tokens each local expert of the busiest EP rank takes after capacity (El entries; empty:
  // all 1), that rank's tokens (their mean), and the mean over all experts of the routed tokens
  // kept (model FLOPs) and of the tokens computed, padding included (hardware FLOPs).
  std::vector<double> busiest_loads;
  double busiest = 1, kept = 1, computed = 1;
};
// The expected nodes other than its own that one token's top_k copies reach under balanced
// routing, its EP group's experts spread evenly over `nodes` nodes (docs/moe.md, "The all-to-all
// across nodes"). `limit`: node-limited routing, the token's experts chosen within `limit` of
// the nodes (0: not limited). Each of the M = limit (or nodes) nodes the token may use holds
// E / nodes of the C = M E / nodes experts its k distinct choices are drawn from: it is missed
// with probability C(C - E / nodes, k) / C(C, k), so the token reaches
// D = M (1 - C(C - E / nodes, k) / C(C, k)) nodes, every node alike, its own among them with
// probability D / nodes: (nodes - 1) D / nodes others.
double ep_remote_nodes(double experts, double top_k, int nodes, int limit);
// The expected GPUs of an EP group of `ep` ranks on `nodes` nodes that one token's top_k copies
// reach under balanced routing (node-limited to `limit` nodes, 0: not limited), E / ep experts on
// each: the M (limit or nodes) x ep / nodes GPUs the token may use, each missed with
// probability C(C - E / ep, k) / C(C, k), C = M E / nodes. DeepEP sends a token once per GPU
// (its dispatch buffer has a row per token and destination rank), top_k times when each expert
// has a GPU of its own.
double ep_target_gpus(double experts, double top_k, int ep, int nodes, int limit);
// The time of one EP all-to-all of `bytes` per rank (nccl-tests' size: the busiest rank's whole
// buffer) on the links `moe` names, and the source of the part that sets it: inside a node the
// all-to-all of ep ranks; across nodes its NVLink and network parts at once, the slower setting
// the time (docs/moe.md, "The all-to-all across nodes"). `remote_bytes`: under DeepEP the bytes
// that cross the network (one copy per remote node); the all-to-all dispatcher's follow from
// `bytes`.
std::pair<double, Source> ep_all_to_all_s(const MoeSetup& moe, double bytes, double remote_bytes);
// What moe_load makes of a routing: the fields above and the report's figures.
struct MoeLoad {
  std::vector<double> busiest_loads;
  double busiest = 1, kept = 1, computed = 1;
  int busiest_rank = 0;
  double dropped_fraction = 0, padded_fraction = 0;  // of the x k routed choices
};
// The load of each EP rank's experts: `loads` per expert relative to balanced (moe_expert_loads,
// experts in order on the ep ranks), each of the `ep` ranks routing `choices` = x k top-k choices
// per microbatch; with a capacity factor, each rank's router keeps at most
// capacity = ceil(choices / E x factor) per expert and, padding, fills every expert to it
// (megatron/core/transformer/moe/moe_utils.py get_capacity, apply_router_token_dropping: at most
// every token, x, when the capacity is above it).
MoeLoad moe_load(const std::vector<double>& loads, int ep, double tokens, double top_k,
                 std::optional<double> capacity_factor, bool pad_to_capacity);
// An MoE layer of `shape` (DESIGN §4b): PreAttn, Attn as the dense layer's | Router, [PreMLP,
// MLP: the shared experts,] Dispatch, Experts, Combine (with MoeSetup::shared_overlap: Router,
// Dispatch, PreMLP, Experts, MLP, Combine, the shared units beside the all-to-alls), the busiest EP
// rank's under the study's routing (MoeSetup::busiest_loads).
LayerCost moe_layer_cost(const LayerShape& shape, const TpSetup& tp, const MoeSetup& moe,
                         const Roofline& roof, int layer);
// An MoE layer's parameters on one GPU: those of the dense groups (attention, norms, the router;
// reduced over dp x cp) and the experts' (El experts split by etp; reduced over edp).
double moe_dense_params_per_gpu(const LayerShape& shape, const MoeSetup& moe, int tp);
double moe_expert_params_per_gpu(const LayerShape& shape, const MoeSetup& moe);

// Parameters of one layer held by one GPU of the TP group (weights sharded, norms replicated).
double layer_params_per_gpu(const LayerShape& shape, int tp);
// The weights of its four linear layers (QKV, out-projection, FC1, FC2) per GPU: those an FP8
// recipe casts (no biases, no norms).
double linear_weights_per_gpu(const LayerShape& shape, int tp);

// Transformer Engine's cast of `elements` bf16 values, in `tensors` tensors, to FP8 with the
// transposed copy the other GEMM of the pair reads (Hopper's FP8 GEMMs take only the "TN"
// layout): read 2 bytes, write 1 + 1 in one fused cast_transpose kernel per tensor (TE's
// common/transpose/; called by the quantizers of pytorch/module/linear.py _Linear.forward and
// backward). The current-scaling recipe first finds each tensor's amax in a kernel of its own
// (reading it once more) before the cast can scale (Float8CurrentScalingQuantizer); delayed
// scaling takes the scale from the amax history and records the amax inside the cast; block
// scaling computes each block's scale inside the cast. 0 for bf16.
double fp8_cast_s(const Roofline& roof, Precision precision, double elements, int tensors);

// Bytes per element of a linear layer's input as Transformer Engine saves it for the weight
// gradient (docs/cost-model.md, "FP8"): `dtype_bytes` in bf16; with an FP8 recipe the FP8 copy
// its forward GEMM read, kept in one layout only (pytorch/module/linear.py _Linear.forward and
// layernorm_linear.py _LayerNormLinear.forward drop the other with update_usage before
// save_for_backward): 1 byte, and the per-tensor scale of the delayed and current recipes
// (negligible); the block recipes add their block scales: a 4-byte scale per 1 x 128 block for
// Float8BlockScaling (x_block_scaling_dim 1), an E8M0 byte per 32 values for MXFP8.
double saved_input_bytes(Precision precision, double dtype_bytes);

// Bytes per element of a tensor Transformer Engine all-gathers over the TP group under sequence
// parallelism in `layouts` layouts (1: the row-wise data a forward GEMM reads; 2: the row-wise
// and the column-wise data of an output gradient, for dgrad and wgrad): `dtype_bytes` in bf16.
// The delayed and current recipes gather the row-wise FP8 data alone, 1 byte, whatever the
// layouts, and transpose after the gather (pytorch/distributed.py _all_gather_fp8: the transposed
// FP8 data cannot be gathered); the block recipes gather each layout with its block scales
// (_start_all_gather_fp8_blockwise, _all_gather_mxfp8): `layouts` x saved_input_bytes.
double fp8_gather_bytes(Precision precision, double dtype_bytes, int layouts);

// A collective of `group` (of `ranks` GPUs over `link`) before or after a phase's compute; none
// for a group of one. Its source: the link's measured or published rows where they cover it.
// Where a collective's time on `link` comes from: its measured or published rows, else the spec.
Source collective_source(const LinkProfile& link, CollectiveKind kind, int ranks);
void add_group_collective(PhaseCost& p, Group group, int ranks, const LinkProfile& link,
                          CollectiveKind kind, CollectivePosition position, double bytes,
                          bool from_compute = false);

// The TP collectives of a column- or row-parallel linear unit (DESIGN §2) on the bf16 activation
// of `bytes`: all-reduces without SP; with SP the all-gather (of the FP8 operand under an FP8
// recipe, with current scaling's amax all-reduce) and the reduce-scatter. None at tp 1.
void tp_collectives(TpSplit split, UnitCost& u, const TpSetup& tp, double bytes);
// The sequence-parallel re-gather of a column unit's saved input (`bytes`: its bf16 activation)
// beside a backward that is its dgrad GEMM alone, on NCCL.
void sp_regather_dgrad(UnitCost& u, const TpSetup& tp, double bytes);

// Token embedding (vocab-parallel): `vocab_per_gpu` rows of `hidden`; GPT models add learned
// position embeddings and apply dropout to the sum.
UnitCost embedding_cost(double tokens, double hidden, const TpSetup& tp, const Roofline& roof,
                        bool learned_positions = false, bool dropout = false);
// Final norm + LM head (vocab-parallel, column) + cross-entropy loss. `wgrad_deferred`:
// Megatron's defer_embedding_wgrad_compute (its backward gathers nothing under SP).
UnitCost head_cost(double tokens, double hidden, double vocab_per_gpu, const TpSetup& tp,
                   const Roofline& roof, bool wgrad_deferred = false);
// ViT patch embedding (Conv3d as a GEMM, replicated on the TP group).
UnitCost vision_patch_cost(double patches, double patch_inputs, double vision_hidden,
                           const TpSetup& tp, const Roofline& roof);
// ViT merger: LayerNorm, merge x merge patches -> Linear -> GELU -> Linear to the LM width
// (column- then row-parallel).
UnitCost vision_merger_cost(double patches, double merge_area, double vision_hidden, double hidden,
                            const TpSetup& tp, const Roofline& roof);

// The GEMMs and attention kernels of one LM layer as the spec model times them, each with the
// unit and phase it runs in (`braid info`'s per-layer kernel list; build.cpp).
struct LayerKernel {
  UnitKind unit = UnitKind::PreAttn;
  Phase phase = Phase::F;
  KernelCall call;
};
std::vector<LayerKernel> lm_layer_kernels(const Study& study, const Profile& profile);

}  // namespace braid::detail
