// Loading and validating models, clusters and studies (config.hpp).
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "../util/physical_bounds.hpp"
#include "../util/yaml_reader.hpp"
#include "braid/config.hpp"
#include "braid/error.hpp"
#include "braid/rank_layout.hpp"
#include "model_heads.hpp"
#include "paths.hpp"

namespace braid {

namespace fs = std::filesystem;
using detail::bounded_number;
using detail::bounded_number_or;
using detail::kBucketBound;
using detail::kBytesPerParamBound;
using detail::kNicBound;
using detail::kRatioBound;
using detail::YamlMap;

namespace {

// Group-limited routing as Megatron's TopKRouter checks it (moe_utils.py, group_limited_topk):
// the groups split the experts evenly and the chosen groups hold at least top_k experts.
void check_router_groups(YamlMap& e, const MoeConfig& moe) {
  if ((moe.router_groups == 0) != (moe.router_group_top_k == 0))
    e.fail(moe.router_groups == 0 ? "router_groups" : "router_group_top_k",
           "group-limited routing needs both router_groups and router_group_top_k");
  if (moe.router_groups == 0) return;
  if (moe.experts % moe.router_groups != 0)
    e.fail("router_groups", std::to_string(moe.router_groups) + " does not divide the " +
                                std::to_string(moe.experts) + " experts");
  if (moe.router_group_top_k > moe.router_groups)
    e.fail("router_group_top_k", std::to_string(moe.router_group_top_k) +
                                     " is more than the router_groups (" +
                                     std::to_string(moe.router_groups) + ")");
  const int reachable = moe.router_group_top_k * (moe.experts / moe.router_groups);
  if (moe.top_k > reachable)
    e.fail("top_k", std::to_string(moe.top_k) + " is more than the " + std::to_string(reachable) +
                        " experts in router_group_top_k groups");
}

// A count that may be 0 (shared experts, dense layers, groups), read without overflowing int.
int count_or_zero(YamlMap& e, const std::string& key) {
  const std::int64_t v = e.integer_or(key, 0);
  if (v < 0 || v > (1 << 20))
    e.fail(key, "must be 0 or a positive integer up to 1048576, got " + std::to_string(v));
  return static_cast<int>(v);
}

// The model's `mla:` map (config.hpp: MlaConfig): every width required but q_lora_rank (0 or
// absent: queries without a low-rank bottleneck, Megatron's q_lora_rank None). MLA's keys carry
// rotary embedding and one latent serves every head, so the model has no learned positions and
// no grouped-query kv_heads.
MlaConfig read_mla(YamlMap& a, const ModelConfig& model) {
  MlaConfig mla;
  mla.q_lora_rank = count_or_zero(a, "q_lora_rank");
  mla.kv_lora_rank = a.positive_int("kv_lora_rank");
  mla.qk_head_dim = a.positive_int("qk_head_dim");
  mla.qk_pos_emb_head_dim = a.positive_int("qk_pos_emb_head_dim");
  mla.v_head_dim = a.positive_int("v_head_dim");
  a.finish();
  if (model.position != PositionEmbedding::Rotary)
    a.fail("qk_pos_emb_head_dim",
           "multi-head latent attention needs rotary embeddings; drop position: learned or the "
           "mla block");
  if (model.kv_heads != model.heads)
    a.fail("kv_lora_rank", "one latent serves all " + std::to_string(model.heads) +
                               " heads, so kv_heads must equal heads (got " +
                               std::to_string(model.kv_heads) + "); drop kv_heads");
  return mla;
}

// The model's `moe:` map (config.hpp: MoeConfig). Widths default to the dense ffn (Mixtral's
// experts are its FFN); every other default is Megatron-Core's.
MoeConfig read_moe(YamlMap& e, const ModelConfig& model) {
  MoeConfig moe;
  moe.experts = e.positive_int("experts");
  moe.top_k = e.positive_int("top_k");
  if (moe.top_k > moe.experts)
    e.fail("top_k", std::to_string(moe.top_k) + " is more than the " + std::to_string(moe.experts) +
                        " experts");
  moe.expert_ffn = e.positive_int_or("expert_ffn", model.ffn);
  moe.shared_experts = count_or_zero(e, "shared_experts");
  if (moe.shared_experts > moe.experts)
    e.fail("shared_experts", "must be 0 (none) up to the experts (" + std::to_string(moe.experts) +
                                 "), got " + std::to_string(moe.shared_experts));
  moe.shared_expert_ffn = e.positive_int_or("shared_expert_ffn", moe.expert_ffn);
  moe.layer_freq = e.positive_int_or("layer_freq", 1);
  moe.first_k_dense = count_or_zero(e, "first_k_dense");
  if (moe.first_k_dense >= model.layers)
    e.fail("first_k_dense", "must be 0 up to layers - 1 (" + std::to_string(model.layers - 1) +
                                "), got " + std::to_string(moe.first_k_dense));
  if (moe_layer_count(moe, model.layers) == 0)
    e.fail("layer_freq", "leaves no MoE layer among the " + std::to_string(model.layers) +
                             " layers (layer l is MoE when l >= first_k_dense and l % layer_freq "
                             "== 0)");
  moe.router_score = static_cast<RouterScore>(e.choice_or("router_score", router_score_names(), 0));
  moe.router_groups = count_or_zero(e, "router_groups");
  moe.router_group_top_k = count_or_zero(e, "router_group_top_k");
  check_router_groups(e, moe);
  if (e.has("capacity_factor"))
    moe.capacity_factor = bounded_number(e, "capacity_factor", kRatioBound);
  moe.pad_to_capacity = e.boolean_or("pad_to_capacity", false);
  if (moe.pad_to_capacity && !moe.capacity_factor)
    e.fail("pad_to_capacity",
           "needs a capacity_factor (Megatron's --moe-pad-expert-input-to-capacity needs "
           "--moe-expert-capacity-factor); set one or drop pad_to_capacity");
  moe.dispatcher = static_cast<MoeDispatcher>(e.choice_or("dispatcher", moe_dispatcher_names(), 0));
  moe.fp8_dispatch = e.boolean_or("fp8_dispatch", false);
  if (moe.fp8_dispatch && moe.dispatcher != MoeDispatcher::DeepEp)
    e.fail("fp8_dispatch",
           "needs dispatcher: deepep (DeepEP's dispatch kernel sends FP8; Megatron's alltoall "
           "and allgather dispatchers send bf16); set dispatcher: deepep or drop fp8_dispatch");
  e.finish();
  return moe;
}

ModelConfig read_model(YamlMap& m, const fs::path& file) {
  ModelConfig model;
  model.file = file.string();
  model.name = m.string_or("name", file.stem().string());
  model.layers = m.positive_int("layers");
  model.hidden = m.positive_int("hidden");
  detail::read_heads(m, {"hidden", "heads", "kv_heads", "head_dim"}, model);
  model.ffn = m.positive_int("ffn");
  model.vocab = m.positive_int("vocab");
  model.tied_embeddings = m.boolean_or("tied_embeddings", false);
  model.qkv_bias = m.boolean_or("qkv_bias", false);
  model.activation = static_cast<MlpActivation>(m.choice_or("activation", activation_names(), 0));
  model.norm = static_cast<Normalization>(m.choice_or(
      "norm", normalization_names(), static_cast<int>(default_normalization(model.activation))));
  model.linear_bias = m.boolean_or("linear_bias", default_linear_bias(model.activation));
  model.position = m.choice_or("position", {"rotary", "learned"}, 0) == 0
                       ? PositionEmbedding::Rotary
                       : PositionEmbedding::Learned;
  model.dropout = m.boolean_or("dropout", false);
  model.flash_attention = m.boolean_or("flash_attention", true);
  model.attention_impl =
      static_cast<AttentionImpl>(m.choice_or("attention_impl", attention_impl_names(), 0));
  if (model.attention_impl == AttentionImpl::Unfused) {
    model.flash_attention = false;
  } else if (!model.flash_attention && model.attention_impl != AttentionImpl::Default) {
    m.fail("attention_impl",
           std::string(name(model.attention_impl)) +
               " is a fused kernel but flash_attention is false; give attention_impl: unfused "
               "or drop flash_attention");
  }
  if (!model.flash_attention) model.attention_impl = AttentionImpl::Unfused;
  model.sliding_window = count_or_zero(m, "sliding_window");
  model.full_attention_every = count_or_zero(m, "full_attention_every");
  if (model.full_attention_every > 0 && model.sliding_window == 0)
    m.fail("full_attention_every",
           "needs a sliding_window (keys per query); give sliding_window or drop "
           "full_attention_every");
  // Required for learned position embeddings, optional (and unused) for rotary ones.
  if (model.position == PositionEmbedding::Learned || m.has("max_positions")) {
    model.max_positions = m.positive_int("max_positions");
  }
  if (auto v = m.map_if_present("vision")) {
    VisionConfig vision;
    vision.depth = v->positive_int("depth");
    vision.hidden = v->positive_int("hidden");
    vision.heads = v->positive_int("heads");
    if (vision.hidden % vision.heads != 0) {
      v->fail("heads", std::to_string(vision.heads) + " does not divide vision.hidden " +
                           std::to_string(vision.hidden));
    }
    vision.mlp_ratio = bounded_number_or(*v, "mlp_ratio", 4.0, kRatioBound);
    vision.patch = v->positive_int_or("patch", 14);
    vision.temporal_patch = v->positive_int_or("temporal_patch", 2);
    vision.in_channels = v->positive_int_or("in_channels", 3);
    vision.spatial_merge = v->positive_int_or("spatial_merge", 2);
    vision.tokens_per_sample = v->positive_int("tokens_per_sample");
    v->finish();
    model.vision = vision;
  }
  if (auto e = m.map_if_present("moe")) model.moe = read_moe(*e, model);
  if (auto a = m.map_if_present("mla")) model.mla = read_mla(*a, model);
  m.finish();
  return model;
}

ClusterConfig read_cluster(YamlMap& c, const fs::path& file) {
  ClusterConfig cluster;
  cluster.file = file.string();
  cluster.name = c.string_or("name", file.stem().string());
  cluster.nodes = c.positive_int("nodes");
  cluster.gpus_per_node = c.positive_int("gpus_per_node");
  cluster.profile = c.string("profile");
  // A profile given as a relative path is next to the cluster file (named profiles stay names).
  if (const fs::path pf(cluster.profile);
      pf.is_relative() && (cluster.profile.find('/') != std::string::npos ||
                           pf.extension() == ".yaml" || pf.extension() == ".yml")) {
    const fs::path local = file.parent_path() / pf;
    std::error_code ec;
    if (fs::is_regular_file(local, ec)) cluster.profile = local.string();
  }
  cluster.intra_node.name = "nvlink";
  cluster.inter_node.name = "ib";
  cluster.host.name = "pcie";
  if (auto links = c.map_if_present("links")) {
    cluster.intra_node.name = links->string_or("intra_node", "nvlink");
    cluster.inter_node.name = links->string_or("inter_node", "ib");
    cluster.host.name = links->string_or("host", "pcie");
    links->finish();
  }
  if (auto net = c.map_if_present("network")) {
    cluster.network.nics_per_node = net->positive_int("nics_per_node");
    cluster.network.nic_Bps =
        bounded_number(*net, "nic_gbps", kNicBound) * 1e9 / 8;  // Gb/s line rate
    cluster.network.nic_efficiency = net->positive_number_or("nic_efficiency", 0.9);
    if (cluster.network.nic_efficiency > 1)
      net->fail("nic_efficiency",
                "must be in (0, 1]; got " + std::to_string(cluster.network.nic_efficiency));
    net->finish();
  }
  c.finish();
  return cluster;
}

// An enum's value <-> its text in the enum's name table (one entry per value, in enum order).
template <class Enum>
const char* table_name(const std::vector<std::string>& names, Enum value) {
  return names.at(static_cast<std::size_t>(value)).c_str();
}
template <class Enum>
std::optional<Enum> table_parse(const std::vector<std::string>& names, std::string_view text) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == text) return static_cast<Enum>(i);
  return std::nullopt;
}

}  // namespace

