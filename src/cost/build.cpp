// build_cost_model: a Study on a Profile -> per virtual stage, per unit and phase costs
// (cost_model.hpp). Formulas: docs/cost-model.md.
#include <cmath>
#include <string>
#include <vector>

#include "braid/cost_model.hpp"
#include "braid/error.hpp"
#include "shapes.hpp"

namespace braid {

namespace {

// Layers per virtual stage: the explicit split, or uniform with the remainder on earlier stages.
std::vector<int> layers_per_stage(const Study& study, int virtual_stages, const LayerSplit& split) {
  const int layers = study.model.layers;
  if (virtual_stages <= 0) {
    throw InputError(study.file, "virtual_stages",
                     "must be 1 or more, got " + std::to_string(virtual_stages));
  }
  if (!split.layers_per_stage.empty()) {
    if (static_cast<int>(split.layers_per_stage.size()) != virtual_stages) {
      throw InputError(study.file, "layer_split",
                       "has " + std::to_string(split.layers_per_stage.size()) +
                           " entries; one per virtual stage (" + std::to_string(virtual_stages) +
                           ") is required");
    }
    int sum = 0;
    for (int n : split.layers_per_stage) {
      if (n <= 0) throw InputError(study.file, "layer_split", "every stage needs 1 or more layers");
      sum += n;
    }
    if (sum != layers) {
      throw InputError(study.file, "layer_split",
                       "sums to " + std::to_string(sum) + " layers; model " + study.model.name +
                           " has " + std::to_string(layers));
    }
    return split.layers_per_stage;
  }
  if (layers < virtual_stages) {
    throw InputError(study.file, "parallel.pp",
                     "model " + study.model.name + " has " + std::to_string(layers) +
                         " layers, fewer than the " + std::to_string(virtual_stages) +
                         " virtual stages; each virtual stage needs at least one layer");
  }
  std::vector<int> out(virtual_stages, layers / virtual_stages);
  for (int v = 0; v < layers % virtual_stages; ++v) ++out[v];
  return out;
}

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
  const std::vector<int> split_layers = layers_per_stage(study, virtual_stages, split);

  detail::Roofline roof{&profile};
  detail::TpSetup tp;
  tp.tp = par.tp;
  tp.sp = par.sequence_parallel;
  tp.dtype_bytes = tr.dtype_bytes;
  tp.source = profile.source;
  tp.recompute_attention = tr.recompute == Recompute::Selective;
  tp.recompute_full = tr.recompute == Recompute::Full;
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
  cm.recompute = tr.recompute;

  // The layer costs are identical for every layer of the LM: compute once, relabel per layer.
  const LayerCost lm_layer = detail::layer_cost(lm, tp, roof, 0, false);

  int next_layer = 0;
  for (int v = 0; v < virtual_stages; ++v) {
    ChunkCost chunk;
    chunk.virtual_stage = v;
    if (v == 0) {
      if (m.vision) {
        const VisionConfig& vis = *m.vision;
        const detail::LayerShape vs = detail::vision_layer_shape(vis, samples);
        chunk.prologue.push_back(detail::vision_patch_cost(
            vs.tokens, detail::vision_patch_inputs(vis), vis.hidden, tp, roof));
        // Full recomputation applies to the LM's layers (the ViT units are flattened into the
        // prologue, which has no per-layer rerun).
        detail::TpSetup vision_tp = tp;
        vision_tp.recompute_full = false;
        const LayerCost vision_layer = detail::layer_cost(vs, vision_tp, roof, 0, true);
        for (int l = 0; l < vis.depth; ++l) {
          for (UnitCost u : vision_layer) {
            u.layer = l;
            chunk.prologue.push_back(u);
          }
        }
        chunk.prologue.push_back(detail::vision_merger_cost(
            vs.tokens, static_cast<double>(vis.spatial_merge) * vis.spatial_merge, vis.hidden,
            m.hidden, tp, roof));
        chunk.params += detail::vision_params_per_gpu(vis, m.hidden, par.tp);
      }
      chunk.prologue.push_back(detail::embedding_cost(tokens, m.hidden, tp, roof));
      chunk.params += vocab_per_gpu * m.hidden;
      if (m.position == PositionEmbedding::Learned) {
        chunk.params += static_cast<double>(m.max_positions) * m.hidden;
      }
    }
    for (int l = 0; l < split_layers[v]; ++l) {
      LayerCost layer = lm_layer;
      for (auto& u : layer) u.layer = next_layer;
      ++next_layer;
      chunk.layers.push_back(layer);
    }
    chunk.params += layer_params * split_layers[v];
    if (v == virtual_stages - 1) {
      chunk.epilogue.push_back(detail::head_cost(tokens, m.hidden, vocab_per_gpu, tp, roof));
      // Final norm + LM head; with tied embeddings the last stage still holds a copy of the
      // embedding (Megatron keeps it there and all-reduces its gradient with the first stage).
      chunk.params += lm.norm_params * m.hidden + vocab_per_gpu * m.hidden;
    }
    chunk.static_bytes = chunk.params * (tr.weight_bytes_per_param + tr.grad_bytes_per_param +
                                         tr.optimizer_bytes_per_param / optimizer_share);
    for_each_unit(chunk,
                  [&](const UnitCost& u) { chunk.activation_bytes += sum_alloc(u, Phase::F); });
    chunk.output_bytes = tokens * m.hidden * tr.dtype_bytes / (par.sequence_parallel ? t : 1);
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
  cm.d2h_Bps = profile.host_d2h_Bps;
  cm.h2d_Bps = profile.host_h2d_Bps;
  return cm;
}

}  // namespace braid
