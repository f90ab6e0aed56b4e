// Megatron-LM arguments (config.hpp: parse_megatron_args, merge_overrides): one test per flag
// group (sizes, model form, parallelism, batch, memory and overlap, precision), the shell reading
// of launch scripts, two real launch scripts of Megatron-LM's examples read end to end
// (tests/data/megatron, sources in tests/data/README.md), and the CLI's --megatron-args(-file),
// warning line and --strict.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/error.hpp"
#include "cli_run.hpp"
#include "fixtures.hpp"

using namespace braid;
using braid::test::CliRun;
using braid::test::count_lines;
using braid::test::run_braid;

namespace {

MegatronLaunch args(const std::string& text) {
  return parse_megatron_args(text, "--megatron-args");
}

std::string args_error(const std::string& text) {
  return braid::test::input_error_of([&] { args(text); });
}

std::string script(const std::string& name) {
  return braid::test::slurp(std::string(BRAID_SOURCE_DIR) + "/tests/data/megatron/" + name);
}

const char* kGpt = "--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 ";

}  // namespace

TEST_CASE("Megatron sizes: a GPT model with Megatron's defaults", "[megatron-args]") {
  const MegatronLaunch l = args(std::string(kGpt) + "--tokenizer-type GPT2BPETokenizer");
  REQUIRE(l.overrides.model_config);
  const ModelConfig& m = *l.overrides.model_config;
  // No --group-query-attention (kv heads = heads), kv_channels = hidden / heads, FFN 4 x hidden,
  // GPT-2's BPE vocabulary.
  CHECK(test::sizes_of(m) == test::ModelSizes{24, 2048, 16, 16, 128, 8192, 50257});
  CHECK(m.activation == MlpActivation::GeLU);       // no --swiglu
  CHECK(m.position == PositionEmbedding::Learned);  // learned_absolute
  CHECK(m.max_positions == 2048);  // --seq-length when no --max-position-embeddings
  CHECK(m.tied_embeddings);        // no --untie-embeddings-and-output-weights
  CHECK(m.dropout);                // hidden and attention dropout default 0.1
  CHECK(m.flash_attention);        // --attention-backend auto
  CHECK(l.overrides.seq == 2048);
  CHECK(l.not_modelled.empty());
  CHECK(args_error(std::string(kGpt) + "--tokenizer-type HuggingFaceTokenizer") ==
        "--megatron-args: --vocab-size: missing: the vocabulary of tokenizer "
        "'HuggingFaceTokenizer' is in files braid does not read; add --vocab-size N");
  CHECK(args_error("--num-layers 24 --hidden-size 2048 --vocab-size 100") ==
        "--megatron-args: --num-attention-heads: missing; a model needs --num-layers, "
        "--hidden-size, --num-attention-heads");
}

TEST_CASE("Megatron model form: SwiGLU, GQA, RoPE, RMSNorm, untied, QKV bias", "[megatron-args]") {
  const MegatronLaunch l =
      args(std::string(kGpt) +
           "--vocab-size 32000 --swiglu --group-query-attention --num-query-groups 4 "
           "--position-embedding-type rope --normalization RMSNorm --disable-bias-linear "
           "--add-qkv-bias --untie-embeddings-and-output-weights --attention-dropout 0 "
           "--hidden-dropout 0.0 --attention-backend unfused");
  const ModelConfig& m = *l.overrides.model_config;
  CHECK(m.activation == MlpActivation::SwiGLU);
  CHECK(m.ffn == 5440);  // arguments.py: int((4 x 2048 x 2 / 3) / 64) x 64
  CHECK(m.kv_heads == 4);
  CHECK(m.position == PositionEmbedding::Rotary);
  CHECK_FALSE(m.tied_embeddings);
  CHECK(m.qkv_bias);
  CHECK_FALSE(m.dropout);
  CHECK_FALSE(m.flash_attention);
  CHECK(m.norm == Normalization::RMSNorm);
  CHECK_FALSE(m.linear_bias);
  CHECK(l.not_modelled.empty());
  // arguments.py's defaults whatever the activation: LayerNorm, biases on every linear layer.
  const MegatronLaunch mixed = args(std::string(kGpt) + "--vocab-size 32000 --swiglu");
  CHECK(mixed.overrides.model_config->norm == Normalization::LayerNorm);
  CHECK(mixed.overrides.model_config->linear_bias);
  CHECK(mixed.not_modelled.empty());
  // Nemotron-4's MLP: --squared-relu, not gated; with --swiglu as well it is refused.
  const MegatronLaunch squared = args(std::string(kGpt) + "--vocab-size 32000 --squared-relu");
  CHECK(squared.overrides.model_config->activation == MlpActivation::SquaredReLU);
  CHECK(squared.overrides.model_config->ffn == 4 * 2048);
  CHECK_THAT(args_error(std::string(kGpt) + "--vocab-size 32000 --squared-relu --swiglu"),
             Catch::Contains("--squared-relu: and --swiglu both given"));
}

