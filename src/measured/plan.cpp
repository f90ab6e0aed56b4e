// make_plan: the shapes braid-profile measures, derived from a model config (DESIGN §2's units).
#include <algorithm>
#include <set>
#include <tuple>

#include "braid/error.hpp"
#include "braid/profile_plan.hpp"

namespace braid {

std::array<GemmShape, 3> linear_gemms(std::int64_t tokens, std::int64_t in, std::int64_t out,
                                      const std::string& label) {
  return {GemmShape{tokens, out, in, label + ".F"}, GemmShape{tokens, in, out, label + ".B"},
          GemmShape{out, in, tokens, label + ".W"}};
}

double ElementwiseShape::bytes() const {
  const double t = static_cast<double>(tokens), w = static_cast<double>(width);
  switch (kernel) {
    case ElementwiseKernel::RmsNorm:
      return 2.0 * t * w * 2;  // read x, write y (bf16)
    case ElementwiseKernel::Rope:
      return 2.0 * t * w * 2;  // in place: read + write q, k
    case ElementwiseKernel::SwiGLU:
      return 2.0 * t * w * 3;  // read gate + up, write out
  }
  return 0;
}

namespace {

void require(bool ok, const std::string& option, const std::string& problem) {
  if (!ok) throw InputError(option, "value", problem);
}

}  // namespace

ProfilePlan make_plan(const ModelConfig& m, const PlanOptions& o) {
  std::vector<int> seqs = o.seq.empty() ? std::vector<int>{4096} : o.seq;
  std::vector<int> mbss = o.mbs.empty() ? std::vector<int>{1} : o.mbs;
  if (o.quick) seqs.resize(1), mbss.resize(1);
  require(!o.tp.empty(), "--tp", "give at least one TP size");
  for (int tp : o.tp) {
    require(tp >= 1, "--tp", "TP sizes must be >= 1");
    require(m.heads % tp == 0, "--tp",
            "TP " + std::to_string(tp) + " does not divide " + m.name + "'s " +
                std::to_string(m.heads) + " attention heads");
    require(m.ffn % tp == 0, "--tp",
            "TP " + std::to_string(tp) + " does not divide the FFN size " + std::to_string(m.ffn));
    if (m.vision)
      require(m.vision->heads % tp == 0, "--tp",
              "TP " + std::to_string(tp) + " does not divide the ViT's " +
                  std::to_string(m.vision->heads) + " heads");
  }
  for (int s : seqs) require(s >= 1, "--seq", "sequence lengths must be >= 1");
  for (int b : mbss) require(b >= 1, "--mbs", "micro-batch sizes must be >= 1");

  ProfilePlan plan;
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> seen;
  auto add_linear = [&](std::int64_t tokens, std::int64_t in, std::int64_t out,
                        const std::string& label) {
    for (const GemmShape& g : linear_gemms(tokens, in, out, label))
      if (seen.insert({g.m, g.n, g.k}).second) plan.gemm.push_back(g);
  };
  const std::int64_t hd = m.head_dim > 0 ? m.head_dim : m.hidden / m.heads;
  const bool gated = m.activation == MlpActivation::SwiGLU;
  std::set<std::tuple<int, int, int, int, int, bool>> seen_attn;
  std::set<std::tuple<int, std::int64_t, std::int64_t, std::int64_t>> seen_elem;
  auto add_elem = [&](const ElementwiseShape& e) {
    if (seen_elem.insert({static_cast<int>(e.kernel), e.tokens, e.width, e.heads}).second)
      plan.elementwise.push_back(e);
  };
  for (int tp : o.tp) {
    const std::int64_t q_heads = m.heads / tp;
    // KV heads are replicated when TP exceeds their number (Megatron's GQA rule).
    const std::int64_t kv_heads = std::max<std::int64_t>(1, m.kv_heads / tp);
    for (int seq : seqs) {
      for (int mbs : mbss) {
        const std::int64_t tokens = static_cast<std::int64_t>(seq) * mbs;
        add_linear(tokens, m.hidden, (q_heads + 2 * kv_heads) * hd, "qkv");
        add_linear(tokens, q_heads * hd, m.hidden, "out_proj");
        add_linear(tokens, m.hidden, (gated ? 2 : 1) * m.ffn / tp, "fc1");
        add_linear(tokens, m.ffn / tp, m.hidden, "fc2");
        // Megatron pads the vocabulary to a multiple of 128 x TP (as the cost model does).
        const std::int64_t multiple = 128 * static_cast<std::int64_t>(tp);
        add_linear(tokens, m.hidden, (m.vocab + multiple - 1) / multiple * multiple / tp,
                   "lm_head");
        AttentionPoint a{mbs,
                         seq,
                         static_cast<int>(q_heads),
                         static_cast<int>(kv_heads),
                         static_cast<int>(hd),
                         true,
                         0,
                         0};
        if (seen_attn.insert({a.batch, a.seq, a.heads, a.kv_heads, a.head_dim, a.causal}).second)
          plan.attention.push_back(a);
        add_elem({ElementwiseKernel::RmsNorm, tokens, m.hidden, 0, 0, seq});
        if (m.position == PositionEmbedding::Rotary)
          add_elem({ElementwiseKernel::Rope, tokens, (q_heads + kv_heads) * hd, q_heads + kv_heads,
                    hd, seq});
        if (gated) add_elem({ElementwiseKernel::SwiGLU, tokens, m.ffn / tp, 0, 0, seq});
      }
      if (m.vision) {
        // The ViT attends within one image: its sequence is the patches of one sample.
        const VisionConfig& v = *m.vision;
        const std::int64_t merge = static_cast<std::int64_t>(v.spatial_merge) * v.spatial_merge;
        const std::int64_t patches = static_cast<std::int64_t>(v.tokens_per_sample) * merge;
        const std::int64_t vh = v.hidden, vheads = v.heads / tp;
        const std::int64_t vffn = static_cast<std::int64_t>(v.mlp_ratio * v.hidden) / tp;
        for (int mbs : mbss) {
          const std::int64_t tokens = patches * mbs;
          if (tokens <= 0) continue;
          add_linear(tokens, vh, 3 * vh / tp, "vit.qkv");
          add_linear(tokens, vh / tp, vh, "vit.out_proj");
          add_linear(tokens, vh, vffn, "vit.fc1");
          add_linear(tokens, vffn, vh, "vit.fc2");
          AttentionPoint a{mbs,
                           static_cast<int>(patches),
                           static_cast<int>(vheads),
                           static_cast<int>(vheads),
                           static_cast<int>(vh / v.heads),
                           false,
                           0,
                           0};
          if (seen_attn.insert({a.batch, a.seq, a.heads, a.kv_heads, a.head_dim, a.causal}).second)
            plan.attention.push_back(a);
        }
      }
    }
  }
  const double step = o.quick ? 16 : 2;  // nccl-tests -f 2 (or 16 for --quick)
  for (double b = 1024; b <= 1024.0 * 1024 * 1024; b *= step) plan.comm_bytes.push_back(b);
  for (double b = 1024; b <= 1024.0 * 1024 * 1024; b *= o.quick ? 64 : 4)
    plan.copy_bytes.push_back(b);
  return plan;
}

}  // namespace braid