const std::vector<std::string>& recompute_names() {
  static const std::vector<std::string> names = {"none", "selective", "full"};
  return names;
}
const std::vector<std::string>& vision_placement_names() {
  static const std::vector<std::string> names = {"separate", "first-stage"};
  return names;
}
const std::vector<std::string>& stage_balance_names() {
  static const std::vector<std::string> names = {"uniform", "cost"};
  return names;
}

const std::vector<std::string>& cp_comm_type_names() {
  static const std::vector<std::string> names = {"p2p", "a2a", "allgather", "a2a+p2p"};
  return names;
}

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names = {"swiglu", "gelu", "squared-relu"};
  return names;
}

const std::vector<std::string>& normalization_names() {
  static const std::vector<std::string> names = {"rmsnorm", "layernorm"};
  return names;
}

const std::vector<std::string>& precision_names() {
  static const std::vector<std::string> names = {"bf16", "fp8-delayed", "fp8-current",
                                                 "fp8-blockwise", "mxfp8"};
  return names;
}

const std::vector<std::string>& router_score_names() {
  static const std::vector<std::string> names = {"softmax", "sigmoid"};
  return names;
}
const char* name(RouterScore r) { return table_name(router_score_names(), r); }
std::optional<RouterScore> parse_router_score(std::string_view text) {
  return table_parse<RouterScore>(router_score_names(), text);
}

