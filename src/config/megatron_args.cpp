// Megatron-LM's pretrain_gpt.py flags -> study overrides (config.hpp: parse_megatron_args). The
// flags, their defaults and the derived sizes (the SwiGLU ffn width, kv_channels) are read as
// megatron/training/arguments.py defines them; the table is in docs/megatron.md.
#include <algorithm>
#include <filesystem>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "braid/config.hpp"
#include "braid/error.hpp"
#include "megatron_flags.hpp"
#include "shell_words.hpp"

namespace braid {

namespace {

// The flags of one command line: each --flag with the words up to the next --flag.
using Flags = std::map<std::string, std::vector<std::string>>;

// The flags read below, and those that set nothing braid simulates (optimizer hyper-parameters,
// data, tokenizer files, logging, checkpoints, initialization, numerics of no cost): any other
// flag is listed as not modelled.
const std::set<std::string>& known_flags() {
  static const std::set<std::string> names = {"--lr",
                                              "--min-lr",
                                              "--lr-decay-style",
                                              "--lr-decay-iters",
                                              "--lr-decay-samples",
                                              "--lr-warmup-fraction",
                                              "--lr-warmup-iters",
                                              "--lr-warmup-samples",
                                              "--lr-wsd-decay-style",
                                              "--lr-wsd-decay-iters",
                                              "--lr-wsd-decay-samples",
                                              "--weight-decay",
                                              "--start-weight-decay",
                                              "--end-weight-decay",
                                              "--weight-decay-incr-style",
                                              "--adam-beta1",
                                              "--adam-beta2",
                                              "--adam-eps",
                                              "--clip-grad",
                                              "--init-method-std",
                                              "--train-iters",
                                              "--train-samples",
                                              "--exit-interval",
                                              "--exit-duration-in-mins",
                                              "--seed",
                                              "--data-path",
                                              "--train-data-path",
                                              "--valid-data-path",
                                              "--test-data-path",
                                              "--data-cache-path",
                                              "--mock-data",
                                              "--split",
                                              "--vocab-file",
                                              "--merge-file",
                                              "--tokenizer-model",
                                              "--num-workers",
                                              "--log-interval",
                                              "--log-throughput",
                                              "--log-timers-to-tensorboard",
                                              "--log-memory-to-tensorboard",
                                              "--log-validation-ppl-to-tensorboard",
                                              "--log-params-norm",
                                              "--log-num-zeros-in-grad",
                                              "--timing-log-level",
                                              "--tensorboard-dir",
                                              "--tensorboard-log-interval",
                                              "--wandb-project",
                                              "--wandb-exp-name",
                                              "--wandb-save-dir",
                                              "--save",
                                              "--load",
                                              "--save-interval",
                                              "--eval-interval",
                                              "--eval-iters",
                                              "--no-load-optim",
                                              "--no-load-rng",
                                              "--no-save-optim",
                                              "--no-save-rng",
                                              "--ckpt-format",
                                              "--finetune",
                                              "--pretrained-checkpoint",
                                              "--use-checkpoint-args",
                                              "--distributed-backend",
                                              "--distributed-timeout-minutes",
                                              "--norm-epsilon",
                                              "--rotary-base",
                                              "--rotary-percent",
                                              "--rotary-seq-len-interpolation-factor",
                                              "--use-rope-scaling",
                                              "--rope-scaling-factor",
                                              "--make-vocab-size-divisible-by",
                                              "--attention-softmax-in-fp32",
                                              "--accumulate-allreduce-grads-in-fp32",
                                              "--use-mcore-models",
                                              "--transformer-impl",
                                              "--bf16",
                                              "--fp16",
                                              "--loss-scale",
                                              "--initial-loss-scale",
                                              "--min-loss-scale",
                                              "--loss-scale-window",
                                              "--hysteresis",
                                              "--rampup-batch-size",
                                              "--max-position-embeddings",
                                              "--use-legacy-models",
                                              "--ckpt-fully-parallel-save",
                                              "--ckpt-fully-parallel-load",
                                              "--async-save",
                                              "--dataloader-type",
                                              "--reset-position-ids",
                                              "--reset-attention-mask",
                                              "--eod-mask-loss",
                                              "--no-create-attention-mask-in-dataloader",
                                              "--manual-gc",
                                              "--manual-gc-interval",
                                              "--num-dataset-builder-threads",
                                              "--apply-layernorm-1p",
                                              "--untie-embeddings-and-output-weights",
                                              "--swiglu",
                                              "--squared-relu",
                                              "--disable-bias-linear",
                                              "--add-qkv-bias",
                                              "--group-query-attention",
                                              "--num-query-groups",
                                              "--num-layers",
                                              "--hidden-size",
                                              "--ffn-hidden-size",
                                              "--num-attention-heads",
                                              "--kv-channels",
                                              "--window-size",
                                              "--window-attn-skip-freq",
                                              "--seq-length",
                                              "--position-embedding-type",
                                              "--use-rotary-position-embeddings",
                                              "--normalization",
                                              "--vocab-size",
                                              "--tokenizer-type",
                                              "--micro-batch-size",
                                              "--global-batch-size",
                                              "--tensor-model-parallel-size",
                                              "--pipeline-model-parallel-size",
                                              "--num-layers-per-virtual-pipeline-stage",
                                              "--virtual-pipeline-model-parallel-size",
                                              "--sequence-parallel",
                                              "--context-parallel-size",
                                              "--cp-comm-type",
                                              "--hierarchical-context-parallel-sizes",
                                              "--expert-model-parallel-size",
                                              "--expert-tensor-parallel-size",
                                              "--recompute-granularity",
                                              "--recompute-method",
                                              "--recompute-num-layers",
                                              "--recompute-activations",
                                              "--use-distributed-optimizer",
                                              "--overlap-grad-reduce",
                                              "--overlap-param-gather",
                                              "--use-flash-attn",
                                              "--attention-backend",
                                              "--attention-dropout",
                                              "--hidden-dropout",
                                              "--no-gradient-accumulation-fusion",
                                              "--no-overlap-p2p-communication",
                                              "--defer-embedding-wgrad-compute",
                                              "--wgrad-deferral-limit",
                                              "--fp8-format",
                                              "--fp8-recipe",
                                              "--tp-comm-overlap",
                                              "--moe-shared-expert-overlap",
                                              "--fp8-param-gather",
                                              "--decoupled-lr",
                                              "--decoupled-min-lr",
                                              "--calculate-per-token-loss",
                                              "--tiktoken-pattern",
                                              "--no-mmap-bin-files",
                                              "--profile",
                                              "--profile-step-start",
                                              "--profile-step-end",
                                              "--profile-ranks",
                                              "--empty-unused-memory-level",
                                              "--fp8-amax-history-len",
                                              "--fp8-amax-compute-algo",
                                              "--log-progress",
                                              "--log-straggler"};
  return names;
}

// The vocabulary of tokenizers whose size does not need their files: GPT-2's BPE (also what a
// --vocab-file with a --merge-file and no --tokenizer-type is).
int tokenizer_vocab(const std::string& type) {
  if (type == "GPT2BPETokenizer") return 50257;
  return 0;
}

// The multi-head latent attention flags mla_of reads into the model
// (megatron/training/arguments.py, _add_mla_args and --multi-latent-attention); without a model of
// its own sizes they are listed as not modelled.
const std::set<std::string>& mla_flags() {
  static const std::set<std::string> names = {"--multi-latent-attention", "--q-lora-rank",
                                              "--kv-lora-rank",           "--qk-head-dim",
                                              "--qk-pos-emb-head-dim",    "--v-head-dim"};
  return names;
}

// The Mixture-of-Experts flags moe_of reads into the model (megatron/training/arguments.py,
// _add_moe_args); without a model of its own sizes they are listed as not modelled.
const std::set<std::string>& moe_flags() {
  static const std::set<std::string> names = {"--num-experts",
                                              "--moe-router-topk",
                                              "--moe-ffn-hidden-size",
                                              "--moe-shared-expert-intermediate-size",
                                              "--moe-layer-freq",
                                              "--moe-router-score-function",
                                              "--moe-router-num-groups",
                                              "--moe-router-group-topk",
                                              "--moe-expert-capacity-factor",
                                              "--moe-pad-expert-input-to-capacity",
                                              "--moe-token-dispatcher-type",
                                              "--moe-flex-dispatcher-backend",
                                              "--moe-enable-deepep"};
  return names;
}

class FlagReader {
 public:
  FlagReader(Flags flags, std::string where) : flags_(std::move(flags)), where_(std::move(where)) {}

