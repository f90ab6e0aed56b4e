// Hugging Face config.json -> ModelConfig (config.hpp: import_hf_model, model_yaml). Each model
// class transformers defines is read the way its modeling file builds the layers: which
// keys it has, their defaults when absent, which projections carry biases, whether the MLP is
// gated. Keys braid does not need are ignored; a feature braid reads but cannot model becomes a
// note (kept as a comment by `braid import hf`). Mixtral, Qwen3-MoE and DeepSeek-V2/V3 bring
// their experts (config.hpp: MoeConfig), DeepSeek also its multi-head latent attention
// (MlaConfig); other Mixture-of-Experts classes are refused naming the field. The
// mapping table is in docs/configuration.md, "Hugging Face configs".
#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../util/input_file.hpp"
#include "braid/config.hpp"
#include "braid/error.hpp"
#include "model_heads.hpp"

namespace braid {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// How transformers builds the decoder layers of one model class.
enum class Family {
  Llama,     // LlamaForCausalLM, MistralForCausalLM: RMSNorm, SwiGLU, attention_bias on q/k/v/o
  Qwen2,     // Qwen2ForCausalLM: as Llama, with q/k/v biases always on
  Qwen3,     // Qwen3ForCausalLM: as Llama, with RMSNorm on q and k (qk-norm)
  Gemma,     // Gemma/Gemma2/Gemma3ForCausalLM: gated GELU (GeGLU), tied embeddings by default
  Nemotron,  // NemotronForCausalLM: LayerNorm (1p), squared-ReLU plain MLP, no biases
  Deepseek,  // DeepseekV2/V3ForCausalLM: as Llama, with multi-head latent attention
  Refused,   // a class braid knows by name but cannot build yet: `refused_field` says why
};

// Where a Mixture-of-Experts class keeps its experts (transformers' configuration files).
enum class Experts {
  None,
  Mixtral,   // MixtralSparseMoeBlock: num_local_experts, every layer, intermediate_size wide
  Qwen3Moe,  // Qwen3MoeSparseMoeBlock: num_experts, moe_intermediate_size, decoder_sparse_step
  Deepseek,  // DeepseekV3MoE: n_routed_experts, n_shared_experts, first_k_dense_replace, groups
};

struct Architecture {
  const char* name;
  Family family;
  Experts experts = Experts::None;
  // For Family::Refused: the key of the part braid cannot model yet, and what that part is.
  const char* refused_field = "";
  const char* refused_why = "";
};

constexpr Architecture kArchitectures[] = {
    {"LlamaForCausalLM", Family::Llama},
    {"MistralForCausalLM", Family::Llama},
    {"Qwen2ForCausalLM", Family::Qwen2},
    {"Qwen3ForCausalLM", Family::Qwen3},
    {"GemmaForCausalLM", Family::Gemma},
    {"Gemma2ForCausalLM", Family::Gemma},
    {"Gemma3ForCausalLM", Family::Gemma},
    {"NemotronForCausalLM", Family::Nemotron},
    {"MixtralForCausalLM", Family::Llama, Experts::Mixtral},
    {"Qwen3MoeForCausalLM", Family::Qwen3, Experts::Qwen3Moe},
    // Qwen2MoeSparseMoeBlock gates its shared expert with a sigmoid of its own (not modelled).
    {"Qwen2MoeForCausalLM", Family::Refused, Experts::None, "shared_expert_intermediate_size",
     "gated shared expert"},
    // DeepseekV2/V3Attention: q and kv through low-rank projections (q_lora_rank, kv_lora_rank).
    {"DeepseekV2ForCausalLM", Family::Deepseek, Experts::Deepseek},
    {"DeepseekV3ForCausalLM", Family::Deepseek, Experts::Deepseek},
};

std::string known_architectures() {
  std::string out;
  for (const Architecture& a : kArchitectures) {
    if (a.family == Family::Refused) continue;
    if (!out.empty()) out += ", ";
    out += a.name;
  }
  return out;
}

// Typed reads of one config.json object; every error names the file and the key.
class HfFields {
 public:
  HfFields(const json& root, std::string file, std::string architecture)
      : root_(root), file_(std::move(file)), architecture_(std::move(architecture)) {}