TEST_CASE("Megatron parallelism: tp, pp, virtual stages, SP, cp, ep and etp read",
          "[megatron-args]") {
  const MegatronLaunch l =
      args(std::string(kGpt) +
           "--vocab-size 100 --tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 "
           "--num-layers-per-virtual-pipeline-stage 3 --sequence-parallel "
           "--context-parallel-size 2 --expert-model-parallel-size 2");
  CHECK(l.overrides.tp == 4);
  CHECK(l.overrides.cp == 2);
  CHECK(l.overrides.pp == 2);
  CHECK(l.overrides.vpp == 4);  // 24 layers / (2 x 3)
  CHECK(l.overrides.sequence_parallel == true);
  CHECK(l.overrides.ep == 2);
  CHECK_FALSE(l.overrides.etp.has_value());  // Megatron's default: the dense tp
  CHECK(l.not_modelled.empty());
  CHECK(args("--expert-tensor-parallel-size 1").overrides.etp == 1);
  CHECK(args("--virtual-pipeline-model-parallel-size 3").overrides.vpp == 3);
  CHECK_FALSE(l.overrides.cp_comm_type.has_value());  // Megatron's default, p2p, is the study's
  CHECK(args("--cp-comm-type allgather").overrides.cp_comm_type == CpCommType::AllGather);
  CHECK(args_error("--cp-comm-type ring") ==
        "--megatron-args: --cp-comm-type: 'ring': Megatron allows p2p, a2a, allgather or a2a+p2p");
  // a2a+p2p's two levels (nargs '+' in Megatron; the study's validation wants two).
  const MegatronLaunch h = args("--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 4");
  CHECK(h.overrides.cp_comm_type == CpCommType::A2AP2P);
  CHECK(h.overrides.hierarchical_cp == std::vector<int>{2, 4});
  CHECK(h.not_modelled.empty());
  CHECK(args_error("--hierarchical-context-parallel-sizes 2 x") ==
        "--megatron-args: --hierarchical-context-parallel-sizes: must be positive integers, got "
        "'x'");
  CHECK_THAT(args_error(std::string(kGpt) + "--vocab-size 100 --pipeline-model-parallel-size 2 "
                                            "--num-layers-per-virtual-pipeline-stage 5"),
             Catch::StartsWith("--megatron-args: --num-layers-per-virtual-pipeline-stage: needs"));
}

TEST_CASE("Megatron MLA flags: --multi-latent-attention and its widths are the model's",
          "[megatron-args][mla]") {
  // DeepSeek-V3's attention (Megatron-LM's MLA arguments, _add_mla_args) on a small model.
  const MegatronLaunch l = args(std::string(kGpt) +
                                "--vocab-size 100 --multi-latent-attention --q-lora-rank 1536 "
                                "--kv-lora-rank 512 --qk-head-dim 128 --qk-pos-emb-head-dim 64 "
                                "--v-head-dim 128");
  REQUIRE(l.overrides.model_config);
  REQUIRE(l.overrides.model_config->mla);
  CHECK(*l.overrides.model_config->mla == MlaConfig{1536, 512, 128, 64, 128});
  CHECK(l.overrides.model_config->kv_heads == l.overrides.model_config->heads);
  CHECK(l.not_modelled.empty());
  // Megatron's defaults: no q compression, kv_lora_rank 32, 128 / 64 / 128.
  const MegatronLaunch d = args(std::string(kGpt) + "--vocab-size 100 --multi-latent-attention");
  REQUIRE(d.overrides.model_config->mla);
  CHECK(*d.overrides.model_config->mla == MlaConfig{0, 32, 128, 64, 128});
  // Without the switch the widths configure nothing Megatron builds: listed, not read.
  const MegatronLaunch n = args(std::string(kGpt) + "--vocab-size 100 --kv-lora-rank 512");
  CHECK_FALSE(n.overrides.model_config->mla);
  CHECK(n.not_modelled == std::vector<std::string>{"--kv-lora-rank 512"});
}

