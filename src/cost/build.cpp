// build_cost_model: a Study on a Profile -> per virtual stage, per unit and phase costs
// (cost_model.hpp). Formulas: docs/cost-model.md.
#include <cmath>
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

double sum_alloc(const UnitCost& u, Phase p) { return u[p].alloc_bytes; }

template <typename F>
void for_each_unit(const ChunkCost& c, F&& f) {
  for (const auto& u : c.prologue) f(u);
  for (const auto& layer : c.layers) {
    for (const auto& u : layer) f(u);
  }
  for (const auto& u : c.epilogue) f(u);
}

}  // namespace

CostModel build_cost_model(const Study& study, const Profile& profile, int virtual_stages,
                           const LayerSplit& split) {
  const ModelConfig& m = study.model;
  const ParallelConfig& par = study.parallel;
  const TrainingConfig& tr = study.training;

  detail::Roofline roof{&profile};  // answers from profile.measured where it has tables
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
  const bool tp_spans_nodes = par.tp > study.cluster.gpus_per_node;
  tp.link =
      &profile.link(tp_spans_nodes ? study.cluster.inter_node.name : study.cluster.intra_node.name);

  const double samples = tr.micro_batch_size;
  const double tokens = samples * tr.seq;
  const double t = par.tp;
  // Megatron pads the vocabulary to a multiple of 128 x tp (make-vocab-size-divisible-by 128).
  const double vocab_multiple = 128.0 * par.tp;
  const double padded_vocab = std::ceil(m.vocab / vocab_multiple) * vocab_multiple;
  const double vocab_per_gpu = padded_vocab / t;

  const detail::LayerShape lm = detail::lm_layer_shape(m, samples, tr.seq);
  const double layer_params = detail::layer_params_per_gpu(lm, par.tp);
  const double optimizer_share = tr.distributed_optimizer ? par.dp : 1;

  CostModel cm;
  cm.tp = par.tp;
  cm.gpus = study.cluster.gpus();
  cm.peak_flops = profile.peak_flops;
  cm.hbm_bytes = profile.hbm_bytes;
  cm.fixed_overhead_bytes = profile.fixed_overhead_bytes;
  cm.contention = profile.contention;
  cm.copy_contention = profile.copy_contention;
  cm.recompute = tr.recompute;

  // The layer costs are identical for every layer of the LM (and of the ViT): compute once,
  // relabel per layer.
  const LayerCost lm_layer = detail::layer_cost(lm, tp, roof, 0, false);
  const UnitCost embedding = detail::embedding_cost(
      tokens, m.hidden, tp, roof, m.position == PositionEmbedding::Learned, m.dropout);
  const UnitCost head = detail::head_cost(tokens, m.hidden, vocab_per_gpu, tp, roof);
  detail::LayoutCosts lc;
  lc.lm_layers = m.layers;
  lc.first_stage = study.layout.vision_placement == VisionPlacement::FirstStage;
  auto layer_s = [](const LayerCost& l) {
    double t = 0;
    for (const UnitCost& u : l) t += detail::unit_time_s(u);
    return t;
  };
  lc.lm_layer_s = layer_s(lm_layer);
  lc.embedding_s = detail::unit_time_s(embedding);
  lc.head_s = detail::unit_time_s(head);
  LayerCost vision_layer, folded_vision_layer;
  UnitCost patch, merger;
  double vision_layer_params = 0, patch_params = 0, merger_params = 0, vision_output_bytes = 0;
  if (m.vision) {
    const VisionConfig& vis = *m.vision;
    const detail::LayerShape vs = detail::vision_layer_shape(vis, samples);
    vision_layer = detail::layer_cost(vs, tp, roof, 0, true);
    // Folded into stage 0's prologue, the ViT's units have no per-layer rerun: full
    // recomputation applies to chunk layers only (the LM's, and a separate ViT's).
    detail::TpSetup folded_tp = tp;
    folded_tp.recompute_full = false;
    folded_vision_layer = detail::layer_cost(vs, folded_tp, roof, 0, true);
    patch = detail::vision_patch_cost(vs.tokens, detail::vision_patch_inputs(vis), vis.hidden, tp,
                                      roof);
    merger = detail::vision_merger_cost(vs.tokens,
                                        static_cast<double>(vis.spatial_merge) * vis.spatial_merge,
                                        vis.hidden, m.hidden, tp, roof);
    lc.vision_layers = vis.depth;
    lc.vision_layer_s = layer_s(lc.first_stage ? folded_vision_layer : vision_layer);
    lc.patch_s = detail::unit_time_s(patch);
    lc.merger_s = detail::unit_time_s(merger);
    vision_layer_params = detail::layer_params_per_gpu(detail::vision_layer_shape(vis, 1), par.tp);
    patch_params = detail::vision_patch_inputs(vis) * vis.hidden;
    merger_params = detail::vision_params_per_gpu(vis, m.hidden, par.tp) - patch_params -
                    vis.depth * vision_layer_params;
    // Between ViT stages: the patches' hidden states (sharded under SP like the LM's).
    vision_output_bytes = vs.tokens * vis.hidden * tr.dtype_bytes / (par.sequence_parallel ? t : 1);
  }
  const int D = lc.vision_layers;
  const std::vector<int> split_layers = detail::split_layers(study, virtual_stages, split, lc);
  const bool folded = D > 0 && lc.first_stage;
  const double lm_output_bytes =
      tokens * m.hidden * tr.dtype_bytes / (par.sequence_parallel ? t : 1);

  // Bytes per parameter of static memory: weights, gradients, optimizer state (sharded over DP
  // with the distributed optimizer).
  const double static_per_param = tr.weight_bytes_per_param + tr.grad_bytes_per_param +
                                  tr.optimizer_bytes_per_param / optimizer_share;
  int next = 0;  // index in the combined sequence: ViT layers 0..D-1, then LM layers
  for (int v = 0; v < virtual_stages; ++v) {
    ChunkCost chunk;
    chunk.virtual_stage = v;
    // Parameters per unit (index in the chunk's unit order), for the gradient buckets; a layer's
    // parameters sit on its PreAttn unit, whose W is the layer's last in the backward.
    std::vector<std::pair<int, double>> unit_params;
    int unit_index = 0;
    auto held = [&](double params, double& part) {
      unit_params.emplace_back(unit_index, params);
      chunk.params += params;
      part += params * static_per_param;
    };
    const int first = next, last = next + split_layers[v];  // [first, last)
    StaticParts& parts = chunk.parts;
    if (folded && v == 0) {
      // The ViT folded into the first LM stage: patch embedding, its layers and the merger run
      // before the embedding, unbraided (prologue units).
      chunk.prologue.push_back(patch);
      held(patch_params, parts.other_bytes);
      ++unit_index;
      for (int l = 0; l < D; ++l) {
        for (UnitCost u : folded_vision_layer) {
          u.layer = l;
          chunk.prologue.push_back(u);
        }
        held(vision_layer_params, parts.layers_bytes);
        unit_index += 4;
      }
      chunk.prologue.push_back(merger);
      held(merger_params, parts.other_bytes);
      ++unit_index;
      next = D;
    } else if (D > 0 && first == 0) {
      chunk.prologue.push_back(patch);
      held(patch_params, parts.other_bytes);
      ++unit_index;
    }
    const bool embeds = (D == 0 || folded) ? v == 0 : (first <= D && D < last);
    if (embeds) {
      chunk.prologue.push_back(embedding);
      chunk.embeds = true;
      double params = vocab_per_gpu * m.hidden;
      if (m.position == PositionEmbedding::Learned) {
        params += static_cast<double>(m.max_positions) * m.hidden;
      }
      held(params, parts.embeddings_bytes);
      ++unit_index;
    }
    for (; next < last; ++next) {
      LayerCost layer = next < D ? vision_layer : lm_layer;
      for (auto& u : layer) u.layer = next < D ? next : next - D;
      chunk.layers.push_back(layer);
      held(next < D ? vision_layer_params : layer_params, parts.layers_bytes);
      unit_index += 4;
    }
    if (D > 0 && !folded && first < D && D <= last) {
      chunk.epilogue.push_back(merger);
      held(merger_params, parts.other_bytes);
      ++unit_index;
    }
    if (v == virtual_stages - 1) {
      chunk.epilogue.push_back(head);
      // Final norm + LM head. With tied embeddings a last stage without the embedding holds a
      // copy of it (Megatron keeps it there and all-reduces its gradient with the first stage);
      // on the embedding's own chunk the head uses the embedding weight itself.
      held(lm.norm_params * m.hidden, parts.other_bytes);
      if (!(m.tied_embeddings && chunk.embeds)) {
        const double before = parts.embeddings_bytes;
        unit_params.back().second += vocab_per_gpu * m.hidden;
        chunk.params += vocab_per_gpu * m.hidden;
        parts.embeddings_bytes += vocab_per_gpu * m.hidden * static_per_param;
        if (m.tied_embeddings) chunk.tied_copy_bytes = parts.embeddings_bytes - before;
      }
      ++unit_index;
    }
    // Megatron buckets only the first pipeline stage's first model chunk (DistributedDataParallel
    // with disable_bucketing for later chunks and pp_rank > 0): virtual stage 0.
    chunk.grad_buckets =
        detail::grad_buckets(study, profile, unit_params, tr.overlap_grad_reduce && v == 0);
    chunk.optimizer_s = roof.memory_s(detail::optimizer_bytes(tr, chunk.params, par.dp));
    chunk.static_bytes = parts.layers_bytes + parts.embeddings_bytes + parts.other_bytes;
    for_each_unit(chunk,
                  [&](const UnitCost& u) { chunk.activation_bytes += sum_alloc(u, Phase::F); });
    // A separate ViT stage sends the patches' hidden states, or after the merger the image
    // tokens at the LM width (the text tokens join at the embedding on the next stage).
    if (D > 0 && !folded && last < D) {
      chunk.output_bytes = vision_output_bytes;
    } else if (D > 0 && !folded && last == D) {
      chunk.output_bytes = samples * m.vision->tokens_per_sample * m.hidden * tr.dtype_bytes;
    } else {
      chunk.output_bytes = lm_output_bytes;
    }
    cm.chunks.push_back(std::move(chunk));
  }

  // Whole job, per iteration: every unit's FLOPs on one GPU x tp GPUs x microbatches x dp.
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
  const double microbatches_per_iteration = static_cast<double>(tr.microbatches) * par.dp;
  cm.model_flops = flops_per_microbatch * t * microbatches_per_iteration;
  cm.hardware_flops = hw_flops_per_microbatch * t * microbatches_per_iteration;
  cm.samples_per_iteration = samples * microbatches_per_iteration;
  cm.tokens_per_iteration = tokens * microbatches_per_iteration;

  // Megatron's rank order (tp fastest, then dp, then pp): pipeline rank r's first GPU is r*tp*dp.
  for (int r = 0; r < par.pp; ++r) {
    cm.node_of_rank.push_back(r * par.tp * par.dp / study.cluster.gpus_per_node);
  }
  const LinkProfile& intra = profile.link(study.cluster.intra_node.name);
  cm.intra_p2p_Bps = intra.p2p_bandwidth_Bps;
  cm.p2p_latency_s = intra.latency_s;
  if (study.cluster.nodes > 1) {
    cm.inter_p2p_Bps = profile.link(study.cluster.inter_node.name).p2p_bandwidth_Bps;
  } else if (auto it = profile.links.find(study.cluster.inter_node.name);
             it != profile.links.end()) {
    cm.inter_p2p_Bps = it->second.p2p_bandwidth_Bps;
  }
  cm.dp = par.dp;
  cm.overlap_grad_reduce = tr.overlap_grad_reduce;
  cm.overlap_param_gather = tr.overlap_param_gather;
  if (m.tied_embeddings && virtual_stages > 1) {
    // finalize_model_grads._allreduce_word_embedding_grads: the fp32 main gradient of the
    // embedding, all-reduced by the first and last stage's GPUs of each TP rank at once (a
    // group of two, one member per node when the stages sit on different nodes).
    cm.embedding_sync_bytes = vocab_per_gpu * m.hidden * tr.grad_bytes_per_param;
    const bool same_node = cm.node_of_rank.front() == cm.node_of_rank.back();
    cm.embedding_sync_s = dp_collective_time_s(study, profile, CollectiveKind::AllReduce, 2,
                                               same_node ? 2 : 1, cm.embedding_sync_bytes);
  }
  cm.p2p_scatter_gather = tr.p2p_scatter_gather && !par.sequence_parallel && par.tp > 1;
  cm.gather_latency_s = intra.latency_s;
  cm.gather_Bps = intra.bus_bandwidth_Bps;
  cm.d2h_Bps = profile.host_d2h_Bps;
  cm.h2d_Bps = profile.host_h2d_Bps;
  return cm;
}

}  // namespace braid