  bool has(const char* key) const { return root_.contains(key) && !root_[key].is_null(); }

  int positive_int(const char* key) const {
    if (!has(key))
      throw InputError(file_, key,
                       std::string("missing (") + architecture_ +
                           " needs it); copy the model's config.json whole, not an excerpt");
    return checked_int(key);
  }
  int positive_int_or(const char* key, int fallback) const {
    return has(key) ? checked_int(key) : fallback;
  }
  // An integer that may be 0 (absent: 0).
  int count_or_zero(const char* key) const {
    if (!has(key)) return 0;
    const json& v = root_[key];
    if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > (1LL << 30))
      throw InputError(file_, key, "must be 0 or a positive integer, got " + v.dump());
    return static_cast<int>(v.get<long long>());
  }
  bool boolean_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!root_[key].is_boolean())
      throw InputError(file_, key, "must be true or false, got " + root_[key].dump());
    return root_[key].get<bool>();
  }
  std::string string_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!root_[key].is_string())
      throw InputError(file_, key, "must be a string, got " + root_[key].dump());
    return root_[key].get<std::string>();
  }
  // A list of non-negative integers (layer indices); empty when absent.
  std::vector<int> index_list_or_empty(const char* key) const {
    std::vector<int> out;
    if (!has(key)) return out;
    if (!root_[key].is_array())
      fail(key, "must be a list of layer indices, got " + root_[key].dump());
    for (const json& v : root_[key]) {
      if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > (1LL << 30))
        fail(key, "must be a list of layer indices, got " + root_[key].dump());
      out.push_back(static_cast<int>(v.get<long long>()));
    }
    return out;
  }
  [[noreturn]] void fail(const char* key, const std::string& problem) const {
    throw InputError(file_, key, problem);
  }

 private:
  int checked_int(const char* key) const {
    const json& v = root_[key];
    if (!v.is_number_integer() || v.get<long long>() <= 0 || v.get<long long>() > (1LL << 30))
      throw InputError(file_, key, "must be a positive integer, got " + v.dump());
    return static_cast<int>(v.get<long long>());
  }

  const json& root_;
  std::string file_;
  std::string architecture_;
};

json read_json(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec))
    throw InputError(file.string(), "",
                     "no such file (give a Hugging Face config.json or a folder holding one)");
  const std::string text = util::read_input_file(file, util::kHfConfigFile);
  try {
    json root = json::parse(text);
    if (!root.is_object())
      throw InputError(file.string(), "", "not a Hugging Face config: the top level is no object");
    return root;
  } catch (const json::parse_error& e) {
    // nlohmann's message starts with its own tag ("[json.exception.parse_error.101] ").
    std::string what = e.what();
    if (const std::size_t close = what.find("] "); close != std::string::npos)
      what = what.substr(close + 2);
    throw InputError(file.string(), "", "not valid JSON: " + what);
  }
}

const Architecture& architecture_of(const json& root, const std::string& file) {
  if (!root.contains("architectures") || !root["architectures"].is_array() ||
      root["architectures"].empty() || !root["architectures"][0].is_string())
    throw InputError(file, "architectures",
                     "missing; a Hugging Face config.json names its model class there, e.g. "
                     "[\"LlamaForCausalLM\"]; known: " +
                         known_architectures());
  const std::string name = root["architectures"][0].get<std::string>();
  for (const Architecture& a : kArchitectures)
    if (name == a.name) return a;
  throw InputError(file, "architectures",
                   "'" + name + "' is not a known architecture; known: " + known_architectures());
}

// The MLP activation of a gated MLP: SiLU (SwiGLU) or a GELU (GeGLU), both braid's gated MLP
// (the same shapes and FLOPs; the activation itself is an elementwise kernel either way).
void check_gated_activation(const HfFields& f, const char* key, const std::string& act) {
  static const std::vector<std::string> gated = {
      "silu", "swish", "gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python"};
  if (std::find(gated.begin(), gated.end(), act) == gated.end())
    f.fail(key, "'" + act +
                    "' is not modelled for a gated MLP; braid models silu (SwiGLU) and gelu "
                    "(GeGLU) gated MLPs");
}