const std::vector<std::string>& moe_dispatcher_names() {
  static const std::vector<std::string> names = {"alltoall", "deepep", "allgather"};
  return names;
}
const char* name(MoeDispatcher d) { return table_name(moe_dispatcher_names(), d); }
std::optional<MoeDispatcher> parse_moe_dispatcher(std::string_view text) {
  return table_parse<MoeDispatcher>(moe_dispatcher_names(), text);
}

bool is_moe_layer(const MoeConfig& moe, int layer) {
  return layer >= moe.first_k_dense && moe.layer_freq > 0 && layer % moe.layer_freq == 0;
}

bool is_window_layer(const ModelConfig& m, int layer) {
  if (m.sliding_window <= 0) return false;
  return m.full_attention_every <= 0 || (layer + 1) % m.full_attention_every != 0;
}

int moe_layer_count(const MoeConfig& moe, int layers) {
  int count = 0;
  for (int l = 0; l < layers; ++l) count += is_moe_layer(moe, l) ? 1 : 0;
  return count;
}

const std::vector<std::string>& attention_impl_names() {
  static const std::vector<std::string> names = {"default", "flash2", "flash3", "cudnn", "unfused"};
  return names;
}

const char* name(Recompute r) { return table_name(recompute_names(), r); }
const char* name(VisionPlacement p) { return table_name(vision_placement_names(), p); }
const char* name(StageBalance b) { return table_name(stage_balance_names(), b); }
std::optional<Recompute> parse_recompute(std::string_view text) {
  return table_parse<Recompute>(recompute_names(), text);
}
std::optional<VisionPlacement> parse_vision_placement(std::string_view text) {
  return table_parse<VisionPlacement>(vision_placement_names(), text);
}
std::optional<StageBalance> parse_stage_balance(std::string_view text) {
  return table_parse<StageBalance>(stage_balance_names(), text);
}
const char* name(AttentionImpl a) { return table_name(attention_impl_names(), a); }
std::optional<AttentionImpl> parse_attention_impl(std::string_view text) {
  return table_parse<AttentionImpl>(attention_impl_names(), text);
}
const char* name(MlpActivation a) { return table_name(activation_names(), a); }
const char* name(Normalization n) { return table_name(normalization_names(), n); }
Normalization default_normalization(MlpActivation a) {
  return a == MlpActivation::SwiGLU ? Normalization::RMSNorm : Normalization::LayerNorm;
}
bool default_linear_bias(MlpActivation a) { return a != MlpActivation::SwiGLU; }
const char* name(Precision p) { return table_name(precision_names(), p); }
std::optional<Precision> parse_precision(std::string_view text) {
  return table_parse<Precision>(precision_names(), text);
}
const char* name(CpCommType c) { return table_name(cp_comm_type_names(), c); }
std::optional<CpCommType> parse_cp_comm_type(std::string_view text) {
  return table_parse<CpCommType>(cp_comm_type_names(), text);
}

void check_at_most(int value, int max, const std::string& where, const std::string& field) {
  if (value > max)
    throw InputError(where, field,
                     "must be at most " + std::to_string(max) +
                         " (braid's limit, docs/limits.md), "
                         "got " +
                         std::to_string(value));
}