TEST_CASE(
    "Megatron window flags: --window-size L,0 is a window of L + 1 keys, skip freq its full "
    "layers",
    "[megatron-args][window]") {
  // gpt-oss as Megatron-Bridge's provider sets it: window_size (127, 0), window_attn_skip_freq 2.
  const MegatronLaunch l =
      args(std::string(kGpt) + "--vocab-size 100 --window-size 127,0 --window-attn-skip-freq 2");
  REQUIRE(l.overrides.model_config);
  CHECK(l.overrides.model_config->sliding_window == 128);
  CHECK(l.overrides.model_config->full_attention_every == 2);
  CHECK(l.not_modelled.empty());
  // tuple_type also takes the parenthesised form; without the skip freq every layer is windowed.
  const MegatronLaunch every =
      args(std::string(kGpt) + "--vocab-size 100 --window-size \"(4095,0)\"");
  CHECK(every.overrides.model_config->sliding_window == 4096);
  CHECK(every.overrides.model_config->full_attention_every == 0);
  // A window that looks ahead is not causal: refused, naming the flag.
  try {
    args(std::string(kGpt) + "--vocab-size 100 --window-size 127,127");
    FAIL("a two-sided window was accepted");
  } catch (const InputError& e) {
    CHECK(e.field == "--window-size");
  }
}

TEST_CASE("Megatron MoE flags: experts, top-k, widths, dense layers, routing are the model's",
          "[megatron-args][moe]") {
  // Megatron-LM's Mixtral 8x7B settings (megatron/core/transformer/moe/README.md) with
  // DeepSeek-style extras: a shared expert, one dense layer first, sigmoid group routing.
  const MegatronLaunch l = args(
      "--num-layers 4 --hidden-size 4096 --num-attention-heads 32 --group-query-attention "
      "--num-query-groups 8 --ffn-hidden-size 14336 --swiglu --normalization RMSNorm "
      "--disable-bias-linear --vocab-size 32000 --seq-length 4096 --num-experts 8 "
      "--moe-router-topk 2 "
      "--moe-ffn-hidden-size 1024 --moe-shared-expert-intermediate-size 2048 "
      "--moe-layer-freq \"([0]*1+[1]*3)\" --moe-router-score-function sigmoid "
      "--moe-router-num-groups 4 --moe-router-group-topk 2 --moe-expert-capacity-factor 1.5 "
      "--moe-pad-expert-input-to-capacity --expert-model-parallel-size 8 --moe-grouped-gemm");
  REQUIRE(l.overrides.model_config);
  REQUIRE(l.overrides.model_config->moe);
  const MoeConfig& e = *l.overrides.model_config->moe;
  CHECK(e.experts == 8);
  CHECK(e.top_k == 2);
  CHECK(e.expert_ffn == 1024);
  CHECK(e.shared_experts == 1);
  CHECK(e.shared_expert_ffn == 2048);
  CHECK(e.first_k_dense == 1);
  CHECK(e.layer_freq == 1);
  CHECK(e.router_score == RouterScore::Sigmoid);
  CHECK(e.router_groups == 4);
  CHECK(e.router_group_top_k == 2);
  CHECK(e.capacity_factor == 1.5);
  CHECK(e.pad_to_capacity);
  // Read, so no longer listed; the grouped GEMM switch is not read (braid times the experts as
  // one grouped GEMM either way).
  CHECK(l.overrides.ep == 8);
  CHECK(l.not_modelled == std::vector<std::string>{"--moe-grouped-gemm"});
  // Megatron's defaults: top-2, experts as wide as --ffn-hidden-size, every layer, softmax.
  const MegatronLaunch d = args(std::string(kGpt) + "--vocab-size 100 --num-experts 4");
  REQUIRE(d.overrides.model_config->moe);
  CHECK(d.overrides.model_config->moe->top_k == 2);
  CHECK(d.overrides.model_config->moe->expert_ffn == 8192);
  CHECK(d.overrides.model_config->moe->router_score == RouterScore::Softmax);
  CHECK(args(std::string(kGpt) + "--vocab-size 100 --num-experts 4 --moe-layer-freq 2")
            .overrides.model_config->moe->layer_freq == 2);
  CHECK(args_error(std::string(kGpt) + "--vocab-size 100 --num-experts 4 --moe-router-topk 5") ==
        "--megatron-args: --moe-router-topk: 5 is more than --num-experts 4");
  CHECK(args_error(std::string(kGpt) + "--vocab-size 100 --num-experts 4 --moe-layer-freq "
                                       "'([0]*2+[1]*2)'") ==
        "--megatron-args: --moe-layer-freq: '([0]*2+[1]*2)' does not list the 24 layers of "
        "--num-layers with at least one MoE layer");
  // Without the model's sizes the experts have no model to join: listed, not dropped.
  CHECK(args("--num-experts 8").not_modelled == std::vector<std::string>{"--num-experts 8"});
}