std::string model_name(const fs::path& file) {
  if (file.filename() == "config.json" && file.has_parent_path() &&
      !file.parent_path().filename().empty() && file.parent_path().filename() != ".")
    return file.parent_path().filename().string();
  return file.stem().string();
}

// The sliding-window note: braid models every layer's attention as full causal attention, which
// is the same work while seq is within the window.
// A sliding window on the layers every class's rule picks: `full_every` as ModelConfig's
// full_attention_every (0: every layer windowed). A null or absent sliding_window is none.
void set_sliding_window(const HfFields& f, ModelConfig& m, int full_every) {
  if (!f.has("sliding_window")) return;
  m.sliding_window = f.positive_int("sliding_window");
  m.full_attention_every = full_every;
}

// Qwen2 and Qwen3 (modeling_qwen2.py, Qwen2DecoderLayer): with use_sliding_window, layer l is
// windowed when l >= max_window_layers. braid's rule holds max_window_layers 0 (every layer) and
// max_window_layers >= num_hidden_layers (none); a window on the later layers only is noted.
void qwen_sliding_window(const HfFields& f, HfModel& out) {
  if (!f.boolean_or("use_sliding_window", false) || !f.has("sliding_window")) return;
  const int from = f.count_or_zero("max_window_layers");
  if (from >= out.model.layers) return;
  if (from == 0) {
    set_sliding_window(f, out.model, 0);
    return;
  }
  out.notes.push_back("sliding_window " + std::to_string(f.positive_int("sliding_window")) +
                      " on layers from max_window_layers " + std::to_string(from) +
                      " on: not modelled, those layers run full causal attention");
}

// Mixtral's experts (modeling_mixtral.py, MixtralSparseMoeBlock): one softmax router and
// num_local_experts SwiGLU experts as wide as intermediate_size in every layer, no shared expert.
MoeConfig mixtral_experts(const HfFields& f, const ModelConfig& m) {
  MoeConfig moe;
  moe.experts = f.positive_int("num_local_experts");
  moe.top_k = f.positive_int("num_experts_per_tok");
  moe.expert_ffn = m.ffn;
  moe.shared_expert_ffn = m.ffn;
  return moe;
}

// Qwen3-MoE's experts (modeling_qwen3_moe.py, Qwen3MoeDecoderLayer): layer l is sparse when it
// is not in mlp_only_layers and (l + 1) % decoder_sparse_step == 0. braid's rule (first k dense,
// then every layer_freq-th) holds step 1 with mlp_only_layers 0..k-1; other patterns are refused.
MoeConfig qwen3_moe_experts(const HfFields& f, const ModelConfig& m) {
  MoeConfig moe;
  moe.experts = f.positive_int("num_experts");
  moe.top_k = f.positive_int("num_experts_per_tok");
  moe.expert_ffn = f.positive_int("moe_intermediate_size");
  moe.shared_expert_ffn = moe.expert_ffn;
  if (f.positive_int_or("decoder_sparse_step", 1) != 1)
    f.fail("decoder_sparse_step",
           "only 1 (every layer sparse) is modelled; braid's MoE layers are every layer from "
           "the first_k_dense-th on");
  const std::vector<int> dense = f.index_list_or_empty("mlp_only_layers");
  for (std::size_t i = 0; i < dense.size(); ++i)
    if (dense[i] != static_cast<int>(i))
      f.fail("mlp_only_layers", "only the first k layers (0, 1, ..., k-1) can be dense in braid");
  moe.first_k_dense = static_cast<int>(dense.size());
  if (moe.first_k_dense >= m.layers) f.fail("mlp_only_layers", "leaves no MoE layer");
  return moe;
}