namespace {

// Where a value came from: the command-line option when it was overridden, else the study file.
struct Origin {
  const Study& study;
  const StudyOverrides* overrides;
  std::string where(bool overridden, const char* option) const {
    return overridden ? std::string(option) : study.file;
  }
};

// The options among --tp, --cp, --pp and --nodes that the user gave, for an error about their
// product: "--pp", "--tp and --pp", "--tp, --pp and --nodes" ("" when none was).
std::string sizes_given(const StudyOverrides& o) {
  std::vector<const char*> given;
  if (o.tp) given.push_back("--tp");
  if (o.cp) given.push_back("--cp");
  if (o.pp) given.push_back("--pp");
  if (o.nodes) given.push_back("--nodes");
  std::string out;
  for (std::size_t i = 0; i < given.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == given.size() ? " and " : ", ") + given[i];
  return out;
}

// The a2a type splits each TP rank's attention heads over the CP group: Transformer Engine's
// AttnFuncWithCPAndQKVOA2A asserts num_heads % cp_size == 0 for Q and for K, V (the GPU's heads
// after the TP split, so GQA's kv heads / tp too).
void validate_ulysses(const Study& s, const StudyOverrides& o, const Origin& origin) {
  const int cp = s.parallel.cp, tp = s.parallel.tp;
  const int heads = s.model.heads / tp, kv_heads = s.model.kv_heads / tp;
  if (heads % cp == 0 && kv_heads % cp == 0) return;
  const bool named_cp = o.cp.has_value() || !o.cp_comm_type.has_value();
  throw InputError(
      named_cp ? origin.where(o.cp.has_value(), "--cp") : "--cp-comm-type", "parallel.cp_comm_type",
      "a2a splits each TP rank's heads over cp (Transformer Engine requires heads and "
      "kv heads divisible by cp): model " +
          s.model.name + " at tp " + std::to_string(tp) + " has " + std::to_string(heads) +
          " heads and " + std::to_string(kv_heads) + " kv heads per rank; allowed cp: " +
          detail::divisors_of(std::gcd(heads, kv_heads)) + ", or use p2p");
}

// The two levels of a2a+p2p. Megatron's validate_args (training/arguments.py) asserts that
// --hierarchical-context-parallel-sizes is given with a2a+p2p and that its product is cp;
// Transformer Engine's attn_forward_func_with_cp takes exactly two groups ([a2a, p2p]) and runs a
// level of size 1 as the other type alone, so braid asks for both above 1 (the plain type says the
// same thing); the a2a level splits each TP rank's heads over A (flash_attn_a2a_communicate, as
// validate_ulysses). Sizes given with another type would be ignored by the attention: refused.
void validate_hierarchical_cp(const Study& s, const StudyOverrides& o, const Origin& origin) {
  const ParallelConfig& p = s.parallel;
  const std::vector<int>& sizes = p.hierarchical_cp;
  const std::string where = origin.where(o.hierarchical_cp.has_value(), "--hierarchical-cp-sizes");
  const char* field = "parallel.hierarchical_cp";
  if (p.cp_comm_type != CpCommType::A2AP2P) {
    if (sizes.empty()) return;
    throw InputError(where, field,
                     std::string("the sizes of a2a+p2p's two levels, but cp_comm_type is ") +
                         name(p.cp_comm_type) + "; drop them or use --cp-comm-type a2a+p2p");
  }
  // At cp 1 the type has nothing to exchange (the explorer's base study runs at cp 1, its axes
  // set the rest).
  if (p.cp == 1) return;
  if (sizes.empty())
    throw InputError(origin.where(o.cp_comm_type.has_value(), "--cp-comm-type"), field,
                     "a2a+p2p needs the sizes of its a2a and p2p levels (Megatron asserts "
                     "--hierarchical-context-parallel-sizes is set): give --hierarchical-cp-sizes "
                     "A P with A x P = cp " +
                         std::to_string(p.cp));
  if (sizes.size() != 2)
    throw InputError(where, field,
                     "a2a+p2p takes two sizes, the a2a group's and the p2p ring's (Transformer "
                     "Engine's [a2a, p2p] groups); got " +
                         std::to_string(sizes.size()));
  const int a2a = sizes[0], ring = sizes[1];
  if (a2a * ring != p.cp)
    throw InputError(where, field,
                     std::to_string(a2a) + " x " + std::to_string(ring) + " = " +
                         std::to_string(a2a * ring) + " is not cp " + std::to_string(p.cp) +
                         " (Megatron asserts cp = the product of the sizes)");
  if (a2a < 2 || ring < 2)
    throw InputError(where, field,
                     "both sizes must be above 1 (Megatron asserts only their product; Transformer "
                     "Engine runs a level of 1 as the other type alone): use --cp-comm-type " +
                         std::string(a2a < 2 ? "p2p" : "a2a"));
  const int heads = s.model.heads / p.tp, kv_heads = s.model.kv_heads / p.tp;
  if (heads % a2a != 0 || kv_heads % a2a != 0)
    throw InputError(where, field,
                     "the a2a level splits each TP rank's heads over " + std::to_string(a2a) +
                         " (Transformer Engine requires heads and kv heads divisible by it): "
                         "model " +
                         s.model.name + " at tp " + std::to_string(p.tp) + " has " +
                         std::to_string(heads) + " heads and " + std::to_string(kv_heads) +
                         " kv heads per rank; allowed a2a sizes: " +
                         detail::divisors_of(std::gcd(heads, kv_heads)));
}

// Context parallelism as Transformer Engine runs it with Megatron-Core (p2p, load-balanced):
// each rank holds 2 of 2 x cp sequence chunks, attention is TE's fused kernel (Megatron builds
// the CP attention only from TEDotProductAttention), and the vision encoder has no CP.
void validate_context_parallel(const Study& s, const StudyOverrides& o, const Origin& origin) {
  const int cp = s.parallel.cp;
  if (cp == 1) return;  // the communication type has nothing to exchange
  const std::string where = origin.where(o.cp.has_value(), "--cp");
  const CpCommType comm = s.parallel.cp_comm_type;
  if (comm == CpCommType::A2A) validate_ulysses(s, o, origin);
  check_at_most(cp, kMaxCp, where, "parallel.cp");
  if (s.training.seq % (2 * cp) != 0) {
    // Named after the option that made it fail: --cp when given, else --seq when given.
    throw InputError(o.cp ? "--cp" : origin.where(o.seq.has_value(), "--seq"), "training.seq",
                     "with context parallelism " + std::to_string(cp) + " the sequence (" +
                         std::to_string(s.training.seq) +
                         ") must split into 2 x cp = " + std::to_string(2 * cp) +
                         " equal chunks (load balancing); choose seq a multiple of " +
                         std::to_string(2 * cp));
  }
  if (!s.model.flash_attention) {
    throw InputError(where, "parallel.cp",
                     "context parallelism needs a fused attention kernel (Megatron-Core builds it "
                     "from Transformer Engine's); model " +
                         s.model.name +
                         " runs unfused attention: set attention_impl to a fused kernel");
  }
  if (s.model.vision) {
    throw InputError(where, "parallel.cp",
                     "context parallelism of a vision-language model is not modelled (model " +
                         s.model.name + " has a ViT); use --cp 1");
  }
}

// Megatron-Core's shared-expert overlap needs shared experts to overlap (MoELayer builds its
// SharedExpertMLP only with moe_shared_expert_intermediate_size) and a dispatcher with the
// all-to-alls it hides under: TransformerConfig.__post_init__ refuses it for any but the alltoall
// and flex dispatchers (braid's alltoall and deepep), so with allgather too.
void validate_moe_shared_expert_overlap(const Study& s, const StudyOverrides& o,
                                        const Origin& origin) {
  if (!s.training.moe_shared_expert_overlap) return;
  const std::string where =
      origin.where(o.moe_shared_expert_overlap.has_value(), "--moe-shared-expert-overlap");
  if (!s.model.moe || s.model.moe->shared_experts == 0)
    throw InputError(where, "training.moe_shared_expert_overlap",
                     "needs an MoE model with shared experts (model " + s.model.name +
                         " has none); turn it off or pick such a model");
  if (s.model.moe->dispatcher == MoeDispatcher::AllGather)
    throw InputError(where, "training.moe_shared_expert_overlap",
                     "needs the alltoall or deepep dispatcher (Megatron-Core refuses it with "
                     "allgather); turn it off or set --moe-dispatcher alltoall");
}

// Transformer Engine's userbuffers (TP-communication overlap) as Megatron allows them: its
// validate_args asserts sequence parallelism ("Tensor parallel communication/GEMM overlap can
// happen only when sequence parallelism is enabled"; at tp 1 it turns SP off first), and the
// buffers are peer memory mapped over NVLink, so the TP group stays in one node (TE issue 1071).
void validate_tp_comm_overlap(const Study& s, const StudyOverrides& o, const Origin& origin,
                              const RankLayout& layout) {
  if (!s.training.tp_comm_overlap) return;
  const std::string where = origin.where(o.tp_comm_overlap.has_value(), "--tp-comm-overlap");
  if (!s.parallel.sequence_parallel || s.parallel.tp == 1) {
    throw InputError(where, "training.tp_comm_overlap",
                     "needs sequence parallelism with tp > 1 (as in Megatron); turn "
                     "sequence_parallel on or this off");
  }
  if (layout.spans_nodes(Group::Tp)) {
    throw InputError(where, "training.tp_comm_overlap",
                     "needs the TP group inside one node (userbuffers use NVLink peer memory); "
                     "tp " +
                         std::to_string(s.parallel.tp) + " spans nodes of " +
                         std::to_string(s.cluster.gpus_per_node) + " GPUs");
  }
}

// Expert parallelism (Megatron-Core's parallel folding: experts on etp x ep x edp x pp over the
// same ranks as attention's tp x cp x dp x pp; core/parallel_state.py initialize_model_parallel
// asserts that etp x ep x pp divides the world, and the MoE layer that ep divides the experts,
// core/transformer/moe/moe_layer.py BaseMoELayer).
void validate_expert_parallel(const Study& s, const StudyOverrides& o, const Origin& origin) {
  const ParallelConfig& p = s.parallel;
  const std::string ep_where = origin.where(o.ep.has_value(), "--ep");
  const std::string etp_where = origin.where(o.etp.has_value(), "--etp");
  if (p.ep <= 0)
    throw InputError(ep_where, "parallel.ep",
                     "must be a positive integer (1 or more), got " + std::to_string(p.ep));
  if (p.etp < 0)
    throw InputError(etp_where, "parallel.etp",
                     "must be a positive integer (1 or more), got " + std::to_string(p.etp));
  if (!s.model.moe) {
    if (p.ep > 1)
      throw InputError(ep_where, "parallel.ep",
                       "model " + s.model.name +
                           " is dense (no experts): expert parallelism needs a Mixture-of-Experts "
                           "model; use ep 1");
    if (p.etp > 0 && p.etp != p.tp)
      throw InputError(etp_where, "parallel.etp",
                       "model " + s.model.name +
                           " is dense (no experts): expert tensor parallelism needs a "
                           "Mixture-of-Experts model; leave etp out");
    return;
  }
  const MoeConfig& moe = *s.model.moe;
  if (moe.experts % p.ep != 0)
    throw InputError(ep_where, "parallel.ep",
                     "ep " + std::to_string(p.ep) + " does not divide the " +
                         std::to_string(moe.experts) + " experts of model " + s.model.name +
                         "; allowed ep: " + detail::divisors_of(moe.experts));
  const int etp = expert_tp(p.tp, p.etp);
  if (moe.expert_ffn % etp != 0)
    throw InputError(etp_where, "parallel.etp",
                     "etp " + std::to_string(etp) + " does not divide the expert ffn (" +
                         std::to_string(moe.expert_ffn) + ") of model " + s.model.name);
  const int gpus = s.cluster.gpus();
  const int expert_parallel = etp * p.ep * p.pp;
  if (gpus % expert_parallel != 0)
    throw InputError(
        origin.where(o.ep || o.etp || o.pp || o.nodes, o.ep ? "--ep" : "--etp"), "parallel.ep",
        "etp x ep x pp = " + std::to_string(etp) + " x " + std::to_string(p.ep) + " x " +
            std::to_string(p.pp) + " = " + std::to_string(expert_parallel) +
            " does not divide the " + std::to_string(gpus) + " GPUs of cluster " + s.cluster.name +
            "; allowed etp x ep x pp: divisors of " + std::to_string(gpus));
}

// training.moe_routing other than balanced needs an MoE model; a histogram one count per expert.
void validate_moe_routing(const Study& s, const StudyOverrides& o, const Origin& origin) {
  const MoeRouting& r = s.training.moe_routing;
  if (r.kind == MoeRoutingKind::Balanced) return;
  const std::string where = origin.where(o.moe_routing.has_value(), "--moe-routing");
  if (!s.model.moe)
    throw InputError(where, "training.moe_routing",
                     "model " + s.model.name +
                         " is dense (no experts): a routing other than balanced needs a "
                         "Mixture-of-Experts model; leave moe_routing out");
  const int experts = s.model.moe->experts;
  if (r.kind == MoeRoutingKind::Histogram && static_cast<int>(r.weights.size()) != experts)
    throw InputError(where, "training.moe_routing",
                     "histogram file " + r.file + " has " + std::to_string(r.weights.size()) +
                         " counts, model " + s.model.name + " has " + std::to_string(experts) +
                         " experts; give one count or weight per expert");
}

void validate(Study& s, const StudyOverrides* ov) {
  StudyOverrides none;
  const StudyOverrides& o = ov != nullptr ? *ov : none;
  Origin origin{s, ov};
  const ModelConfig& m = s.model;
  ParallelConfig& p = s.parallel;
  const TrainingConfig& t = s.training;

  auto positive = [&](int v, bool overridden, const char* option, const char* field) {
    if (v <= 0) {
      throw InputError(origin.where(overridden, option), field,
                       "must be a positive integer (1 or more), got " + std::to_string(v));
    }
  };
  positive(p.tp, o.tp.has_value(), "--tp", "parallel.tp");
  positive(p.pp, o.pp.has_value(), "--pp", "parallel.pp");
  positive(p.vpp, o.vpp.has_value(), "--vpp", "parallel.vpp");
  positive(p.cp, o.cp.has_value(), "--cp", "parallel.cp");
  positive(t.seq, o.seq.has_value(), "--seq", "training.seq");
  positive(t.micro_batch_size, o.mbs.has_value(), "--mbs", "training.micro_batch_size");
  positive(t.microbatches, o.microbatches.has_value(), "--microbatches", "training.microbatches");
  positive(s.cluster.nodes, o.nodes.has_value(), "--nodes", "cluster.nodes");
  check_at_most(p.pp, kMaxPp, origin.where(o.pp.has_value(), "--pp"), "parallel.pp");
  check_at_most(p.vpp, kMaxVpp, origin.where(o.vpp.has_value(), "--vpp"), "parallel.vpp");
  check_at_most(t.seq, kMaxSeq, origin.where(o.seq.has_value(), "--seq"), "training.seq");
  check_at_most(t.micro_batch_size, kMaxMbs, origin.where(o.mbs.has_value(), "--mbs"),
                "training.micro_batch_size");
  check_at_most(t.microbatches, kMaxMicrobatches,
                origin.where(o.microbatches.has_value(), "--microbatches"),
                "training.microbatches");
  check_at_most(s.cluster.nodes, kMaxNodes, origin.where(o.nodes.has_value(), "--nodes"),
                "cluster.nodes");

  std::string tp_where = origin.where(o.tp.has_value(), "--tp");
  if (m.heads % p.tp != 0) {
    throw InputError(tp_where, "parallel.tp",
                     "tp " + std::to_string(p.tp) + " does not divide the heads (" +
                         std::to_string(m.heads) + ") of model " + m.name +
                         "; allowed tp: " + detail::divisors_of(std::gcd(m.heads, m.kv_heads)));
  }
  if (m.kv_heads % p.tp != 0) {
    throw InputError(tp_where, "parallel.tp",
                     "tp " + std::to_string(p.tp) + " does not divide the kv_heads (" +
                         std::to_string(m.kv_heads) + ") of model " + m.name +
                         "; allowed tp: " + detail::divisors_of(std::gcd(m.heads, m.kv_heads)));
  }
  if (m.vision && m.vision->heads % p.tp != 0) {
    throw InputError(
        tp_where, "parallel.tp",
        "tp " + std::to_string(p.tp) + " does not divide the vision heads (" +
            std::to_string(m.vision->heads) + ") of model " + m.name +
            "; allowed tp: " + detail::divisors_of(std::gcd(m.vision->heads, m.kv_heads)));
  }
  if (m.ffn % p.tp != 0) {
    throw InputError(tp_where, "parallel.tp",
                     "tp " + std::to_string(p.tp) + " does not divide the ffn (" +
                         std::to_string(m.ffn) + ") of model " + m.name);
  }
  if (p.sequence_parallel && t.seq * t.micro_batch_size % p.tp != 0) {
    throw InputError(origin.where(o.seq.has_value(), "--seq"), "training.seq",
                     "with sequence parallelism seq x micro_batch_size (" +
                         std::to_string(t.seq * t.micro_batch_size) + ") must be divisible by tp " +
                         std::to_string(p.tp));
  }
  if (m.vision && p.sequence_parallel) {
    const long long patches = static_cast<long long>(m.vision->tokens_per_sample) *
                              m.vision->spatial_merge * m.vision->spatial_merge *
                              t.micro_batch_size;
    if (patches % p.tp != 0) {
      throw InputError(tp_where, "parallel.tp",
                       "with sequence parallelism the " + std::to_string(patches) +
                           " ViT patches per microbatch must be divisible by tp " +
                           std::to_string(p.tp));
    }
  }
  if (m.vision && m.vision->tokens_per_sample > t.seq) {
    throw InputError(origin.where(o.seq.has_value(), "--seq"), "training.seq",
                     "seq " + std::to_string(t.seq) + " is shorter than the " +
                         std::to_string(m.vision->tokens_per_sample) +
                         " image tokens per sample of model " + m.name);
  }
  if (!(t.offload >= 0 && t.offload <= 1)) {
    throw InputError(origin.where(o.offload.has_value(), "--offload"), "training.offload",
                     "must be a fraction between 0 (off) and 1 (every microbatch), got " +
                         std::to_string(t.offload));
  }
  // Megatron's own checks (megatron/training/arguments.py, validate_args): the parameter gather
  // only exists with the distributed optimizer and is overlapped only with the gradient reduce.
  if (t.overlap_param_gather && !(t.distributed_optimizer && t.overlap_grad_reduce)) {
    throw InputError(origin.where(o.overlap_param_gather.has_value(), "--overlap-param-gather"),
                     "training.overlap_param_gather",
                     "needs distributed_optimizer and overlap_grad_reduce on (as in Megatron); "
                     "turn them on or this off");
  }
  // arguments.py validate_args: "--fp8-param-gather only supported with distributed optimizer";
  // without an FP8 recipe there is no FP8 parameter to gather.
  if (t.fp8_param_gather && (t.precision == Precision::Bf16 || !t.distributed_optimizer)) {
    throw InputError(origin.where(o.fp8_param_gather.has_value(), "--fp8-param-gather"),
                     "training.fp8_param_gather",
                     "needs an FP8 precision and distributed_optimizer on (as in Megatron); "
                     "turn them on or this off");
  }
  int virtual_stages = p.pp * p.vpp;
  if (m.layers < p.pp * p.vpp) {
    throw InputError(origin.where(o.pp.has_value() || o.vpp.has_value(), "--pp"), "parallel.pp",
                     "model " + m.name + " has " + std::to_string(m.layers) +
                         " layers, fewer than the " + std::to_string(virtual_stages) +
                         " virtual stages (pp x vpp = " + std::to_string(p.pp) + " x " +
                         std::to_string(p.vpp) + "); each virtual stage needs at least one layer");
  }
  validate_hierarchical_cp(s, o, origin);
  validate_context_parallel(s, o, origin);
  int gpus = s.cluster.gpus();
  const int model_parallel = p.tp * p.cp * p.pp;
  if (gpus % model_parallel != 0) {
    const bool cp = p.cp > 1;
    throw InputError(
        origin.where(o.tp || o.pp || o.nodes || o.cp, sizes_given(o).c_str()), "parallel",
        std::string(cp ? "tp x cp x pp = " : "tp x pp = ") + std::to_string(p.tp) + " x " +
            (cp ? std::to_string(p.cp) + " x " : "") + std::to_string(p.pp) + " = " +
            std::to_string(model_parallel) + " does not divide the " + std::to_string(gpus) +
            " GPUs of cluster " + s.cluster.name + " (" + std::to_string(s.cluster.nodes) + " x " +
            std::to_string(s.cluster.gpus_per_node) + "); allowed " +
            (cp ? "tp x cp x pp" : "tp x pp") + ": divisors of " + std::to_string(gpus));
  }
  validate_expert_parallel(s, o, origin);
  validate_moe_routing(s, o, origin);
  validate_moe_shared_expert_overlap(s, o, origin);
  const RankLayout layout = rank_layout(s);
  p.dp = layout.dp;
  if (o.sizes_from_explorer) return;
  validate_tp_comm_overlap(s, o, origin, layout);
  // Megatron's check (core/model_parallel_config.py, ModelParallelConfig.__post_init__): the
  // deferred LM-head weight gradients fill the pipeline flush, which needs a pipeline.
  if (t.defer_embedding_wgrad_compute && p.pp == 1) {
    throw InputError(
        origin.where(o.defer_embedding_wgrad_compute.has_value(),
                     "--defer-embedding-wgrad-compute"),
        "training.defer_embedding_wgrad_compute",
        "needs pipeline parallelism (pp > 1, as in Megatron); set --pp 2 or more, or turn it off");
  }
}

// Megatron's global batch = micro-batch size x dp x microbatches (dp: the GPUs per tp x cp x pp).
int microbatches_of_global_batch(const Study& s, int global_batch) {
  const int model_parallel = s.parallel.tp * s.parallel.cp * s.parallel.pp;
  const int gpus = s.cluster.gpus();
  if (model_parallel <= 0 || gpus % model_parallel != 0) return 1;  // validate() reports it
  const int per_step = s.training.micro_batch_size * (gpus / model_parallel);
  if (global_batch <= 0 || global_batch % per_step != 0)
    throw InputError("--global-batch-size", std::to_string(global_batch),
                     "is not a multiple of micro-batch size x dp = " +
                         std::to_string(s.training.micro_batch_size) + " x " +
                         std::to_string(gpus / model_parallel) + " on cluster " + s.cluster.name +
                         " (" + std::to_string(gpus) + " GPUs)");
  return global_batch / per_step;
}

}  // namespace

