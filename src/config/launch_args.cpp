// A study's layout as Megatron-LM flags or a torchtitan TOML fragment (launch_args.hpp). The
// Megatron flags are those parse_megatron_args reads (megatron_flags.hpp holds the ones shared
// with it); torchtitan's field names are those of torchtitan/config/job_config.py.
#include "braid/launch_args.hpp"

#include <sstream>
#include <string>
#include <vector>

#include "megatron_flags.hpp"

namespace braid {

namespace {

// The lines of a fragment: `#` comments first (a comment inside a ` \` continuation would end
// the command), then the settings.
struct Fragment {
  std::vector<std::string> comments, lines;
  void note(const std::string& text) { comments.push_back("# " + text); }
};

std::string gpus_text(const Study& s) {
  return s.cluster.name + ", " + std::to_string(s.cluster.nodes) + " nodes x " +
         std::to_string(s.cluster.gpus_per_node) + " GPUs";
}

int global_batch(const Study& s) {
  return s.training.micro_batch_size * s.parallel.dp * s.training.microbatches;
}

// What the study sets that neither trainer takes: the same lines in both fragments.
void common_notes(const Study& s, Fragment& f) {
  if (s.model.vision)
    f.note("the ViT of " + s.model.name + " (depth " + std::to_string(s.model.vision->depth) +
           ") is not expressible: these settings train the language model alone");
  if (!s.layout.layers_per_stage.empty()) {
    std::string list;
    for (const int n : s.layout.layers_per_stage)
      list += (list.empty() ? "" : ",") + std::to_string(n);
    f.note("layers per virtual stage " + list + " (braid) are not expressible: split uniformly");
  } else if (s.layout.balance == StageBalance::Cost) {
    f.note("balance: cost (braid's split by stage time) is not expressible: split uniformly");
  }
  if (s.training.offload > 0)
    f.note("activation offload of " + std::to_string(s.training.offload) +
           " of the microbatches (braid) is not expressible");
  if (s.training.dtype_bytes != 2)
    f.note("activations of " + std::to_string(s.training.dtype_bytes) +
           " bytes (braid) are not expressible: bf16 is written");
}

// --- Megatron-LM -------------------------------------------------------------------------------

void flag(Fragment& f, const std::string& name, const std::string& value = "") {
  f.lines.push_back(value.empty() ? name : name + " " + value);
}

// The experts as moe_of (megatron_args.cpp) reads them back.
void megatron_experts(const ModelConfig& m, Fragment& f) {
  if (!m.moe) return;
  const MoeConfig& e = *m.moe;
  flag(f, "--num-experts", std::to_string(e.experts));
  flag(f, "--moe-router-topk", std::to_string(e.top_k));
  flag(f, "--moe-ffn-hidden-size", std::to_string(e.expert_ffn));
  if (e.shared_experts > 0)
    flag(f, "--moe-shared-expert-intermediate-size",
         std::to_string(e.shared_experts * e.shared_expert_ffn));
  if (e.first_k_dense > 0 && e.layer_freq == 1)
    flag(f, "--moe-layer-freq",
         "\"([0]*" + std::to_string(e.first_k_dense) + "+[1]*" +
             std::to_string(m.layers - e.first_k_dense) + ")\"");
  else if (e.first_k_dense > 0)
    f.note("MoE layers: first " + std::to_string(e.first_k_dense) + " dense, then every " +
           std::to_string(e.layer_freq) + " (braid) are not expressible: every layer is written");
  else if (e.layer_freq > 1)
    flag(f, "--moe-layer-freq", std::to_string(e.layer_freq));
  flag(f, "--moe-router-score-function", name(e.router_score));
  if (e.router_groups > 0) {
    flag(f, "--moe-router-num-groups", std::to_string(e.router_groups));
    flag(f, "--moe-router-group-topk", std::to_string(e.router_group_top_k));
  }
  if (e.capacity_factor) {
    std::ostringstream factor;
    factor << *e.capacity_factor;
    flag(f, "--moe-expert-capacity-factor", factor.str());
  }
  if (e.pad_to_capacity) flag(f, "--moe-pad-expert-input-to-capacity");
  // DeepEP: the flex dispatcher with its deepep backend (transformer_config.py,
  // moe_flex_dispatcher_backend; the older --moe-enable-deepep is deprecated there). The other
  // two are always written: Megatron's default is allgather.
  if (e.dispatcher == MoeDispatcher::DeepEp) {
    flag(f, "--moe-token-dispatcher-type", "flex");
    flag(f, "--moe-flex-dispatcher-backend", "deepep");
  } else {
    flag(f, "--moe-token-dispatcher-type", name(e.dispatcher));
  }
  if (e.fp8_dispatch)
    f.note("fp8_dispatch (braid) is not expressible: Megatron-LM's DeepEP path dispatches bf16");
}

// Multi-head latent attention as mla_of (megatron_args.cpp) reads it back; q_lora_rank 0 is
// Megatron's default (None), so it is left out.
void megatron_mla(const ModelConfig& m, Fragment& f) {
  if (!m.mla) return;
  const MlaConfig& a = *m.mla;
  flag(f, "--multi-latent-attention");
  if (a.q_lora_rank > 0) flag(f, "--q-lora-rank", std::to_string(a.q_lora_rank));
  flag(f, "--kv-lora-rank", std::to_string(a.kv_lora_rank));
  flag(f, "--qk-head-dim", std::to_string(a.qk_head_dim));
  flag(f, "--qk-pos-emb-head-dim", std::to_string(a.qk_pos_emb_head_dim));
  flag(f, "--v-head-dim", std::to_string(a.v_head_dim));
}

void megatron_model(const Study& s, Fragment& f) {
  const ModelConfig& m = s.model;
  for (const detail::MegatronModelSize& size : detail::kMegatronModelSizes)
    flag(f, size.flag, std::to_string(m.*size.field));
  if (m.kv_heads != m.heads) {
    flag(f, "--group-query-attention");
    flag(f, "--num-query-groups", std::to_string(m.kv_heads));
  }
  if (m.hidden % m.heads != 0 || m.head_dim != m.hidden / m.heads)
    flag(f, "--kv-channels", std::to_string(m.head_dim));
  flag(f, "--ffn-hidden-size", std::to_string(m.ffn));
  flag(f, "--vocab-size", std::to_string(m.vocab));
  const bool learned = m.position == PositionEmbedding::Learned;
  flag(f, "--position-embedding-type", learned ? "learned_absolute" : "rope");
  // Megatron requires it for every position embedding; rotary tables only need the sequence.
  flag(f, "--max-position-embeddings", std::to_string(learned ? m.max_positions : s.training.seq));
  if (m.activation == MlpActivation::SwiGLU) flag(f, "--swiglu");
  if (m.activation == MlpActivation::SquaredReLU) flag(f, "--squared-relu");
  flag(f, "--normalization", m.norm == Normalization::RMSNorm ? "RMSNorm" : "LayerNorm");
  if (!m.linear_bias) flag(f, "--disable-bias-linear");
  for (const detail::MegatronModelSwitch& sw : detail::kMegatronModelSwitches)
    if (m.*sw.field == sw.given) flag(f, sw.flag);
  // Megatron's default dropout is 0.1; braid's is on or off.
  const char* dropout = m.dropout ? "0.1" : "0.0";
  flag(f, "--attention-dropout", dropout);
  flag(f, "--hidden-dropout", dropout);
  if (!m.flash_attention) {
    flag(f, "--attention-backend", "unfused");
  } else if (m.attention_impl == AttentionImpl::Default) {
    flag(f, "--attention-backend", "auto");
  } else {
    const bool cudnn = m.attention_impl == AttentionImpl::Cudnn;
    flag(f, "--attention-backend", cudnn ? "fused" : "flash");
    f.note(std::string("attention_impl ") + name(m.attention_impl) + ": --attention-backend " +
           (cudnn ? "fused" : "flash") + " (Megatron-LM picks the installed kernel's version)");
  }
  // Sliding-window attention as read_window (megatron_args.cpp) reads it back.
  if (m.sliding_window > 0) {
    flag(f, "--window-size", std::to_string(m.sliding_window - 1) + ",0");
    if (m.full_attention_every > 0)
      flag(f, "--window-attn-skip-freq", std::to_string(m.full_attention_every));
  }
  megatron_experts(m, f);
  megatron_mla(m, f);
}

void megatron_schedule(const Study& s, const LaunchSchedule& schedule, Fragment& f) {
  // combined-1f1b: Megatron's schedules with the EP all-to-all overlap
  // (--overlap-moe-expert-parallel-comm, pipeline_parallel/combined_1f1b.py), interleaved when the
  // rank holds more than one chunk (always when pp > 1: the generator refuses one).
  const bool combined = schedule.name == "combined-1f1b";
  if (combined) flag(f, "--overlap-moe-expert-parallel-comm");
  if ((schedule.name == "1f1b-i" || combined) && schedule.chunks_per_rank > 1)
    flag(f, "--virtual-pipeline-model-parallel-size", std::to_string(schedule.chunks_per_rank));
  else if (s.parallel.pp > 1 && schedule.name != "1f1b" && schedule.name != "1f1b-i" && !combined)
    f.note("schedule " + schedule.name +
           " is not expressible: Megatron-LM runs 1F1B (interleaved with "
           "--virtual-pipeline-model-parallel-size)");
}

// FP8 on top of --bf16 (Megatron keeps bf16 for everything outside the linear layers' GEMMs):
// --fp8-recipe as Megatron names Transformer Engine's recipes (megatron/core/fp8_utils.py
// get_fp8_recipe), --fp8-format as each recipe's default in TE (common/recipe/__init__.py:
// HYBRID for DelayedScaling and Float8CurrentScaling, E4M3 for the block-scaled ones).
void megatron_fp8(Precision precision, Fragment& f) {
  const char* recipe = precision == Precision::Fp8Delayed     ? "delayed"
                       : precision == Precision::Fp8Current   ? "tensorwise"
                       : precision == Precision::Fp8Blockwise ? "blockwise"
                       : precision == Precision::Mxfp8        ? "mxfp8"
                                                              : nullptr;
  if (recipe == nullptr) return;  // bf16
  const bool hybrid = precision == Precision::Fp8Delayed || precision == Precision::Fp8Current;
  flag(f, "--fp8-format", hybrid ? "hybrid" : "e4m3");
  flag(f, "--fp8-recipe", recipe);
}

void megatron_training(const Study& s, Fragment& f) {
  const TrainingConfig& t = s.training;
  flag(f, "--global-batch-size", std::to_string(global_batch(s)));
  for (const detail::MegatronSwitch& sw : detail::kMegatronSwitches)
    if (sw.of(s) == sw.given) flag(f, sw.flag);
  if (t.recompute == Recompute::Selective) {
    flag(f, "--recompute-granularity", "selective");
  } else if (t.recompute == Recompute::Full) {
    // braid recomputes every layer: uniform, one layer per checkpoint.
    flag(f, "--recompute-granularity", "full");
    flag(f, "--recompute-method", "uniform");
    flag(f, "--recompute-num-layers", "1");
  }
  if (t.defer_embedding_wgrad_compute && t.wgrad_deferral_limit > 0)
    flag(f, "--wgrad-deferral-limit", std::to_string(t.wgrad_deferral_limit));
  flag(f, "--bf16");
  megatron_fp8(t.precision, f);
  if (t.bucket_params > 0)
    f.note("gradient buckets of " + std::to_string(static_cast<long long>(t.bucket_params)) +
           " parameters: Megatron-LM's --ddp-bucket-size (braid reads no such flag)");
  if (!t.p2p_scatter_gather)
    f.note("p2p_scatter_gather: false (braid) is not expressible in the flags braid reads");
  if (!t.p2p_batched)
    f.note("p2p_batched: false (braid) is not expressible in the flags braid reads");
}

// --- torchtitan --------------------------------------------------------------------------------

// torch.distributed.pipelining's schedule names (get_schedule_class) for braid's, or "".
std::string torchtitan_schedule(const LaunchSchedule& schedule) {
  if (schedule.name == "1f1b") return "1F1B";
  if (schedule.name == "1f1b-i") return schedule.chunks_per_rank > 1 ? "Interleaved1F1B" : "1F1B";
  if (schedule.name == "gpipe") return "GPipe";
  if (schedule.name == "zb-v") return "ZBVZeroBubble";
  if (schedule.name == "dualpipe-v") return "DualPipeV";
  return "";
}

void setting(Fragment& f, const std::string& key, const std::string& value) {
  f.lines.push_back(key + " = " + value);
}
std::string quoted(const std::string& text) { return "\"" + text + "\""; }

void torchtitan_parallelism(const Study& s, const LaunchSchedule& schedule, Fragment& f) {
  const ParallelConfig& p = s.parallel;
  f.lines.emplace_back("[parallelism]");
  // FSDP (data_parallel_shard_degree) shards the weights too; plain replication is DDP.
  const bool shard = s.training.distributed_optimizer;
  setting(f, "data_parallel_replicate_degree", std::to_string(shard ? 1 : p.dp));
  setting(f, "data_parallel_shard_degree", std::to_string(shard ? p.dp : 1));
  if (shard && p.dp > 1)
    f.note(
        "distributed optimizer (ZeRO-1 in braid) is written as FSDP, which shards the weights "
        "and gradients too");
  setting(f, "tensor_parallel_degree", std::to_string(p.tp));
  if (p.tp > 1 && !p.sequence_parallel)
    f.note(
        "sequence parallelism off (braid): torchtitan's tensor parallelism always shards the "
        "norms by sequence");
  if (s.training.tp_comm_overlap)
    f.note(
        "tp_comm_overlap (Transformer Engine's userbuffers) is not expressible: torchtitan runs "
        "no Transformer Engine");
  // torchtitan's context parallelism (job_config.py Parallelism.context_parallel_degree).
  if (p.cp > 1) setting(f, "context_parallel_degree", std::to_string(p.cp));
  setting(f, "pipeline_parallel_degree", std::to_string(p.pp));
  if (p.pp > 1) {
    const std::string name = torchtitan_schedule(schedule);
    if (name.empty())
      f.note("schedule " + schedule.name + " is not expressible: torchtitan has no such schedule");
    else
      setting(f, "pipeline_parallel_schedule", quoted(name));
    // Without the schedule torchtitan runs its default, 1F1B: one stage per rank, its own split.
    const int stages = p.pp * schedule.chunks_per_rank;
    if (!name.empty() && s.model.layers % stages == 0)
      setting(f, "pipeline_parallel_layers_per_stage", std::to_string(s.model.layers / stages));
    setting(f, "pipeline_parallel_microbatch_size", std::to_string(s.training.micro_batch_size));
  }
  f.lines.emplace_back("");
}

void torchtitan_training(const Study& s, Fragment& f) {
  const TrainingConfig& t = s.training;
  f.lines.emplace_back("[training]");
  setting(f, "seq_len", std::to_string(t.seq));
  // With a pipeline the local batch holds every microbatch of an iteration; without one each
  // microbatch is a step of gradient accumulation (global / (local x dp) of them).
  const int local = s.parallel.pp > 1 ? t.micro_batch_size * t.microbatches : t.micro_batch_size;
  setting(f, "local_batch_size", std::to_string(local));
  setting(f, "global_batch_size", std::to_string(global_batch(s)));
  setting(f, "mixed_precision_param", quoted("bfloat16"));
  if (t.precision != Precision::Bf16)
    f.note(std::string("precision ") + name(t.precision) +
           " (braid) is not written: torchtitan's float8 converter is not Transformer Engine's "
           "recipe");
  f.lines.emplace_back("");
  f.lines.emplace_back("[activation_checkpoint]");
  setting(f, "mode", quoted(name(t.recompute)));
  // Op-level selective checkpointing is torchtitan's nearest to Megatron's selective rerun of
  // the core attention (it also saves or reruns some matmuls by its own policy).
  if (t.recompute == Recompute::Selective) setting(f, "selective_ac_option", quoted("op"));
}

}  // namespace

const std::vector<std::string>& launch_format_names() {
  static const std::vector<std::string> names = {"megatron", "torchtitan"};
  return names;
}

std::optional<LaunchFormat> parse_launch_format(std::string_view text) {
  if (text == "megatron") return LaunchFormat::Megatron;
  if (text == "torchtitan") return LaunchFormat::Torchtitan;
  return std::nullopt;
}

std::string megatron_launch_args(const Study& study, const LaunchSchedule& schedule) {
  Fragment f;
  f.note("braid: Megatron-LM pretrain_gpt.py arguments of study " + study.name + ", model " +
         study.model.name + ", schedule " + schedule.name + " (docs/megatron.md)");
  f.note("run on " + gpus_text(study) + ": torchrun --nnodes " +
         std::to_string(study.cluster.nodes) + " --nproc-per-node " +
         std::to_string(study.cluster.gpus_per_node) + " pretrain_gpt.py <these flags>");
  f.note("add the tokenizer and data flags; --vocab-size is the model's vocabulary");
  common_notes(study, f);
  megatron_model(study, f);
  for (const detail::MegatronSize& size : detail::kMegatronSizes)
    flag(f, size.flag, std::to_string(size.of(study)));
  // Megatron's default is p2p; the other type is written only when it is chosen.
  if (study.parallel.cp > 1 && study.parallel.cp_comm_type != CpCommType::P2P)
    flag(f, "--cp-comm-type", name(study.parallel.cp_comm_type));
  // Expert parallelism: written for an MoE model when it differs from Megatron's default (ep 1,
  // etp the dense tp), so a dense launch reads as before.
  if (study.model.moe && study.parallel.ep > 1)
    flag(f, "--expert-model-parallel-size", std::to_string(study.parallel.ep));
  if (study.model.moe && study.parallel.etp > 0)
    flag(f, "--expert-tensor-parallel-size", std::to_string(study.parallel.etp));
  if (study.parallel.cp > 1 && study.parallel.cp_comm_type == CpCommType::A2AP2P) {
    std::string sizes;
    for (const int n : study.parallel.hierarchical_cp)
      sizes += (sizes.empty() ? "" : " ") + std::to_string(n);
    flag(f, "--hierarchical-context-parallel-sizes", sizes);
  }
  megatron_schedule(study, schedule, f);
  megatron_training(study, f);
  std::ostringstream out;
  for (const std::string& c : f.comments) out << c << "\n";
  for (std::size_t i = 0; i < f.lines.size(); ++i)
    out << "    " << f.lines[i] << (i + 1 < f.lines.size() ? " \\\n" : "\n");
  return out.str();
}

std::string torchtitan_toml(const Study& study, const LaunchSchedule& schedule) {
  Fragment f;
  f.note("braid: torchtitan job config of study " + study.name + ", schedule " + schedule.name +
         " (field names: torchtitan/config/job_config.py; docs/megatron.md)");
  f.note("run on " + gpus_text(study) + " (NGPU=" + std::to_string(study.cluster.gpus_per_node) +
         " per node)");
  const ModelConfig& m = study.model;
  f.note("[model]: the torchtitan flavor of " + m.name + ": " + std::to_string(m.layers) +
         " layers, hidden " + std::to_string(m.hidden) + ", heads " + std::to_string(m.heads) +
         ", kv heads " + std::to_string(m.kv_heads) + ", ffn " + std::to_string(m.ffn) +
         ", vocab " + std::to_string(m.vocab));
  common_notes(study, f);
  torchtitan_parallelism(study, schedule, f);
  torchtitan_training(study, f);
  std::ostringstream out;
  for (const std::string& c : f.comments) out << c << "\n";
  out << "\n";
  for (const std::string& line : f.lines) out << line << "\n";
  return out.str();
}

std::string launch_fragment(LaunchFormat format, const Study& study,
                            const LaunchSchedule& schedule) {
  return format == LaunchFormat::Megatron ? megatron_launch_args(study, schedule)
                                          : torchtitan_toml(study, schedule);
}

}  // namespace braid