// DeepSeek-V2/V3's experts (modeling_deepseek_v3.py, DeepseekV3MoE and DeepseekV3DecoderLayer):
// layer l is MoE from first_k_dense_replace on when l % moe_layer_freq == 0 (braid's rule); the
// shared experts are one MLP n_shared_experts x moe_intermediate_size wide (the same weights as
// n_shared_experts experts). Group-limited routing (topk_method group_limited_greedy or noaux_tc)
// over n_group groups, topk_group of them per token; one group is no limit.
MoeConfig deepseek_experts(const HfFields& f, const ModelConfig& m) {
  MoeConfig moe;
  moe.experts = f.positive_int("n_routed_experts");
  moe.top_k = f.positive_int("num_experts_per_tok");
  moe.expert_ffn = f.positive_int("moe_intermediate_size");
  moe.shared_experts = f.has("n_shared_experts") ? f.positive_int("n_shared_experts") : 0;
  moe.shared_expert_ffn = moe.expert_ffn;
  moe.layer_freq = f.positive_int_or("moe_layer_freq", 1);
  moe.first_k_dense = f.has("first_k_dense_replace") ? f.positive_int("first_k_dense_replace") : 0;
  if (moe.first_k_dense >= m.layers) f.fail("first_k_dense_replace", "leaves no MoE layer");
  const std::string score = f.string_or("scoring_func", "softmax");
  if (score != "softmax" && score != "sigmoid")
    f.fail("scoring_func", "'" + score + "' is not modelled; braid models softmax and sigmoid");
  moe.router_score = score == "sigmoid" ? RouterScore::Sigmoid : RouterScore::Softmax;
  const std::string method = f.string_or("topk_method", "greedy");
  const int groups = f.positive_int_or("n_group", 1);
  if ((method == "group_limited_greedy" || method == "noaux_tc") && groups > 1) {
    moe.router_groups = groups;
    moe.router_group_top_k = f.positive_int("topk_group");
    if (moe.experts % groups != 0 || moe.router_group_top_k > groups ||
        moe.top_k > moe.router_group_top_k * (moe.experts / groups))
      f.fail("n_group",
             "must divide n_routed_experts, be at least topk_group and leave "
             "num_experts_per_tok experts reachable");
  }
  return moe;
}

// DeepSeek's multi-head latent attention (modeling_deepseek_v3.py, DeepseekV3Attention):
// q_lora_rank null is DeepSeek-V2-Lite's plain q_proj.
MlaConfig deepseek_mla(const HfFields& f) {
  MlaConfig mla;
  mla.q_lora_rank = f.positive_int_or("q_lora_rank", 0);
  mla.kv_lora_rank = f.positive_int("kv_lora_rank");
  mla.qk_head_dim = f.positive_int("qk_nope_head_dim");
  mla.qk_pos_emb_head_dim = f.positive_int("qk_rope_head_dim");
  mla.v_head_dim = f.positive_int("v_head_dim");
  return mla;
}

}  // namespace

