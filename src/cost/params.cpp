// Parameter counts (cost_model.hpp: count_parameters) and the layer shapes they share with the
// cost builder.
#include "shapes.hpp"

namespace braid {

namespace detail {

LayerShape lm_layer_shape(const ModelConfig& m, double samples, double seq, int cp) {
  LayerShape s;
  s.tokens = samples * seq / cp;
  s.seq = seq;
  s.cp = cp;
  s.hidden = m.hidden;
  s.heads = m.heads;
  s.kv_heads = m.kv_heads;
  s.head_dim = m.head_dim;
  s.ffn = m.ffn;
  s.gated = m.activation == MlpActivation::SwiGLU;
  s.causal = true;
  // qkv_bias alone is Qwen2's (biases on q, k, v only); linear_bias puts one on every linear layer.
  s.qkv_bias = m.qkv_bias || m.linear_bias;
  s.norm_params = m.norm == Normalization::LayerNorm ? 2 : 1;
  s.proj_bias = m.linear_bias;
  s.mlp_bias = m.linear_bias;
  s.flash = m.flash_attention;
  s.attention_impl = m.attention_impl;
  s.dropout = m.dropout;
  s.rope = m.position == PositionEmbedding::Rotary;
  if (m.mla) {
    // Every head has its own key and value (from the shared latent): the attention kernel sees
    // heads x heads at the query/key width; the value width is the mla block's.
    s.mla = m.mla;
    s.kv_heads = m.heads;
    s.head_dim = m.mla->qk_head_dim + m.mla->qk_pos_emb_head_dim;
  }
  return s;
}

LayerShape vision_layer_shape(const VisionConfig& v, double samples) {
  LayerShape s;
  s.seq = vision_patches_per_sample(v);  // attention within one image
  s.tokens = samples * s.seq;
  s.hidden = v.hidden;
  s.heads = v.heads;
  s.kv_heads = v.heads;
  s.head_dim = static_cast<double>(v.hidden) / v.heads;
  s.ffn = v.mlp_ratio * v.hidden;
  s.gated = false;  // QuickGELU MLP
  s.causal = false;
  s.qkv_bias = true;
  s.proj_bias = true;
  s.mlp_bias = true;
  s.norm_params = 2;  // LayerNorm
  return s;
}

double vision_patches_per_sample(const VisionConfig& v) {
  return static_cast<double>(v.tokens_per_sample) * v.spatial_merge * v.spatial_merge;
}

double vision_patch_inputs(const VisionConfig& v) {
  return static_cast<double>(v.in_channels) * v.temporal_patch * v.patch * v.patch;
}

double vision_params_per_gpu(const VisionConfig& v, double lm_hidden, int tp) {
  const double t = tp;
  const double width = static_cast<double>(v.spatial_merge) * v.spatial_merge * v.hidden;
  const double patch = vision_patch_inputs(v) * v.hidden;  // Conv3d, no bias, replicated
  const double blocks = v.depth * layer_params_per_gpu(vision_layer_shape(v, 1), tp);
  // Merger: LayerNorm, Linear(width, width) column-parallel, Linear(width, hidden) row-parallel.
  const double merger =
      2.0 * v.hidden + (width * width + width) / t + width * lm_hidden / t + lm_hidden;
  return patch + blocks + merger;
}

}  // namespace detail

namespace {

// One expert: the MLP of the dense layer at `width` (gated: gate, up, down; plain: fc1, fc2 and,
// as the dense MLP has them, their biases).
double expert_params(const detail::LayerShape& s, double width) {
  const double fc1_width = s.gated ? 2 * width : width;
  double p = s.hidden * fc1_width + width * s.hidden;
  if (s.mlp_bias) p += fc1_width;
  if (s.proj_bias) p += s.hidden;
  return p;
}

// An MoE layer's parameters when a token reaches `routed` of its routed experts: the dense
// layer without its MLP, the router (hidden x experts, no bias, as Megatron's TopKRouter and
// Mixtral's gate), the routed and the shared experts.
double moe_layer_params(const ModelConfig& m, int routed) {
  const MoeConfig& e = *m.moe;
  detail::LayerShape shape = detail::lm_layer_shape(m, 1, 1);
  const double mlp = expert_params(shape, shape.ffn);
  const double router = static_cast<double>(m.hidden) * e.experts;
  return detail::layer_params_per_gpu(shape, 1) - mlp + router +
         routed * expert_params(shape, e.expert_ffn) +
         e.shared_experts * expert_params(shape, e.shared_expert_ffn);
}

}  // namespace

ParameterCount count_parameters(const ModelConfig& m) {
  ParameterCount c;
  detail::LayerShape shape = detail::lm_layer_shape(m, 1, 1);
  c.per_layer = detail::layer_params_per_gpu(shape, 1);
  c.layers = c.per_layer * m.layers;
  int moe_layers = 0;
  double inactive = 0;  // the routed experts a token is not sent to
  if (m.moe) {
    moe_layers = moe_layer_count(*m.moe, m.layers);
    c.per_moe_layer = moe_layer_params(m, m.moe->experts);
    c.layers = c.per_layer * (m.layers - moe_layers) + c.per_moe_layer * moe_layers;
    inactive = (c.per_moe_layer - moe_layer_params(m, m.moe->top_k)) * moe_layers;
  }
  c.embedding = static_cast<double>(m.vocab) * m.hidden;
  if (m.position == PositionEmbedding::Learned)
    c.embedding += static_cast<double>(m.max_positions) * m.hidden;
  c.head = shape.norm_params * m.hidden +
           (m.tied_embeddings ? 0 : static_cast<double>(m.vocab) * m.hidden);
  if (m.vision) c.vision = detail::vision_params_per_gpu(*m.vision, m.hidden, 1);
  c.total = c.layers + c.embedding + c.head + c.vision;
  c.non_embedding = c.layers + c.vision;
  if (m.moe) c.active = c.total - inactive;
  return c;
}

}  // namespace braid