TEST_CASE("Megatron MoE flags: the flex dispatcher with DeepEP is dispatcher deepep",
          "[megatron-args][moe][a2a]") {
  const std::string moe = std::string(kGpt) + "--vocab-size 100 --num-experts 4 ";
  auto dispatcher = [&](const std::string& flags) {
    return args(moe + flags).overrides.model_config->moe->dispatcher;
  };
  // Megatron's default is the all-gather dispatcher (transformer_config.py).
  CHECK(dispatcher("") == MoeDispatcher::AllGather);
  CHECK(dispatcher("--moe-token-dispatcher-type allgather") == MoeDispatcher::AllGather);
  CHECK(dispatcher("--moe-token-dispatcher-type alltoall") == MoeDispatcher::AllToAll);
  CHECK(dispatcher("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep") ==
        MoeDispatcher::DeepEp);
  CHECK(dispatcher("--moe-token-dispatcher-type flex --moe-enable-deepep") ==
        MoeDispatcher::DeepEp);
  // Another flex backend (HybridEP) is costed as the all-to-all dispatcher.
  CHECK(dispatcher("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep") ==
        MoeDispatcher::AllToAll);
  CHECK(args(moe + "--moe-token-dispatcher-type flex --moe-enable-deepep").not_modelled.empty());
  CHECK(args_error(moe + "--moe-enable-deepep") ==
        "--megatron-args: --moe-enable-deepep: needs --moe-token-dispatcher-type flex (Megatron's "
        "rule); add it or drop the flag");
}

TEST_CASE("Megatron batch: the global batch gives the microbatches per replica",
          "[megatron-args]") {
  // The default study: a800x16 (16 GPUs), tp 8, pp 2 -> dp 1.
  StudyOverrides o = args("--micro-batch-size 2 --global-batch-size 64").overrides;
  CHECK(o.mbs == 2);
  CHECK(o.global_batch == 64);
  CHECK(load_study(resolve_config("studies", "default"), o).training.microbatches == 32);
  o.tp = 4;  // dp 2: 64 / (2 x 2)
  CHECK(load_study(resolve_config("studies", "default"), o).training.microbatches == 16);
  o.global_batch = 30;
  CHECK_THROWS_WITH(load_study(resolve_config("studies", "default"), o),
                    "--global-batch-size: 30: is not a multiple of micro-batch size x dp = 2 x 2 "
                    "on cluster a800x16 (16 GPUs)");
}