HfModel import_hf_model(const fs::path& path) {
  std::error_code ec;
  const fs::path file = fs::is_directory(path, ec) ? path / "config.json" : path;
  const std::string where = file.string();
  const json root = read_json(file);
  const Architecture& arch = architecture_of(root, where);
  const HfFields f(root, where, arch.name);
  if (arch.family == Family::Refused) {
    f.fail(arch.refused_field, std::string(arch.name) + "'s " + arch.refused_why +
                                   " is not modelled yet; braid imports: " + known_architectures());
  }

  HfModel out;
  out.architecture = arch.name;
  ModelConfig& m = out.model;
  m.file = where;
  m.name = model_name(file);
  m.layers = f.positive_int("num_hidden_layers");
  m.hidden = f.positive_int("hidden_size");
  detail::read_heads(f, {"hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim"},
                     m);
  m.ffn = f.positive_int("intermediate_size");
  m.vocab = f.positive_int("vocab_size");
  m.position = PositionEmbedding::Rotary;  // every class here: rotary (rope_theta not needed)

  switch (arch.family) {
    case Family::Llama:
    case Family::Qwen2:
    case Family::Qwen3:
    case Family::Deepseek: {
      check_gated_activation(f, "hidden_act", f.string_or("hidden_act", "silu"));
      m.activation = MlpActivation::SwiGLU;
      m.tied_embeddings = f.boolean_or("tie_word_embeddings", false);
      if (f.boolean_or("mlp_bias", false))
        f.fail("mlp_bias", "true is not modelled: braid's gated MLP has no biases");
      if (arch.family == Family::Qwen2) {
        m.qkv_bias = true;  // Qwen2Attention: q/k/v projections always carry a bias
        qwen_sliding_window(f, out);
      } else {
        m.qkv_bias = f.boolean_or("attention_bias", false);
        if (m.qkv_bias)
          out.notes.push_back(
              "attention_bias: the o_proj bias (hidden_size per layer) is not "
              "counted, the q/k/v biases are");
        if (arch.family == Family::Qwen3) {
          out.notes.push_back(
              "q_norm, k_norm (qk-norm): 2 x head_dim parameters per layer not "
              "counted");
          qwen_sliding_window(f, out);
        } else if (arch.family == Family::Deepseek) {
          if (m.qkv_bias) f.fail("attention_bias", "true is not modelled for MLA's projections");
          m.mla = deepseek_mla(f);
          m.kv_heads = m.heads;  // one latent for every head: no grouped-query heads
          if (f.has("num_nextn_predict_layers"))
            out.notes.push_back("num_nextn_predict_layers " +
                                std::to_string(f.positive_int("num_nextn_predict_layers")) +
                                " (multi-token prediction module): not modelled, its parameters "
                                "not counted");
        } else {
          set_sliding_window(f, m, 0);  // MistralAttention: every layer
        }
      }
      break;
    }
    case Family::Gemma: {
      // Gemma 2 and 3 name it hidden_activation; Gemma 1 hidden_act.
      const char* key = f.has("hidden_activation") ? "hidden_activation" : "hidden_act";
      check_gated_activation(f, key, f.string_or(key, "gelu_pytorch_tanh"));
      m.activation = MlpActivation::SwiGLU;
      m.tied_embeddings = f.boolean_or("tie_word_embeddings", true);
      m.qkv_bias = f.boolean_or("attention_bias", false);
      out.notes.push_back(
          "gated GELU MLP (GeGLU): modelled as braid's gated MLP, the same shapes and FLOPs");
      if (std::string(arch.name) != "GemmaForCausalLM") {
        out.notes.push_back(
            "pre/post-feedforward norms: 2 x hidden_size parameters per layer not "
            "counted");
        // Gemma2DecoderLayer: layers 0, 2, 4, ... windowed; Gemma3DecoderLayer: layer l unless
        // (l + 1) % sliding_window_pattern == 0 (modeling_gemma2.py, modeling_gemma3.py).
        set_sliding_window(f, m,
                           std::string(arch.name) == "Gemma2ForCausalLM"
                               ? 2
                               : f.positive_int_or("sliding_window_pattern", 6));
      }
      if (std::string(arch.name) == "Gemma3ForCausalLM")
        out.notes.push_back(
            "q_norm, k_norm (qk-norm): 2 x head_dim parameters per layer not "
            "counted");
      break;
    }
    case Family::Nemotron: {
      const std::string act = f.string_or("hidden_act", "relu2");
      if (act != "relu2")
        f.fail("hidden_act", "'" + act + "' is not modelled for NemotronForCausalLM (relu2)");
      // transformers' NemotronMLP: up_proj, relu2, down_proj; NemotronLayerNorm1P has a bias.
      m.activation = MlpActivation::SquaredReLU;
      m.norm = Normalization::LayerNorm;
      m.linear_bias = f.boolean_or("mlp_bias", false);
      if (f.boolean_or("attention_bias", false) != m.linear_bias)
        f.fail("attention_bias",
               "differs from mlp_bias: braid's linear_bias is one switch for every linear layer");
      m.tied_embeddings = f.boolean_or("tie_word_embeddings", false);
      if (f.has("partial_rotary_factor"))
        out.notes.push_back("partial_rotary_factor: rotary embedding modelled on the whole head");
      break;
    }
    case Family::Refused:
      break;  // refused above
  }
  if (arch.experts == Experts::Mixtral) m.moe = mixtral_experts(f, m);
  if (arch.experts == Experts::Qwen3Moe) m.moe = qwen3_moe_experts(f, m);
  if (arch.experts == Experts::Deepseek) m.moe = deepseek_experts(f, m);
  if (m.moe && m.moe->top_k > m.moe->experts)
    f.fail("num_experts_per_tok",
           "is more than the " + std::to_string(m.moe->experts) + " experts");
  return out;
}