  bool has(const std::string& flag) const { return flags_.count(flag) > 0; }
  std::string text(const std::string& flag, const std::string& fallback) const {
    const auto f = flags_.find(flag);
    if (f == flags_.end()) return fallback;
    if (f->second.empty()) fail(flag, "needs a value");
    return f->second.front();
  }
  int positive(const std::string& flag) const {
    if (!has(flag))
      fail(flag, "missing; a model needs --num-layers, --hidden-size, --num-attention-heads");
    const std::string value = text(flag, "");
    try {
      std::size_t used = 0;
      const long long v = std::stoll(value, &used);
      if (used != value.size() || v <= 0 || v > (1LL << 30)) throw std::invalid_argument(value);
      return static_cast<int>(v);
    } catch (const std::exception&) {
      fail(flag, "must be a positive integer, got '" + value + "'");
    }
  }
  // Every value of a flag that takes several (nargs '+'), each a positive integer.
  std::vector<int> positive_list(const std::string& flag) const {
    std::vector<int> out;
    for (const std::string& value : flags_.at(flag)) {
      std::size_t used = 0;
      int v = 0;
      try {
        v = std::stoi(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != value.size() || v <= 0)
        fail(flag, "must be positive integers, got '" + value + "'");
      out.push_back(v);
    }
    if (out.empty()) fail(flag, "needs a value");
    return out;
  }
  double number(const std::string& flag, double fallback) const {
    if (!has(flag)) return fallback;
    const std::string value = text(flag, "");
    try {
      std::size_t used = 0;
      const double v = std::stod(value, &used);
      if (used != value.size() || v < 0) throw std::invalid_argument(value);
      return v;
    } catch (const std::exception&) {
      fail(flag, "must be a number (0 or more), got '" + value + "'");
    }
  }
  [[noreturn]] void fail(const std::string& flag, const std::string& problem) const {
    throw InputError(where_, flag, problem);
  }
  const Flags& all() const { return flags_; }
  const std::string& where() const { return where_; }

 private:
  Flags flags_;
  std::string where_;
};

// The words of the command that runs a .py file (pretrain_gpt.py under torchrun), after it; or
// every command's words when none does (--megatron-args "--num-layers 32 ...").
std::vector<std::string> flag_words(const detail::ShellScript& script) {
  for (const std::vector<std::string>& command : script.commands) {
    const auto py = std::find_if(command.begin(), command.end(), [](const std::string& w) {
      return w.size() > 3 && w.compare(w.size() - 3, 3, ".py") == 0;
    });
    if (py != command.end()) return {py + 1, command.end()};
  }
  std::vector<std::string> all;
  for (const std::vector<std::string>& command : script.commands)
    all.insert(all.end(), command.begin(), command.end());
  return all;
}

Flags parse_flags(const std::vector<std::string>& words, const std::string& where) {
  Flags flags;
  std::string current;
  for (const std::string& w : words) {
    if (w.rfind("--", 0) == 0 && w.size() > 2) {
      const std::size_t eq = w.find('=');
      current = w.substr(0, eq);
      flags[current];  // later occurrences replace earlier ones, as argparse does
      flags[current].clear();
      if (eq != std::string::npos) flags[current].push_back(w.substr(eq + 1));
    } else if (!current.empty()) {
      flags[current].push_back(w);
    } else {
      throw InputError(where, w, "not a flag: Megatron-LM arguments are --flag [value]");
    }
  }
  return flags;
}

// Sliding-window attention: --window-size as Megatron's tuple_type reads it ("L,R" or "(L,R)"),
// the causal window (L, 0) a query's L earlier keys and itself, so sliding_window = L + 1
// (Megatron-Bridge's gpt-oss provider sets (sliding_window - 1, 0)); --window-attn-skip-freq as
// an integer N (every N-th layer full attention). Other windows and list patterns are refused.
void read_window(const FlagReader& f, ModelConfig& m) {
  if (!f.has("--window-size")) {
    if (f.has("--window-attn-skip-freq"))
      f.fail("--window-attn-skip-freq", "needs --window-size; add it or drop the flag");
    return;
  }
  const std::string text = f.text("--window-size", "");
  static const std::regex pattern(R"(\(?\s*(\d{1,7})\s*,\s*0\s*\)?)");
  std::smatch match;
  if (!std::regex_match(text, match, pattern))
    f.fail("--window-size", "'" + text +
                                "': braid models a causal window L,0 (L earlier keys); give it "
                                "as L,0");
  m.sliding_window = std::stoi(match[1].str()) + 1;
  if (f.has("--window-attn-skip-freq"))
    m.full_attention_every = f.positive("--window-attn-skip-freq");
}

ModelConfig model_of(const FlagReader& f, std::vector<std::string>& not_modelled) {
  ModelConfig m;
  // Named after the launch script (train_llama3_8b.sh -> train_llama3_8b), else "megatron".
  m.name =
      f.where().rfind("--", 0) == 0 ? "megatron" : std::filesystem::path(f.where()).stem().string();
  m.file = f.where();
  for (const detail::MegatronModelSize& size : detail::kMegatronModelSizes)
    m.*size.field = f.positive(size.flag);
  m.kv_heads = f.has("--group-query-attention") && f.has("--num-query-groups")
                   ? f.positive("--num-query-groups")
                   : m.heads;
  if (m.heads % m.kv_heads != 0)
    f.fail("--num-query-groups", std::to_string(m.kv_heads) + " does not divide " +
                                     "--num-attention-heads " + std::to_string(m.heads));
  if (f.has("--kv-channels")) {
    m.head_dim = f.positive("--kv-channels");
  } else if (m.hidden % m.heads == 0) {
    m.head_dim = m.hidden / m.heads;
  } else {
    f.fail("--num-attention-heads",
           "does not divide --hidden-size; give --kv-channels (Megatron asserts the same)");
  }
  const bool swiglu = f.has("--swiglu");
  if (swiglu && f.has("--squared-relu"))
    f.fail("--squared-relu", "and --swiglu both given; Megatron-LM takes one activation");
  m.activation = swiglu                    ? MlpActivation::SwiGLU
                 : f.has("--squared-relu") ? MlpActivation::SquaredReLU
                                           : MlpActivation::GeLU;
  // arguments.py: 4h, or for SwiGLU two thirds of it rounded down to a multiple of 64.
  m.ffn = f.has("--ffn-hidden-size") ? f.positive("--ffn-hidden-size")
          : swiglu                   ? (4 * m.hidden * 2 / 3) / 64 * 64
                                     : 4 * m.hidden;
  for (const detail::MegatronModelSwitch& s : detail::kMegatronModelSwitches)
    m.*s.field = f.has(s.flag) == s.given;
  const std::string position = f.has("--use-rotary-position-embeddings")
                                   ? "rope"
                                   : f.text("--position-embedding-type", "learned_absolute");
  if (position == "learned_absolute") {
    m.position = PositionEmbedding::Learned;
    m.max_positions = f.has("--max-position-embeddings") ? f.positive("--max-position-embeddings")
                                                         : f.positive("--seq-length");
  } else if (position == "rope" || position == "yarn") {
    m.position = PositionEmbedding::Rotary;
  } else {
    m.position = PositionEmbedding::Rotary;
    not_modelled.push_back("--position-embedding-type " + position);
  }
  // Megatron's defaults are 0.1 for both; braid's dropout is all or nothing.
  m.dropout = f.number("--hidden-dropout", 0.1) > 0 || f.number("--attention-dropout", 0.1) > 0;
  const std::string backend = f.text("--attention-backend", "auto");
  m.flash_attention = f.has("--use-flash-attn") || !(backend == "unfused" || backend == "local");
  if (!m.flash_attention) m.attention_impl = AttentionImpl::Unfused;
  // arguments.py: --normalization defaults to LayerNorm and linear layers carry biases unless
  // --disable-bias-linear, whatever the activation.
  const std::string norm = f.text("--normalization", "LayerNorm");
  if (norm == "RMSNorm") {
    m.norm = Normalization::RMSNorm;
  } else {
    m.norm = Normalization::LayerNorm;
    if (norm != "LayerNorm") not_modelled.push_back("--normalization " + norm);
  }
  m.linear_bias = !f.has("--disable-bias-linear");
  read_window(f, m);
  if (f.has("--vocab-size")) {
    m.vocab = f.positive("--vocab-size");
  } else if (const int v = tokenizer_vocab(
                 f.text("--tokenizer-type", f.has("--merge-file") ? "GPT2BPETokenizer" : ""));
             v > 0) {
    m.vocab = v;
  } else {
    f.fail("--vocab-size", "missing: the vocabulary of tokenizer '" +
                               f.text("--tokenizer-type", "(none given)") +
                               "' is in files braid does not read; add --vocab-size N");
  }
  return m;
}

// Megatron turns FP8 on with --fp8-format (e4m3 or hybrid; the format changes no time braid
// models) and picks Transformer Engine's recipe with --fp8-recipe, delayed by default
// (megatron/training/arguments.py; megatron/core/fp8_utils.py get_fp8_recipe maps delayed to
// DelayedScaling, tensorwise to Float8CurrentScaling, blockwise to Float8BlockScaling and mxfp8 to
// MXFP8BlockScaling). Without --fp8-format the recipe is ignored, as Megatron ignores it.
Precision fp8_precision(const FlagReader& f) {
  const std::string format = f.text("--fp8-format", "");
  if (format != "e4m3" && format != "hybrid")
    f.fail("--fp8-format", "'" + format + "': Megatron allows e4m3 or hybrid");
  const std::string recipe = f.text("--fp8-recipe", "delayed");
  if (recipe == "delayed") return Precision::Fp8Delayed;
  if (recipe == "tensorwise") return Precision::Fp8Current;
  if (recipe == "blockwise") return Precision::Fp8Blockwise;
  if (recipe == "mxfp8") return Precision::Mxfp8;
  f.fail("--fp8-recipe",
         "'" + recipe + "': Megatron allows delayed, tensorwise, blockwise or mxfp8");
}

// --moe-layer-freq as Megatron's moe_freq_type takes it: an integer N (layer l is MoE when
// l % N == 0), or the list expression ([0]*K+[1]*N) that launch scripts write for K dense layers
// first (DeepSeek-V3's form); other lists are refused.
void read_layer_freq(const FlagReader& f, const ModelConfig& m, MoeConfig& e) {
  if (!f.has("--moe-layer-freq")) return;  // every layer
  const std::string text = f.text("--moe-layer-freq", "1");
  static const std::regex pattern(R"(\(?\[0\]\*(\d{1,7})\+\[1\]\*(\d{1,7})\)?)");
  std::smatch match;
  if (std::regex_match(text, match, pattern)) {
    e.first_k_dense = std::stoi(match[1].str());
    if (e.first_k_dense + std::stoi(match[2].str()) != m.layers || e.first_k_dense >= m.layers)
      f.fail("--moe-layer-freq", "'" + text + "' does not list the " + std::to_string(m.layers) +
                                     " layers of --num-layers with at least one MoE layer");
    return;
  }
  e.layer_freq = f.positive("--moe-layer-freq");
}

// The MLA widths with Megatron's defaults (_add_mla_args): no q compression, kv_lora_rank 32,
// qk_head_dim 128, qk_pos_emb_head_dim 64, v_head_dim 128.
MlaConfig mla_of(const FlagReader& f) {
  MlaConfig a;
  a.q_lora_rank = f.has("--q-lora-rank") ? f.positive("--q-lora-rank") : 0;
  a.kv_lora_rank = f.has("--kv-lora-rank") ? f.positive("--kv-lora-rank") : 32;
  a.qk_head_dim = f.has("--qk-head-dim") ? f.positive("--qk-head-dim") : 128;
  a.qk_pos_emb_head_dim = f.has("--qk-pos-emb-head-dim") ? f.positive("--qk-pos-emb-head-dim") : 64;
  a.v_head_dim = f.has("--v-head-dim") ? f.positive("--v-head-dim") : 128;
  return a;
}

// The model's experts from --num-experts and the flags beside it (Megatron's defaults: top-2,
// expert width --ffn-hidden-size, every layer, softmax, dropless).
MoeConfig moe_of(const FlagReader& f, const ModelConfig& m) {
  MoeConfig e;
  e.experts = f.positive("--num-experts");
  e.top_k = f.has("--moe-router-topk") ? f.positive("--moe-router-topk") : 2;
  if (e.top_k > e.experts)
    f.fail("--moe-router-topk",
           std::to_string(e.top_k) + " is more than --num-experts " + std::to_string(e.experts));
  e.expert_ffn = f.has("--moe-ffn-hidden-size") ? f.positive("--moe-ffn-hidden-size") : m.ffn;
  e.shared_expert_ffn = e.expert_ffn;
  if (f.has("--moe-shared-expert-intermediate-size")) {
    // Megatron gives the shared experts' width together: one shared expert that wide.
    e.shared_experts = 1;
    e.shared_expert_ffn = f.positive("--moe-shared-expert-intermediate-size");
  }
  read_layer_freq(f, m, e);
  const std::string score = f.text("--moe-router-score-function", "softmax");
  const std::optional<RouterScore> router_score = parse_router_score(score);
  if (!router_score)
    f.fail("--moe-router-score-function", "'" + score + "': Megatron allows softmax or sigmoid");
  e.router_score = *router_score;
  if (f.has("--moe-router-num-groups") != f.has("--moe-router-group-topk"))
    f.fail("--moe-router-num-groups",
           "group-limited routing needs both --moe-router-num-groups and --moe-router-group-topk");
  if (f.has("--moe-router-num-groups")) {
    e.router_groups = f.positive("--moe-router-num-groups");
    e.router_group_top_k = f.positive("--moe-router-group-topk");
    if (e.experts % e.router_groups != 0 || e.router_group_top_k > e.router_groups)
      f.fail("--moe-router-num-groups",
             "must divide --num-experts and be at least --moe-router-group-topk");
  }
  if (f.has("--moe-expert-capacity-factor")) {
    const double factor = f.number("--moe-expert-capacity-factor", 0);
    if (!(factor > 0)) f.fail("--moe-expert-capacity-factor", "must be above 0");
    e.capacity_factor = factor;
  }
  e.pad_to_capacity = f.has("--moe-pad-expert-input-to-capacity");
  if (e.pad_to_capacity && !e.capacity_factor)
    f.fail("--moe-pad-expert-input-to-capacity", "needs --moe-expert-capacity-factor");
  // DeepEP: --moe-token-dispatcher-type flex with --moe-flex-dispatcher-backend deepep or the
  // deprecated --moe-enable-deepep (transformer_config.py __post_init__). allgather, also
  // Megatron's default when the flag is left out (transformer_config.py
  // moe_token_dispatcher_type), is the all-gather dispatcher; any other is costed as the
  // all-to-all one.
  const std::string type = f.text("--moe-token-dispatcher-type", "allgather");
  const std::string backend = f.text("--moe-flex-dispatcher-backend", "deepep");
  const bool deepep = f.has("--moe-enable-deepep") || f.has("--moe-flex-dispatcher-backend");
  if (f.has("--moe-enable-deepep") && type != "flex")
    f.fail("--moe-enable-deepep",
           "needs --moe-token-dispatcher-type flex (Megatron's rule); add it or drop the flag");
  if (type == "allgather")
    e.dispatcher = MoeDispatcher::AllGather;
  else if (type == "flex" && deepep && backend == "deepep")
    e.dispatcher = MoeDispatcher::DeepEp;
  return e;
}

}  // namespace

MegatronLaunch parse_megatron_args(const std::string& text, const std::string& where) {
  const FlagReader f(parse_flags(flag_words(detail::shell_commands(text, where)), where), where);
  MegatronLaunch out;
  StudyOverrides& o = out.overrides;
  if (std::any_of(std::begin(detail::kMegatronModelSizes), std::end(detail::kMegatronModelSizes),
                  [&](const detail::MegatronModelSize& size) { return f.has(size.flag); }))
    o.model_config = model_of(f, out.not_modelled);
  if (o.model_config && f.has("--num-experts")) o.model_config->moe = moe_of(f, *o.model_config);
  if (o.model_config && f.has("--multi-latent-attention")) {
    o.model_config->mla = mla_of(f);
    o.model_config->kv_heads = o.model_config->heads;  // one latent for every head
  }
  for (const detail::MegatronSize& size : detail::kMegatronSizes)
    if (f.has(size.flag)) o.*size.override = f.positive(size.flag);
  if (f.has("--global-batch-size")) o.global_batch = f.positive("--global-batch-size");
  if (f.has("--virtual-pipeline-model-parallel-size"))
    o.vpp = f.positive("--virtual-pipeline-model-parallel-size");
  if (f.has("--num-layers-per-virtual-pipeline-stage")) {
    const int per_chunk = f.positive("--num-layers-per-virtual-pipeline-stage");
    if (!o.model_config || !o.pp || o.model_config->layers % (*o.pp * per_chunk) != 0)
      f.fail("--num-layers-per-virtual-pipeline-stage",
             "needs --num-layers and --pipeline-model-parallel-size with num-layers a multiple "
             "of pp x " +
                 std::to_string(per_chunk));
    o.vpp = o.model_config->layers / (*o.pp * per_chunk);
  }
  // Expert parallelism (megatron/training/arguments.py, _add_distributed_args); Megatron's
  // default expert tensor size is the dense tp (validate_args), as a study's etp 0 is.
  if (f.has("--expert-model-parallel-size")) o.ep = f.positive("--expert-model-parallel-size");
  if (f.has("--expert-tensor-parallel-size")) o.etp = f.positive("--expert-tensor-parallel-size");
  if (f.has("--cp-comm-type")) {
    // Megatron takes one type, or one per layer (nargs '+'); braid models one for every layer.
    const std::string type = f.text("--cp-comm-type", "");
    o.cp_comm_type = parse_cp_comm_type(type);
    if (!o.cp_comm_type)
      f.fail("--cp-comm-type", "'" + type + "': Megatron allows p2p, a2a, allgather or a2a+p2p");
  }
  if (f.has("--hierarchical-context-parallel-sizes"))
    o.hierarchical_cp = f.positive_list("--hierarchical-context-parallel-sizes");
  const std::string granularity = f.text("--recompute-granularity", "");
  if (granularity == "full") {
    o.recompute = Recompute::Full;
    // braid recomputes every layer; Megatron's block method with fewer layers recomputes some.
    if (f.text("--recompute-method", "uniform") == "block" && f.has("--recompute-num-layers"))
      out.not_modelled.push_back("--recompute-method block --recompute-num-layers " +
                                 f.text("--recompute-num-layers", ""));
  } else if (granularity == "selective" || f.has("--recompute-activations")) {
    o.recompute = Recompute::Selective;
  } else if (!granularity.empty()) {
    f.fail("--recompute-granularity", "'" + granularity + "': Megatron allows full or selective");
  }
  for (const detail::MegatronSwitch& s : detail::kMegatronSwitches)
    if (f.has(s.flag)) o.*s.override = s.given;
  if (f.has("--fp8-format")) o.precision = fp8_precision(f);
  if (f.has("--wgrad-deferral-limit")) {
    // 0 (Megatron's default): every microbatch's LM-head weight gradient is deferred.
    const double limit = f.number("--wgrad-deferral-limit", 0);
    if (!(limit >= 0 && limit <= (1 << 20) && limit == static_cast<int>(limit)))
      f.fail("--wgrad-deferral-limit", "must be 0 (every microbatch) or a positive integer");
    o.wgrad_deferral_limit = static_cast<int>(limit);
  }
  // Flags neither used above nor known to set nothing braid simulates.
  for (const auto& [flag, values] : f.all()) {
    if (known_flags().count(flag) > 0) continue;
    if (o.model_config && o.model_config->moe && moe_flags().count(flag) > 0) continue;
    if (o.model_config && o.model_config->mla && mla_flags().count(flag) > 0) continue;
    std::string given = flag;
    for (const std::string& v : values) given += " " + v;
    out.not_modelled.push_back(given);
  }
  return out;
}

void merge_overrides(StudyOverrides& base, const StudyOverrides& top) {
  auto take = [](auto& into, const auto& from) {
    if (from) into = from;
  };
  take(base.model, top.model);
  take(base.cluster, top.cluster);
  take(base.tp, top.tp);
  take(base.pp, top.pp);
  take(base.vpp, top.vpp);
  take(base.seq, top.seq);
  take(base.mbs, top.mbs);
  take(base.nodes, top.nodes);
  take(base.sequence_parallel, top.sequence_parallel);
  take(base.recompute, top.recompute);
  take(base.cp_comm_type, top.cp_comm_type);
  take(base.ep, top.ep);
  take(base.etp, top.etp);
  take(base.hierarchical_cp, top.hierarchical_cp);
  take(base.precision, top.precision);
  take(base.vision_placement, top.vision_placement);
  take(base.balance, top.balance);
  take(base.layers_per_stage, top.layers_per_stage);
  take(base.offload, top.offload);
  take(base.distributed_optimizer, top.distributed_optimizer);
  take(base.overlap_grad_reduce, top.overlap_grad_reduce);
  take(base.overlap_param_gather, top.overlap_param_gather);
  take(base.p2p_scatter_gather, top.p2p_scatter_gather);
  take(base.p2p_batched, top.p2p_batched);
  take(base.overlap_p2p_comm, top.overlap_p2p_comm);
  take(base.gradient_accumulation_fusion, top.gradient_accumulation_fusion);
  take(base.tp_comm_overlap, top.tp_comm_overlap);
  take(base.moe_dispatcher, top.moe_dispatcher);
  take(base.moe_fp8_dispatch, top.moe_fp8_dispatch);
  take(base.moe_shared_expert_overlap, top.moe_shared_expert_overlap);
  take(base.defer_embedding_wgrad_compute, top.defer_embedding_wgrad_compute);
  take(base.wgrad_deferral_limit, top.wgrad_deferral_limit);
  take(base.fp8_param_gather, top.fp8_param_gather);
  // A model by name replaces one given whole, and microbatches a global batch, and back.
  if (top.model) base.model_config.reset();
  take(base.model_config, top.model_config);
  if (top.model_config) base.model.reset();
  if (top.microbatches) base.global_batch.reset();
  take(base.microbatches, top.microbatches);
  take(base.global_batch, top.global_batch);
  if (top.global_batch) base.microbatches.reset();
}

}  // namespace braid