TEST_CASE("Megatron memory and overlap switches", "[megatron-args]") {
  const StudyOverrides o =
      args(
          "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 "
          "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
          "--no-gradient-accumulation-fusion")
          .overrides;
  CHECK(o.recompute == Recompute::Full);
  CHECK(o.distributed_optimizer == true);
  CHECK(o.overlap_grad_reduce == true);
  CHECK(o.overlap_param_gather == true);
  CHECK(o.gradient_accumulation_fusion == false);
  CHECK(args("--recompute-activations").overrides.recompute == Recompute::Selective);
  CHECK(args("--recompute-granularity selective").overrides.recompute == Recompute::Selective);
  CHECK(args("--recompute-granularity full --recompute-method block --recompute-num-layers 2")
            .not_modelled ==
        std::vector<std::string>{"--recompute-method block --recompute-num-layers 2"});
  // TE's userbuffers overlap is modelled (docs/cost-model.md); its per-GEMM YAML is not read.
  CHECK(args("--tp-comm-overlap").overrides.tp_comm_overlap == true);
  CHECK(args("--tp-comm-overlap").not_modelled.empty());
  CHECK_FALSE(args("--sequence-parallel").overrides.tp_comm_overlap.has_value());
  // Megatron-Core's shared-expert overlap is modelled (docs/moe.md, "Shared-expert overlap").
  CHECK(args("--moe-shared-expert-overlap").overrides.moe_shared_expert_overlap == true);
  CHECK(args("--moe-shared-expert-overlap").not_modelled.empty());
  CHECK_FALSE(args("--sequence-parallel").overrides.moe_shared_expert_overlap.has_value());
}

TEST_CASE("Megatron precision and unknown flags: bf16 and fp8 are braid's, the unknown listed",
          "[megatron-args]") {
  CHECK(args("--bf16 --lr 1e-4 --train-iters 10 --save /x").not_modelled.empty());
  const MegatronLaunch fp8 = args("--fp8-format hybrid --fp8-amax-history-len 1024 --frobnicate 3");
  CHECK(fp8.overrides.precision == Precision::Fp8Delayed);  // tests/precision_test.cpp: recipes
  CHECK(fp8.not_modelled == std::vector<std::string>{"--frobnicate 3"});
  CHECK(args_error("32 --num-layers 2") ==
        "--megatron-args: 32: not a flag: Megatron-LM arguments are --flag [value]");
  CHECK(args_error("--micro-batch-size two") ==
        "--megatron-args: --micro-batch-size: must be a positive integer, got 'two'");
}

TEST_CASE("launch scripts: continuation lines, variables, arithmetic, arrays and if/else",
          "[megatron-args]") {
  const std::string sh =
      "#!/bin/bash\n"
      "TP=4   # tensor parallel\n"
      "NODES=2\n"
      "GPUS=$((TP*NODES))\n"
      "MODE=${MODE:-\"small\"}\n"
      "ARGS=(\n  --tensor-model-parallel-size $TP\n)\n"
      "if [[ \"$MODE\" == \"small\" ]]; then\n  ARGS+=(--micro-batch-size ${GPUS})\n"
      "else\n  ARGS+=(--micro-batch-size 1)\nfi\n"
      "if [ ! -f \"$X\" ]; then\n  exit 1\nfi\n"
      "torchrun --nnodes $NODES pretrain_gpt.py \\\n    ${ARGS[@]} \\\n"
      "    --global-batch-size '64'\n";
  const StudyOverrides o = parse_megatron_args(sh, "train.sh").overrides;
  CHECK(o.tp == 4);
  CHECK(o.mbs == 8);  // $((4*2)), from the taken branch
  CHECK(o.global_batch == 64);
  CHECK_FALSE(o.model_config);  // no sizes: the study's model stays
}

TEST_CASE("Megatron-LM's GPT-3 175B launch script reads end to end", "[megatron-args]") {
  const MegatronLaunch l =
      parse_megatron_args(script("train_gpt3_175b_distributed.sh"), "train_gpt3_175b.sh");
  CHECK(l.not_modelled.empty());
  REQUIRE(l.overrides.model_config);
  const ModelConfig& m = *l.overrides.model_config;
  // configs/models/gpt3-175b.yaml but for the vocabulary (GPT-2's 50257 here, padded 51200
  // there) and the attention kernel (auto: fused; the 2021 runs: unfused).
  const ModelConfig ref = load_model(resolve_config("models", "gpt3-175b"));
  test::ModelSizes sizes = test::sizes_of(ref);
  sizes.vocab = 50257;
  CHECK(test::sizes_of(m) == sizes);
  CHECK(m.activation == ref.activation);
  CHECK(m.position == ref.position);
  CHECK(m.max_positions == ref.max_positions);
  CHECK(m.tied_embeddings == ref.tied_embeddings);
  CHECK(m.dropout == ref.dropout);
  CHECK(count_parameters(m).total == Approx(175e9).epsilon(0.005));
  StudyOverrides o = l.overrides;
  o.cluster = "a100-selene";  // 512 GPUs: tp 8 x pp 16 leaves dp 4
  const Study s = load_study(resolve_config("studies", "default"), o);
  CHECK(s.parallel.tp == 8);
  CHECK(s.parallel.pp == 16);
  CHECK(s.parallel.dp == 4);
  CHECK(s.training.seq == 2048);
  CHECK(s.training.micro_batch_size == 1);
  CHECK(s.training.microbatches == 384);  // 1536 / (1 x 4)
}

