// build_cost_model: a Study on a Profile -> per virtual stage, per unit and phase costs
// (cost_model.hpp). Formulas: docs/cost-model.md.
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "braid/cost_model.hpp"
#include "braid/error.hpp"
#include "data_parallel.hpp"
#include "layout.hpp"
#include "shapes.hpp"

namespace braid {

namespace {

// What a phase keeps: a buffer it frees itself (the all-gather dispatcher's gathered tokens) is
// no saved activation.
double sum_alloc(const UnitCost& u, Phase p) { return u[p].alloc_bytes - u[p].free_bytes; }

// The TP group's setup every unit's cost reads.
detail::TpSetup tp_setup(const Study& study, const Profile& profile) {
  const ParallelConfig& par = study.parallel;
  const TrainingConfig& tr = study.training;
  detail::TpSetup tp;
  tp.tp = par.tp;
  tp.sp = par.sequence_parallel;
  tp.dtype_bytes = tr.dtype_bytes;
  // Every number starts spec-derived; a phase or collective that a measured table answered is
  // tagged Measured (timed(), collective_source()).
  tp.source = Source::SpecDerived;
  tp.recompute_attention = tr.recompute == Recompute::Selective;
  tp.recompute_full = tr.recompute == Recompute::Full;
  tp.main_grad_bytes =
      2 * tr.grad_bytes_per_param + (tr.gradient_accumulation_fusion ? 0 : 2 * tr.dtype_bytes);
  tp.main_grad_fused = tr.gradient_accumulation_fusion;
  tp.tp_comm_overlap = tr.tp_comm_overlap && tp.sp && tp.tp > 1;
  // TE's pipelined reduce-scatter and bulk overlaps hold num_sm = 16 SMs (pytorch/module/base.py
  // initialize_ub, get_default_config) and runs the GEMM on the others (comm_gemm_overlap.cpp,
  // CommOverlapCore::initialize: _math_sms = sm_count - num_comm_sm). A profile without its SM
  // count is taken as an H100's 132.
  tp.ub_sm_slowdown = sm_share_slowdown(profile.sms > detail::kTeUbCommSms ? profile.sms : 132,
                                        detail::kTeUbCommSms);
  tp.precision = tr.precision;
  // Each group's link: inside a node when the rank layout puts the group there (cp ranks follow
  // the tp ranks, Megatron-Core's order), across the NICs otherwise.
  const RankLayout layout = rank_layout(study);
  const auto link_of = [&](Group g) {
    return &profile.link(layout.spans_nodes(g) ? study.cluster.inter_node.name
                                               : study.cluster.intra_node.name);
  };
  tp.link = link_of(Group::Tp);
  tp.cp = par.cp;
  tp.cp_comm = par.cp_comm_type;
  tp.cp_link = link_of(Group::Cp);
  if (par.cp > 1 && par.cp_comm_type == CpCommType::A2AP2P) {
    // Megatron-Core's create_hierarchical_groups (parallel_state.py) cuts the cp group's ranks
    // in order: the a2a groups are A consecutive members, the ring takes one member of each
    // (stride A). Each spans nodes when its first and last members do.
    const std::vector<int> cp_ranks = layout.ranks(Group::Cp, 0);
    const int a2a = par.hierarchical_cp.at(0);
    const auto link_over = [&](int first, int last) {
      const bool across = layout.node_of(cp_ranks[first]) != layout.node_of(cp_ranks[last]);
      return &profile.link(across ? study.cluster.inter_node.name : study.cluster.intra_node.name);
    };
    tp.cp_a2a = a2a;
    tp.cp_a2a_link = link_over(0, a2a - 1);
    tp.cp_link = link_over(0, par.cp - a2a);
  }
  return tp;
}

double layer_time_s(const LayerCost& l) {
  double t = 0;
  for (const UnitCost& u : l.units) t += detail::unit_time_s(u);
  return t;
}

// The units of a study, computed once: the layer costs are identical for every layer of the LM
// (and of the ViT) and are relabelled per layer; with the parameters each holds and the inputs of
// the layout rule.
struct StudyUnits {
  double samples = 0, tokens = 0;
  double vocab_per_gpu = 0;
  double layer_params = 0;
  double static_per_param = 0;  // bytes of weights, gradients and optimizer state per parameter
  double norm_params = 0;       // of the final norm
  LayerCost lm_layer;
  // The same layer with sliding-window attention (ModelConfig::sliding_window; is_window_layer
  // picks the layers), and its MoE twin; unset (no units) without a window.
  LayerCost lm_window_layer;
  UnitCost embedding, head;
  detail::LayoutCosts layout;
  // The ViT (empty without one).
  LayerCost vision_layer, folded_vision_layer;
  UnitCost patch, merger;
  double vision_layer_params = 0, patch_params = 0, merger_params = 0, vision_output_bytes = 0;
  double lm_output_bytes = 0;
  // FP8: the linear weights of one LM (ViT) layer per GPU, of which Transformer Engine keeps an
  // FP8 copy and casts once per step (0 for bf16).
  double lm_fp8_weights = 0, vision_fp8_weights = 0;
  // A Mixture-of-Experts model's MoE layers (moe_layers false for a dense model): the layer, the
  // parameters of its dense groups and of its experts on one GPU, and the static bytes per expert
  // parameter (the distributed optimizer shards the experts' state over edp).
  bool moe_layers = false;
  LayerCost moe_layer, moe_window_layer;
  double moe_dense_params = 0, moe_expert_params = 0, expert_static_per_param = 0;
  double moe_fp8_weights = 0;
  std::optional<MoeLoadReport> moe_load;  // set when the routing or a capacity changes the layer
};

// The device-to-host copy of the dispatcher's split sizes and the host's wait for it
// (MoEAlltoAllTokenDispatcher._maybe_dtoh_and_synchronize, at "before_ep_alltoall"): the GPU
// idles from the counts' arrival until the host has read them and launched the all-to-all. A few
// microseconds on a bare-metal Linux host (the device-to-host round trip measured in
// jingyaogong/minimind#837, 116 us under WSL2); braid takes 10 us, one round trip and the
// launch of the all-to-all. A named figure to be replaced by a measurement.
constexpr double kMoeHostSyncS = 10e-6;

// Transformer Engine's FP8 copy of a weight: the FP8 values and their transpose (Hopper's FP8
// GEMMs take only the "TN" layout, so dgrad reads the transposed copy; pytorch/module/linear.py
// _Linear.forward quantizes the weight with rowwise and columnwise usage while gradients are
// on), 1 byte each, kept across the microbatches of a step (the weight workspace cached when
// is_first_microbatch is given, as Megatron-Core's TE layers do).
constexpr double kFp8WeightBytes = 2;

// The step's cast of `weights` bf16 weights to that copy (detail::fp8_cast_s: four weight
// tensors per layer). It runs in the first microbatch's forward; the cost model has no
// first-microbatch term, so it is charged to the step with the optimizer (same stream, once per
// step).
double fp8_weight_cast_s(const detail::Roofline& roof, Precision precision, double weights,
                         int layers) {
  return detail::fp8_cast_s(roof, precision, weights, 4 * layers);
}

void add_vision_units(StudyUnits& u, const Study& study, const detail::TpSetup& tp,
                      const detail::Roofline& roof) {
  const ModelConfig& m = study.model;
  const ParallelConfig& par = study.parallel;
  const VisionConfig& vis = *m.vision;
  const detail::LayerShape vs = detail::vision_layer_shape(vis, u.samples);
  u.vision_layer = detail::layer_cost(vs, tp, roof, 0, true);
  // Folded into stage 0's prologue, the ViT's units have no per-layer rerun: full
  // recomputation applies to chunk layers only (the LM's, and a separate ViT's).
  detail::TpSetup folded_tp = tp;
  folded_tp.recompute_full = false;
  u.folded_vision_layer = detail::layer_cost(vs, folded_tp, roof, 0, true);
  u.patch =
      detail::vision_patch_cost(vs.tokens, detail::vision_patch_inputs(vis), vis.hidden, tp, roof);
  u.merger = detail::vision_merger_cost(vs.tokens,
                                        static_cast<double>(vis.spatial_merge) * vis.spatial_merge,
                                        vis.hidden, m.hidden, tp, roof);
  u.layout.vision_layers = vis.depth;
  u.layout.vision_layer_s =
      layer_time_s(u.layout.first_stage ? u.folded_vision_layer : u.vision_layer);
  u.layout.patch_s = detail::unit_time_s(u.patch);
  u.layout.merger_s = detail::unit_time_s(u.merger);
  u.vision_layer_params = detail::layer_params_per_gpu(detail::vision_layer_shape(vis, 1), par.tp);
  if (study.training.precision != Precision::Bf16)
    u.vision_fp8_weights = detail::linear_weights_per_gpu(vs, par.tp);
  u.patch_params = detail::vision_patch_inputs(vis) * vis.hidden;
  u.merger_params = detail::vision_params_per_gpu(vis, m.hidden, par.tp) - u.patch_params -
                    vis.depth * u.vision_layer_params;
  // Between ViT stages: the patches' hidden states (sharded under SP like the LM's).
  u.vision_output_bytes =
      vs.tokens * vis.hidden * study.training.dtype_bytes / (par.sequence_parallel ? par.tp : 1.0);
}

// The MoE layers of a Mixture-of-Experts study (DESIGN §4b): the layer, its parameters on one
// GPU, its layout cost. Throws InputError for what is not modelled yet.
void add_moe_units(StudyUnits& u, const Study& study, const Profile& profile,
                   const detail::TpSetup& tp, const detail::Roofline& roof,
                   const detail::LayerShape& lm) {
  const ModelConfig& m = study.model;
  const MoeConfig& e = *m.moe;
  const ParallelConfig& par = study.parallel;
  if (par.tp > 1 && !par.sequence_parallel)
    throw InputError(study.file, "parallel.sequence_parallel",
                     "an MoE model with tp > 1 needs sequence parallelism (Megatron-Core: "
                     "\"sequence parallelism must be used\", model_parallel_config.py); turn it "
                     "on (--sp on) or use tp 1");
  const RankLayout layout = rank_layout(study);
  const auto link_of = [&](Group g) {
    return &profile.link(layout.spans_nodes(g) ? study.cluster.inter_node.name
                                               : study.cluster.intra_node.name);
  };
  detail::MoeSetup moe;
  moe.experts = e.experts;
  moe.top_k = e.top_k;
  moe.expert_ffn = e.expert_ffn;
  moe.ep = layout.ep;
  moe.etp = layout.etp;
  moe.ep_link = link_of(Group::Ep);
  moe.etp_link = link_of(Group::Etp);
  moe.host_sync_s = moe.ep * moe.etp > 1 ? kMoeHostSyncS : 0;
  // The all-to-all across nodes (docs/moe.md, "The all-to-all across nodes"): the EP group's
  // ranks on one node and, for DeepEP, the remote nodes a token reaches; node-limited routing
  // caps them when its groups are the group's nodes (the experts lie in order on the EP ranks,
  // so group i's experts are node i's).
  moe.ep_per_node = layout.members_per_node(Group::Ep);
  moe.ep_intra_link = &profile.link(study.cluster.intra_node.name);
  moe.ep_inter_link = link_of(Group::Ep);  // the intra-node link when the group stays inside
  moe.dispatcher = e.dispatcher;
  moe.fp8_dispatch = e.fp8_dispatch;
  const int ep_nodes = moe.ep / std::max(1, moe.ep_per_node);
  const int node_limit = e.router_groups == ep_nodes ? e.router_group_top_k : 0;
  moe.remote_nodes = detail::ep_remote_nodes(e.experts, e.top_k, ep_nodes, node_limit);
  moe.target_gpus = detail::ep_target_gpus(e.experts, e.top_k, moe.ep, ep_nodes, node_limit);
  moe.shared_ffn = static_cast<double>(e.shared_experts) * e.shared_expert_ffn;
  moe.shared_overlap = study.training.moe_shared_expert_overlap && moe.shared_ffn > 0;
  // The routing and capacity (docs/moe.md, "Load imbalance and capacity"): x tokens of a
  // microbatch enter each rank's router (sharded by tp under SP), x k choices.
  const MoeRouting& routing = study.training.moe_routing;
  const double x = tp.sp ? lm.tokens / tp.tp : lm.tokens;
  const detail::MoeLoad load =
      detail::moe_load(moe_expert_loads(routing, e.experts, e.top_k, x * e.top_k), moe.ep, x,
                       e.top_k, e.capacity_factor, e.pad_to_capacity);
  moe.busiest_loads = load.busiest_loads;
  moe.busiest = load.busiest;
  moe.kept = load.kept;
  moe.computed = load.computed;
  if (routing.kind != MoeRoutingKind::Balanced || e.capacity_factor)
    u.moe_load = MoeLoadReport{name(routing), load.busiest, load.busiest_rank,
                               load.dropped_fraction, load.padded_fraction};
  u.moe_layers = true;
  u.moe_layer = detail::moe_layer_cost(lm, tp, moe, roof, 0);
  if (m.sliding_window > 0) {
    detail::LayerShape windowed = lm;
    windowed.window = m.sliding_window;
    u.moe_window_layer = detail::moe_layer_cost(windowed, tp, moe, roof, 0);
  }
  u.moe_dense_params = detail::moe_dense_params_per_gpu(lm, moe, par.tp);
  u.moe_expert_params = detail::moe_expert_params_per_gpu(lm, moe);
  const TrainingConfig& tr = study.training;
  u.expert_static_per_param =
      tr.weight_bytes_per_param + tr.grad_bytes_per_param +
      tr.optimizer_bytes_per_param / (tr.distributed_optimizer ? layout.edp : 1);
  if (tr.precision != Precision::Bf16) {
    detail::LayerShape dense_part = lm;  // attention and the shared experts
    dense_part.ffn = moe.shared_ffn;
    u.moe_fp8_weights = detail::linear_weights_per_gpu(dense_part, par.tp) + u.moe_expert_params;
  }
  // The layout rule balances by one LM layer's time: the MoE layer's when every layer is one.
  if (moe_layer_count(e, m.layers) == m.layers) u.layout.lm_layer_s = layer_time_s(u.moe_layer);
}

StudyUnits study_units(const Study& study, const Profile& profile, const detail::TpSetup& tp,
                       const detail::Roofline& roof) {
  const ModelConfig& m = study.model;
  const ParallelConfig& par = study.parallel;
  const TrainingConfig& tr = study.training;
  StudyUnits u;
  u.samples = tr.micro_batch_size;
  u.tokens = u.samples * tr.seq;
  const double gpu_tokens = u.tokens / par.cp;  // context parallelism splits every sequence
  const double t = par.tp;
  // Megatron pads the vocabulary to a multiple of 128 x tp (make-vocab-size-divisible-by 128).
  const double vocab_multiple = 128.0 * par.tp;
  const double padded_vocab = std::ceil(m.vocab / vocab_multiple) * vocab_multiple;
  u.vocab_per_gpu = padded_vocab / t;
  const detail::LayerShape lm = detail::lm_layer_shape(m, u.samples, tr.seq, par.cp);
  u.layer_params = detail::layer_params_per_gpu(lm, par.tp);
  u.norm_params = lm.norm_params;
  // The distributed optimizer shards over dp x cp (as the gradient reduce).
  const double optimizer_share =
      tr.distributed_optimizer ? rank_layout(study).size(Group::DpCp) : 1;
  u.static_per_param = tr.weight_bytes_per_param + tr.grad_bytes_per_param +
                       tr.optimizer_bytes_per_param / optimizer_share;

  u.lm_layer = detail::layer_cost(lm, tp, roof, 0, false);
  if (m.sliding_window > 0) {
    // Transformer Engine runs a window under context parallelism only with the a2a and
    // all_gather types (attention/dot_product_attention/context_parallel.py,
    // attn_forward_func_with_cp); braid models the a2a type's, whose kernel sees the whole
    // sequence.
    if (par.cp > 1 && par.cp_comm_type != CpCommType::A2A)
      throw InputError(study.file, "parallel.cp_comm_type",
                       "sliding-window attention (model.sliding_window) with cp > 1 is modelled "
                       "for cp_comm_type a2a only; use a2a or cp 1");
    detail::LayerShape windowed = lm;
    windowed.window = m.sliding_window;
    u.lm_window_layer = detail::layer_cost(windowed, tp, roof, 0, false);
  }
  if (tr.precision != Precision::Bf16)
    u.lm_fp8_weights = detail::linear_weights_per_gpu(lm, par.tp);
  u.embedding = detail::embedding_cost(gpu_tokens, m.hidden, tp, roof,
                                       m.position == PositionEmbedding::Learned, m.dropout);
  u.head = detail::head_cost(gpu_tokens, m.hidden, u.vocab_per_gpu, tp, roof,
                             tr.defer_embedding_wgrad_compute);
  u.head.w_in_flush = tr.defer_embedding_wgrad_compute;
  u.layout.lm_layers = m.layers;
  u.layout.first_stage = study.layout.vision_placement == VisionPlacement::FirstStage;
  u.layout.lm_layer_s = layer_time_s(u.lm_layer);
  u.layout.embedding_s = detail::unit_time_s(u.embedding);
  u.layout.head_s = detail::unit_time_s(u.head);
  if (m.vision) add_vision_units(u, study, tp, roof);
  if (m.moe) add_moe_units(u, study, profile, tp, roof, lm);
  u.lm_output_bytes = gpu_tokens * m.hidden * tr.dtype_bytes / (par.sequence_parallel ? t : 1);
  return u;
}

// One virtual stage's units in order, with the parameters each holds (for the gradient buckets:
// a layer's parameters sit on its PreAttn unit, whose W is the layer's last in the backward) and
// the static memory by part.
class ChunkFiller {
 public:
  ChunkFiller(ChunkCost& chunk, double static_per_param, double expert_static_per_param)
      : chunk_(chunk),
        static_per_param_(static_per_param),
        expert_static_per_param_(expert_static_per_param) {}