namespace {

// A YAML plain scalar when safe, else a double-quoted one.
std::string yaml_scalar(const std::string& text) {
  const bool plain = !text.empty() && text.find_first_not_of(
                                          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                          "0123456789._-") == std::string::npos;
  if (plain && text.find_first_not_of("0123456789.-") != std::string::npos) return text;
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string model_yaml(const HfModel& imported) {
  const ModelConfig& m = imported.model;
  std::ostringstream y;
  y << "# Imported by `braid import hf` from " << m.file << " (" << imported.architecture << ").\n";
  if (!imported.notes.empty()) {
    y << "# Read but not modelled:\n";
    for (const std::string& note : imported.notes) y << "# - " << note << "\n";
  }
  y << "name: " << yaml_scalar(m.name) << "\n"
    << "layers: " << m.layers << "\n"
    << "hidden: " << m.hidden << "\n"
    << "heads: " << m.heads << "\n"
    << "kv_heads: " << m.kv_heads << "\n"
    << "head_dim: " << m.head_dim << "\n"
    << "ffn: " << m.ffn << "\n"
    << "vocab: " << m.vocab << "\n"
    << "tied_embeddings: " << (m.tied_embeddings ? "true" : "false") << "\n"
    << "qkv_bias: " << (m.qkv_bias ? "true" : "false") << "\n"
    << "activation: " << name(m.activation) << "\n";
  // Written only where they differ from the activation's family, as the loader reads them.
  if (m.norm != default_normalization(m.activation)) y << "norm: " << name(m.norm) << "\n";
  if (m.sliding_window > 0) {
    y << "sliding_window: " << m.sliding_window << "\n";
    if (m.full_attention_every > 0) y << "full_attention_every: " << m.full_attention_every << "\n";
  }
  if (m.linear_bias != default_linear_bias(m.activation))
    y << "linear_bias: " << (m.linear_bias ? "true" : "false") << "\n";
  if (m.moe) {
    const MoeConfig& e = *m.moe;
    y << "moe:\n"
      << "  experts: " << e.experts << "\n"
      << "  top_k: " << e.top_k << "\n"
      << "  expert_ffn: " << e.expert_ffn << "\n";
    if (e.shared_experts > 0)
      y << "  shared_experts: " << e.shared_experts << "\n"
        << "  shared_expert_ffn: " << e.shared_expert_ffn << "\n";
    if (e.layer_freq != 1) y << "  layer_freq: " << e.layer_freq << "\n";
    if (e.first_k_dense > 0) y << "  first_k_dense: " << e.first_k_dense << "\n";
    y << "  router_score: " << name(e.router_score) << "\n";
    if (e.router_groups > 0)
      y << "  router_groups: " << e.router_groups << "\n"
        << "  router_group_top_k: " << e.router_group_top_k << "\n";
  }
  if (m.mla) {
    const MlaConfig& a = *m.mla;
    y << "mla:\n";
    if (a.q_lora_rank > 0) y << "  q_lora_rank: " << a.q_lora_rank << "\n";
    y << "  kv_lora_rank: " << a.kv_lora_rank << "\n"
      << "  qk_head_dim: " << a.qk_head_dim << "\n"
      << "  qk_pos_emb_head_dim: " << a.qk_pos_emb_head_dim << "\n"
      << "  v_head_dim: " << a.v_head_dim << "\n";
  }
  return y.str();
}

}  // namespace braid