TEST_CASE("Megatron-LM's Llama 3 8B FP8 launch script reads end to end", "[megatron-args]") {
  const MegatronLaunch l =
      parse_megatron_args(script("train_llama3_8b_h100_fp8.sh"), "train_llama3_8b.sh");
  REQUIRE(l.overrides.model_config);
  const ModelConfig& m = *l.overrides.model_config;
  // The vocabulary of the mock-data branch: NullTokenizer with --vocab-size.
  CHECK(test::sizes_of(m) == test::ModelSizes{32, 4096, 32, 8, 128, 14336, 128256});
  CHECK(m.activation == MlpActivation::SwiGLU);
  CHECK(m.position == PositionEmbedding::Rotary);
  CHECK_FALSE(m.tied_embeddings);
  CHECK_FALSE(m.dropout);
  // Llama 3 8B: 8.03 B (Meta's model card), its Hugging Face config's 8,030,261,248 plus a bias
  // per norm: the script gives no --normalization, so Megatron-LM runs its default LayerNorm
  // (65 norms x 4096 more).
  CHECK(m.norm == Normalization::LayerNorm);
  CHECK_FALSE(m.linear_bias);
  CHECK(count_parameters(m).total == 8'030'261'248 + 65 * 4096);
  const StudyOverrides& o = l.overrides;
  CHECK(o.tp == 1);
  CHECK_FALSE(o.pp);  // commented out in the script
  CHECK(o.seq == 8192);
  CHECK(o.mbs == 1);
  CHECK(o.global_batch == 128);
  CHECK(o.sequence_parallel == true);
  CHECK(o.distributed_optimizer == true);
  CHECK(o.overlap_grad_reduce == true);
  CHECK(o.overlap_param_gather == true);
  CHECK(o.precision == Precision::Fp8Delayed);  // --fp8-format hybrid, the default recipe
  CHECK(o.fp8_param_gather == true);
  CHECK(l.not_modelled ==
        std::vector<std::string>{"--cross-entropy-loss-fusion", "--grad-reduce-in-bf16"});
}

TEST_CASE("the command line beats Megatron-LM arguments, field by field", "[megatron-args]") {
  StudyOverrides base = args("--tensor-model-parallel-size 8 --global-batch-size 64").overrides;
  StudyOverrides top;
  top.tp = 2;
  top.microbatches = 5;
  merge_overrides(base, top);
  CHECK(base.tp == 2);
  CHECK(base.microbatches == 5);
  CHECK_FALSE(base.global_batch);  // --microbatches replaces the global batch
}

TEST_CASE("braid simulate --megatron-args-file warns in one line, --strict refuses",
          "[megatron-args][cli]") {
  const std::string file = "tests/data/megatron/train_llama3_8b_h100_fp8.sh";
  const CliRun r = run_braid("simulate --megatron-args-file " + file +
                             " --cluster h100x64 --pp 2 --schedule 1f1b-i");
  REQUIRE(r.exit_code == 0);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err == "braid: warning: " + file +
                     ": not modelled, ignored: "
                     "--cross-entropy-loss-fusion, --grad-reduce-in-bf16\n");
  CHECK_THAT(r.out, Catch::Contains("tp 1, pp 2, dp 32"));
  const CliRun strict = run_braid("simulate --megatron-args-file " + file +
                                  " --cluster h100x64 --pp 2 --schedule 1f1b-i --strict");
  CHECK(strict.exit_code == 2);
  CHECK(count_lines(strict.err) == 1);
  CHECK_THAT(strict.err, Catch::Contains("not modelled: --cross-entropy-loss-fusion"));
  const CliRun inline_args = run_braid(
      "info --megatron-args \"--tensor-model-parallel-size 4 --micro-batch-size 1 "
      "--global-batch-size 32\"");
  REQUIRE(inline_args.exit_code == 0);
  CHECK(inline_args.err.empty());
}