  void prologue(const UnitCost& u, double params, double& part) {
    chunk_.prologue.push_back(u);
    hold(params, part, 1);
  }
  // `fp8`: of the layer's parameters, the linear weights an FP8 recipe casts (0 in bf16).
  void layer(const LayerCost& l, double params, double fp8) {
    chunk_.add_layer(l);
    hold(params, chunk_.parts.layers_bytes, static_cast<int>(l.units.size()), fp8);
  }
  // An MoE layer: its dense groups' parameters on its first unit, its experts' on the Experts
  // unit (whose W completes their gradients; they are reduced over edp in buckets of their own).
  // `fp8`: the FP8-cast weights among `params` (the experts' are gathered with their own).
  void moe_layer(const LayerCost& l, double params, double expert_params, double fp8) {
    int experts_unit = 0;
    while (l.units[static_cast<std::size_t>(experts_unit)].kind != UnitKind::Experts)
      ++experts_unit;
    expert_params_.emplace_back(unit_index_ + experts_unit, expert_params);
    expert_total_ += expert_params;
    chunk_.params += expert_params;
    chunk_.parts.layers_bytes += expert_params * expert_static_per_param_;
    layer(l, params, fp8);
  }
  void folded_layer(const LayerCost& l, double params, double fp8) {
    for (const UnitCost& u : l.units) chunk_.prologue.push_back(u);
    hold(params, chunk_.parts.layers_bytes, static_cast<int>(l.units.size()), fp8);
  }
  void epilogue(const UnitCost& u, double params, double& part) {
    chunk_.epilogue.push_back(u);
    hold(params, part, 1);
  }
  // More parameters on the last unit added (the LM head's weight on the head unit).
  void add_to_last(double params, double& part) {
    unit_params_.back().second += params;
    chunk_.params += params;
    part += params * static_per_param_;
  }
  const std::vector<std::pair<int, double>>& unit_params() const { return unit_params_; }
  const std::vector<double>& fp8_params() const { return fp8_params_; }
  const std::vector<std::pair<int, double>>& expert_params() const { return expert_params_; }
  double expert_total() const { return expert_total_; }