ModelConfig load_model(const fs::path& file) {
  YamlMap m(detail::load_yaml_file(file), file.string(), "");
  return read_model(m, file);
}

ModelConfig load_model_ref(const std::string& ref, const std::string& where,
                           const fs::path& relative_to) {
  return detail::load_model_at(detail::resolve_model_ref(ref, where, relative_to));
}

namespace detail {

ModelConfig load_model_at(const ModelRef& ref) {
  return ref.hf ? import_hf_model(ref.file).model : load_model(ref.file);
}

}  // namespace detail

ClusterConfig load_cluster(const fs::path& file) {
  YamlMap c(detail::load_yaml_file(file), file.string(), "");
  return read_cluster(c, file);
}

Study load_study(const fs::path& file, const StudyOverrides& o) {
  YamlMap s(detail::load_yaml_file(file), file.string(), "");
  Study study;
  study.file = file.string();
  study.name = s.string_or("name", file.stem().string());

  // Model and cluster: by name or path; an override replaces the study's choice.
  std::string model_name = s.string("model");
  std::string cluster_name = s.string("cluster");
  const detail::ModelRef model_ref =
      o.model_config ? detail::ModelRef{}
      : o.model      ? detail::resolve_model_ref(*o.model, "--model")
                     : detail::resolve_model_ref(model_name, study.file, file.parent_path());
  fs::path cluster_file =
      o.cluster ? detail::resolve_named("clusters", *o.cluster, "--cluster", "cluster")
                : detail::resolve_named("clusters", cluster_name, study.file, "cluster",
                                        file.parent_path());
  study.model = o.model_config ? *o.model_config : detail::load_model_at(model_ref);
  study.cluster = load_cluster(cluster_file);
  // A study may use part of a cluster (or more nodes of the same kind).
  if (s.has("nodes")) study.cluster.nodes = s.positive_int("nodes");

  YamlMap par = s.map("parallel");
  study.parallel.tp = par.positive_int("tp");
  study.parallel.pp = par.positive_int("pp");
  study.parallel.vpp = par.positive_int_or("vpp", 2);
  study.parallel.sequence_parallel = par.boolean_or("sequence_parallel", false);
  study.parallel.cp = par.positive_int_or("cp", 1);
  study.parallel.cp_comm_type =
      static_cast<CpCommType>(par.choice_or("cp_comm_type", cp_comm_type_names(), 0));
  study.parallel.ep = par.positive_int_or("ep", 1);
  if (par.has("etp")) study.parallel.etp = par.positive_int("etp");
  for (const std::string& item : par.string_list_or("hierarchical_cp", {})) {
    const bool digits = !item.empty() && item.size() <= 4 &&
                        item.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) par.fail("hierarchical_cp", "'" + item + "' is not a group size (1 or more)");
    study.parallel.hierarchical_cp.push_back(std::stoi(item));
  }
  par.finish();

  YamlMap tr = s.map("training");
  TrainingConfig& t = study.training;
  t.seq = tr.positive_int("seq");
  t.micro_batch_size = tr.positive_int_or("micro_batch_size", 1);
  t.microbatches = tr.positive_int("microbatches");
  static const std::vector<std::string> dtypes = {"bf16", "fp16"};
  tr.choice_or("dtype", dtypes, 0);
  t.dtype_bytes = 2;
  t.weight_bytes_per_param =
      bounded_number_or(tr, "weight_bytes_per_param", 2, kBytesPerParamBound);
  t.grad_bytes_per_param = bounded_number_or(tr, "grad_bytes_per_param", 4, kBytesPerParamBound);
  t.optimizer_bytes_per_param =
      bounded_number_or(tr, "optimizer_bytes_per_param", 12, kBytesPerParamBound);
  t.distributed_optimizer = tr.boolean_or("distributed_optimizer", false);
  t.recompute = static_cast<Recompute>(tr.choice_or("recompute", recompute_names(), 0));
  t.offload = tr.nonnegative_number_or("offload", 0);
  t.overlap_grad_reduce = tr.boolean_or("overlap_grad_reduce", false);
  t.overlap_param_gather = tr.boolean_or("overlap_param_gather", false);
  t.bucket_params = bounded_number_or(tr, "bucket_params", 0, kBucketBound);
  t.gradient_accumulation_fusion = tr.boolean_or("gradient_accumulation_fusion", true);
  t.tp_comm_overlap = tr.boolean_or("tp_comm_overlap", false);
  t.moe_shared_expert_overlap = tr.boolean_or("moe_shared_expert_overlap", false);
  t.p2p_scatter_gather = tr.boolean_or("p2p_scatter_gather", true);
  t.p2p_batched = tr.boolean_or("p2p_batched", true);
  t.overlap_p2p_comm = tr.boolean_or("overlap_p2p_comm", true);
  t.defer_embedding_wgrad_compute = tr.boolean_or("defer_embedding_wgrad_compute", false);
  t.wgrad_deferral_limit = count_or_zero(tr, "wgrad_deferral_limit");
  t.precision = static_cast<Precision>(tr.choice_or("precision", precision_names(), 0));
  t.fp8_param_gather = tr.boolean_or("fp8_param_gather", false);
  if (tr.has("moe_routing"))
    t.moe_routing = parse_moe_routing(tr.string("moe_routing"), study.file, "training.moe_routing",
                                      file.parent_path());
  tr.finish();

  // Layer layout (multimodal placement, balancing, explicit split): optional.
  if (auto lay = s.map_if_present("layout")) {
    study.layout.vision_placement = static_cast<VisionPlacement>(
        lay->choice_or("vision_placement", vision_placement_names(), 0));
    study.layout.balance =
        static_cast<StageBalance>(lay->choice_or("balance", stage_balance_names(), 0));
    for (const std::string& item : lay->string_list_or("layers_per_stage", {})) {
      const bool digits = !item.empty() && item.size() <= 6 &&
                          item.find_first_not_of("0123456789") == std::string::npos;
      if (!digits) lay->fail("layers_per_stage", "'" + item + "' is not a layer count (0 or more)");
      study.layout.layers_per_stage.push_back(std::stoi(item));
    }
    lay->finish();
  }

  study.schedules = s.string_list_or("schedules", {});
  s.finish();

  // Command-line overrides.
  if (o.tp) study.parallel.tp = *o.tp;
  if (o.pp) study.parallel.pp = *o.pp;
  if (o.vpp) study.parallel.vpp = *o.vpp;
  if (o.sequence_parallel) study.parallel.sequence_parallel = *o.sequence_parallel;
  if (o.cp) study.parallel.cp = *o.cp;
  if (o.cp_comm_type) study.parallel.cp_comm_type = *o.cp_comm_type;
  if (o.ep) study.parallel.ep = *o.ep;
  if (o.etp) study.parallel.etp = *o.etp;
  if (o.hierarchical_cp) study.parallel.hierarchical_cp = *o.hierarchical_cp;
  if (o.seq) t.seq = *o.seq;
  if (o.mbs) t.micro_batch_size = *o.mbs;
  if (o.microbatches) t.microbatches = *o.microbatches;
  if (o.recompute) t.recompute = *o.recompute;
  if (o.precision) t.precision = *o.precision;
  if (o.nodes) study.cluster.nodes = *o.nodes;
  if (o.vision_placement) study.layout.vision_placement = *o.vision_placement;
  if (o.balance) study.layout.balance = *o.balance;
  if (o.layers_per_stage) study.layout.layers_per_stage = *o.layers_per_stage;
  if (o.offload) t.offload = *o.offload;
  if (o.distributed_optimizer) t.distributed_optimizer = *o.distributed_optimizer;
  if (o.overlap_grad_reduce) t.overlap_grad_reduce = *o.overlap_grad_reduce;
  if (o.overlap_param_gather) t.overlap_param_gather = *o.overlap_param_gather;
  if (o.p2p_scatter_gather) t.p2p_scatter_gather = *o.p2p_scatter_gather;
  if (o.p2p_batched) t.p2p_batched = *o.p2p_batched;
  if (o.overlap_p2p_comm) t.overlap_p2p_comm = *o.overlap_p2p_comm;
  if (o.gradient_accumulation_fusion)
    t.gradient_accumulation_fusion = *o.gradient_accumulation_fusion;
  if (o.tp_comm_overlap) t.tp_comm_overlap = *o.tp_comm_overlap;
  if (o.moe_shared_expert_overlap) t.moe_shared_expert_overlap = *o.moe_shared_expert_overlap;
  if (o.defer_embedding_wgrad_compute)
    t.defer_embedding_wgrad_compute = *o.defer_embedding_wgrad_compute;
  if (o.wgrad_deferral_limit) t.wgrad_deferral_limit = *o.wgrad_deferral_limit;
  if (o.fp8_param_gather) t.fp8_param_gather = *o.fp8_param_gather;
  if (o.moe_routing)
    t.moe_routing = parse_moe_routing(*o.moe_routing, "--moe-routing", "training.moe_routing");
  if (o.moe_dispatcher || o.moe_fp8_dispatch) {
    const char* option = o.moe_dispatcher ? "--moe-dispatcher" : "--moe-fp8-dispatch";
    if (!study.model.moe)
      throw InputError(option, "model.moe",
                       "needs a Mixture-of-Experts model (one with a moe: section); use such a "
                       "model or drop the option");
    MoeConfig& e = *study.model.moe;
    if (o.moe_dispatcher) e.dispatcher = *o.moe_dispatcher;
    if (o.moe_fp8_dispatch) e.fp8_dispatch = *o.moe_fp8_dispatch;
    if (e.fp8_dispatch && e.dispatcher != MoeDispatcher::DeepEp)
      throw InputError(o.moe_fp8_dispatch ? "--moe-fp8-dispatch" : "--moe-dispatcher",
                       "model.moe.fp8_dispatch",
                       "needs the deepep dispatcher (DeepEP's dispatch kernel sends FP8; "
                       "Megatron's alltoall and allgather dispatchers send bf16); add "
                       "--moe-dispatcher deepep or drop --moe-fp8-dispatch");
  }
  if (o.global_batch) t.microbatches = microbatches_of_global_batch(study, *o.global_batch);

  validate(study, &o);
  return study;
}

void validate_study(Study& study) { validate(study, nullptr); }

}  // namespace braid