 private:
  void hold(double params, double& part, int units, double fp8 = 0) {
    unit_params_.emplace_back(unit_index_, params);
    fp8_params_.push_back(fp8);
    chunk_.params += params;
    part += params * static_per_param_;
    unit_index_ += units;
  }

  ChunkCost& chunk_;
  double static_per_param_;
  double expert_static_per_param_;
  std::vector<std::pair<int, double>> unit_params_;
  std::vector<double> fp8_params_;  // per unit_params_ entry
  std::vector<std::pair<int, double>> expert_params_;
  double expert_total_ = 0;
  int unit_index_ = 0;
};

// The units of virtual stage v: layers [next, next + its count) of the combined sequence (ViT
// layers 0..D-1, then the LM's); advances `next` past them.
ChunkCost chunk_cost(const Study& study, const Profile& profile, const detail::Roofline& roof,
                     const StudyUnits& su, int v, int virtual_stages, int layers, int& next) {
  const ModelConfig& m = study.model;
  const TrainingConfig& tr = study.training;
  const int D = su.layout.vision_layers;
  const bool folded = D > 0 && su.layout.first_stage;
  ChunkCost chunk;
  chunk.virtual_stage = v;
  ChunkFiller fill(chunk, su.static_per_param, su.expert_static_per_param);
  StaticParts& parts = chunk.parts;
  const int first = next, last = next + layers;  // [first, last)
  double fp8_weights = 0;                        // linear weights of this chunk's layers under FP8
  int fp8_layers = 0;
  if (folded && v == 0) {
    // The ViT folded into the first LM stage: patch embedding, its layers and the merger run
    // before the embedding, unbraided (prologue units).
    fill.prologue(su.patch, su.patch_params, parts.other_bytes);
    for (int l = 0; l < D; ++l) {
      LayerCost layer = su.folded_vision_layer;
      for (UnitCost& u : layer.units) u.layer = l;
      fill.folded_layer(layer, su.vision_layer_params, su.vision_fp8_weights);
      fp8_weights += su.vision_fp8_weights;
      ++fp8_layers;
    }
    fill.prologue(su.merger, su.merger_params, parts.other_bytes);
    next = D;
  } else if (D > 0 && first == 0) {
    fill.prologue(su.patch, su.patch_params, parts.other_bytes);
  }
  const bool embeds = (D == 0 || folded) ? v == 0 : (first <= D && D < last);
  if (embeds) {
    chunk.embeds = true;
    double params = su.vocab_per_gpu * m.hidden;
    if (m.position == PositionEmbedding::Learned) {
      params += static_cast<double>(m.max_positions) * m.hidden;
    }
    fill.prologue(su.embedding, params, parts.embeddings_bytes);
  }
  for (; next < last; ++next) {
    const bool moe = next >= D && su.moe_layers && is_moe_layer(*m.moe, next - D);
    const bool window = next >= D && is_window_layer(m, next - D);
    LayerCost layer = next < D ? su.vision_layer
                      : moe    ? (window ? su.moe_window_layer : su.moe_layer)
                      : window ? su.lm_window_layer
                               : su.lm_layer;
    for (auto& u : layer.units) u.layer = next < D ? next : next - D;
    if (moe)
      fill.moe_layer(layer, su.moe_dense_params, su.moe_expert_params, 0);
    else
      fill.layer(layer, next < D ? su.vision_layer_params : su.layer_params,
                 next < D ? su.vision_fp8_weights : su.lm_fp8_weights);
    fp8_weights += next < D ? su.vision_fp8_weights : moe ? su.moe_fp8_weights : su.lm_fp8_weights;
    ++fp8_layers;
  }
  if (D > 0 && !folded && first < D && D <= last) {
    fill.epilogue(su.merger, su.merger_params, parts.other_bytes);
  }
  if (v == virtual_stages - 1) {
    // Final norm + LM head. With tied embeddings a last stage without the embedding holds a
    // copy of it (Megatron keeps it there and all-reduces its gradient with the first stage);
    // on the embedding's own chunk the head uses the embedding weight itself.
    fill.epilogue(su.head, su.norm_params * m.hidden, parts.other_bytes);
    if (!(m.tied_embeddings && chunk.embeds)) {
      const double before = parts.embeddings_bytes;
      fill.add_to_last(su.vocab_per_gpu * m.hidden, parts.embeddings_bytes);
      if (m.tied_embeddings) chunk.tied_copy_bytes = parts.embeddings_bytes - before;
    }
  }
  // Megatron buckets only the first pipeline stage's first model chunk (DistributedDataParallel
  // with disable_bucketing for later chunks and pp_rank > 0): virtual stage 0.
  const bool bucketed = tr.overlap_grad_reduce && v == 0;
  chunk.grad_buckets = detail::grad_buckets(study, profile, fill.unit_params(), bucketed,
                                            Group::DpCp, fill.fp8_params());
  // The experts' gradients: a buffer of their own reduced over edp (Megatron-Core's
  // DistributedDataParallel builds expert_parallel_buffers on the expert data-parallel group).
  for (const GradBucket& b :
       detail::grad_buckets(study, profile, fill.expert_params(), bucketed, Group::Edp))
    chunk.grad_buckets.push_back(b);
  const RankLayout layout = rank_layout(study);
  const double dense_params = chunk.params - fill.expert_total();
  chunk.optimizer_s =
      roof.memory_s(detail::optimizer_bytes(tr, dense_params, layout.size(Group::DpCp)) +
                    detail::optimizer_bytes(tr, fill.expert_total(), layout.size(Group::Edp)));
  if (fp8_weights > 0) {
    // With --fp8-param-gather the weight is that FP8 copy (a Float8Tensor parameter, its data in
    // the uint8 parameter buffer and the transpose beside it) and no bf16 weight is kept: the
    // 2 bytes of the bf16 weight counted above are the copy's; nothing is added.
    if (!tr.fp8_param_gather) parts.layers_bytes += kFp8WeightBytes * fp8_weights;
    chunk.optimizer_s += fp8_weight_cast_s(roof, tr.precision, fp8_weights, fp8_layers);
  }
  chunk.static_bytes = parts.layers_bytes + parts.embeddings_bytes + parts.other_bytes;
  for_each_unit(chunk,
                [&](const UnitCost& u) { chunk.activation_bytes += sum_alloc(u, Phase::F); });
  // A separate ViT stage sends the patches' hidden states, or after the merger the image
  // tokens at the LM width (the text tokens join at the embedding on the next stage).
  if (D > 0 && !folded && last < D) {
    chunk.output_bytes = su.vision_output_bytes;
  } else if (D > 0 && !folded && last == D) {
    chunk.output_bytes = su.samples * m.vision->tokens_per_sample * m.hidden * tr.dtype_bytes;
  } else {
    chunk.output_bytes = su.lm_output_bytes;
  }
  return chunk;
}

// Whole job, per iteration: every unit's FLOPs on one GPU x tp x cp GPUs x microbatches x dp.
void count_iteration(CostModel& cm, const Study& study, const StudyUnits& su) {
  double flops_per_microbatch = 0, hw_flops_per_microbatch = 0;
  for (const auto& c : cm.chunks) {
    for_each_unit(c, [&](const UnitCost& u) {
      for (const auto& p : u.phase) {
        flops_per_microbatch += p.flops;
        hw_flops_per_microbatch += p.hw_flops;
      }
      hw_flops_per_microbatch += u.recompute.hw_flops;  // full recomputation's forward rerun
    });
  }
  const double t = study.parallel.tp * study.parallel.cp;
  const double microbatches_per_iteration =
      static_cast<double>(study.training.microbatches) * study.parallel.dp;
  cm.model_flops = flops_per_microbatch * t * microbatches_per_iteration;
  cm.hardware_flops = hw_flops_per_microbatch * t * microbatches_per_iteration;
  cm.samples_per_iteration = su.samples * microbatches_per_iteration;
  cm.tokens_per_iteration = su.tokens * microbatches_per_iteration;
}

// Where the pipeline ranks sit and what their links carry: P2P, the TP group's gather, host
// copies.
void set_links(CostModel& cm, const Study& study, const Profile& profile) {
  const ParallelConfig& par = study.parallel;
  const RankLayout layout = rank_layout(study);
  for (int r = 0; r < par.pp; ++r)
    cm.node_of_rank.push_back(layout.node_of(layout.first_rank_of_stage(r)));
  const LinkProfile& intra = profile.link(study.cluster.intra_node.name);
  cm.intra_p2p_Bps = intra.p2p_bandwidth_Bps;
  cm.p2p_latency_s = intra.latency_s;
  if (study.cluster.nodes > 1) {
    cm.inter_p2p_Bps = profile.link(study.cluster.inter_node.name).p2p_bandwidth_Bps;
  } else if (auto it = profile.links.find(study.cluster.inter_node.name);
             it != profile.links.end()) {
    cm.inter_p2p_Bps = it->second.p2p_bandwidth_Bps;
  }
  cm.p2p_scatter_gather = study.training.p2p_scatter_gather && !par.sequence_parallel && par.tp > 1;
  cm.p2p_batched = study.training.p2p_batched;
  cm.overlap_p2p_comm = study.training.overlap_p2p_comm;
  cm.wgrad_deferral_limit = study.training.wgrad_deferral_limit;
  cm.gather_latency_s = intra.latency_s;
  cm.gather_Bps = intra.bus_bandwidth_Bps;
  cm.d2h_Bps = profile.host_d2h_Bps;
  cm.h2d_Bps = profile.host_h2d_Bps;
}

// The step after the last backward (DESIGN §4): data-parallel sync and the tied embedding's
// gradient all-reduce.
void set_step(CostModel& cm, const Study& study, const Profile& profile, const StudyUnits& su,
              int virtual_stages) {
  const TrainingConfig& tr = study.training;
  cm.dp = study.parallel.dp;
  cm.overlap_grad_reduce = tr.overlap_grad_reduce;
  cm.overlap_param_gather = tr.overlap_param_gather;
  if (study.model.tied_embeddings && virtual_stages > 1) {
    // finalize_model_grads._allreduce_word_embedding_grads: the fp32 main gradient of the
    // embedding, all-reduced by the first and last stage's GPUs of each TP rank at once (a
    // group of two, one member per node when the stages sit on different nodes).
    cm.embedding_sync_bytes = su.vocab_per_gpu * study.model.hidden * tr.grad_bytes_per_param;
    const bool same_node = cm.node_of_rank.front() == cm.node_of_rank.back();
    // Every GPU of the first stage's node syncs its shard at once (a TP group per node).
    cm.embedding_sync_s =
        dp_collective_time_s(study, profile, CollectiveKind::AllReduce, 2, same_node ? 2 : 1,
                             study.cluster.gpus_per_node, cm.embedding_sync_bytes);
  }
}

// Transformer Engine's delayed-scaling amax reduction (pytorch/quantization.py
// FP8GlobalStateManager.reduce_and_update_fp8_tensors): one all-reduce (MAX) of the amaxes every
// FP8 module of the rank has registered (add_fp8_tensors_to_global_buffer: each module once, so
// the rank's modules of all its chunks), over the group Megatron-Core passes as fp8_group
// (fp8_utils.py get_fp8_context: parallel_state.get_amax_reduction_group(with_context_parallel=
// True), tp x dp x cp unless --tp-only-amax-red). Forward: when the outermost fp8_autocast exits
// (autocast_exit), and for the delayed recipe Megatron's TransformerBlock.forward wraps the whole
// block of a chunk in it, so after the chunk's last layer in every microbatch's forward; 3 FP32
// amaxes per GEMM (input, weight, output: base.py num_gemms x 3). Backward: at the end of the
// backward of the first FP8 module the autocast ran (is_first_fp8_module: the chunk's first
// layer's QKV, layernorm_linear.py _LayerNormLinear.backward), 2 per GEMM (output gradient, input
// gradient). Four GEMMs per layer (QKV, out-projection, FC1, FC2). Synchronous (async_op=False):
// the compute after it waits.
constexpr double kAmaxBytes = 4;
constexpr double kFp8GemmsPerLayer = 4;

void add_amax_reductions(CostModel& cm, const Study& study, const Profile& profile) {
  if (study.training.precision != Precision::Fp8Delayed) return;
  const RankLayout layout = rank_layout(study);
  const int group = layout.size(Group::TpDpCp);
  if (group <= 1) return;
  // The rank's FP8 layers: the chunks' layers shared over the pipeline ranks (uneven splits and
  // ViT layers folded into a prologue are averaged in).
  double layers = 0;
  for (const ChunkCost& c : cm.chunks)
    for_each_unit(c, [&](const UnitCost& u) { layers += u.kind == UnitKind::PreAttn ? 1 : 0; });
  layers /= study.parallel.pp;
  auto reduction = [&](double amaxes_per_gemm) {
    Collective c;
    c.kind = CollectiveKind::AllReduce;
    c.group = Group::TpDpCp;
    c.position = CollectivePosition::After;
    c.bytes = kAmaxBytes * amaxes_per_gemm * kFp8GemmsPerLayer * layers;
    c.time_s = dp_collective_time_s(study, profile, CollectiveKind::AllReduce, group,
                                    layout.members_per_node(Group::TpDpCp),
                                    layout.nic_users(Group::TpDpCp), c.bytes);
    return c;
  };
  const Collective forward = reduction(3), backward = reduction(2);
  for (ChunkCost& c : cm.chunks) {
    if (c.layer_units.empty()) continue;
    c.layer_units.back()[Phase::F].collectives.push_back(forward);
    c.layer_units.front()[Phase::B].collectives.push_back(backward);
  }
}

}  // namespace

std::vector<detail::LayerKernel> detail::lm_layer_kernels(const Study& study,
                                                          const Profile& profile) {
  std::vector<KernelCall> calls;
  Roofline roof{&profile};
  roof.log = &calls;
  const LayerShape lm = lm_layer_shape(study.model, study.training.micro_batch_size,
                                       study.training.seq, study.parallel.cp);
  const LayerCost dense = layer_cost(lm, tp_setup(study, profile), roof, 0, false);
  // layer_cost times the dense layer's units in order, each unit's F, B and W in turn
  // (units.cpp). An MoE model's layers share only the attention half with it (the routed
  // experts replace the MLP: moe_units.cpp), so its table stops there.
  const std::span<const UnitRole> units = dense_layer().units;
  const int phases = 3 * static_cast<int>(units.size());
  const int shown = 3 * (study.model.moe ? dense.half : static_cast<int>(units.size()));
  std::vector<LayerKernel> out;
  out.reserve(calls.size());
  for (const KernelCall& c : calls) {
    if (c.phase_index < 0 || c.phase_index >= phases)
      throw InternalError("lm_layer_kernels: a kernel outside the layer's " +
                          std::to_string(phases) + " timed phases");
    if (c.phase_index >= shown) continue;
    out.push_back({units[static_cast<std::size_t>(c.phase_index / 3)].kind,
                   static_cast<Phase>(c.phase_index % 3), c});
  }
  return out;
}

CostModel build_cost_model(const Study& study, const Profile& profile, int virtual_stages,
                           const LayerSplit& split) {
  // The command line checks this first, naming --precision when it set it (study_options.cpp).
  if (const std::string refusal = precision_refusal(study.training.precision, profile);
      !refusal.empty())
    throw InputError(study.file, "training.precision", refusal);
  detail::Roofline roof{&profile};  // answers from profile.measured where it has tables
  const detail::TpSetup tp = tp_setup(study, profile);
  const StudyUnits su = study_units(study, profile, tp, roof);
  const std::vector<int> split_layers =
      detail::split_layers(study, virtual_stages, split, su.layout);

  CostModel cm;
  cm.tp = study.parallel.tp;
  cm.gpus = study.cluster.gpus();
  cm.peak_flops = profile.peak_flops;
  cm.hbm_bytes = profile.hbm_bytes;
  cm.fixed_overhead_bytes = profile.fixed_overhead_bytes;
  cm.contention = profile.contention;
  cm.copy_contention = profile.copy_contention;
  cm.recompute = study.training.recompute;
  cm.moe_load = su.moe_load;
  int next = 0;  // index in the combined sequence: ViT layers 0..D-1, then LM layers
  for (int v = 0; v < virtual_stages; ++v)
    cm.chunks.push_back(
        chunk_cost(study, profile, roof, su, v, virtual_stages, split_layers[v], next));
  add_amax_reductions(cm, study, profile);
  count_iteration(cm, study, su);
  set_links(cm, study, profile);
  set_step(cm, study, profile, su, virtual_stages);
  return cm;
}

}  // namespace braid
