// Launch arguments out (launch_args.hpp): the round trip of the Megatron-LM flags (a study
// emitted, read back with parse_megatron_args onto the same study file, gives every field of the
// study back), the torchtitan mapping, and the CLI's --emit / --emit-file on simulate and search.
// The torchtitan fragment's golden is in tests/golden_test.cpp.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "braid/config.hpp"
#include "braid/error.hpp"
#include "braid/launch_args.hpp"
#include "cli_run.hpp"
#include "fixtures.hpp"

using namespace braid;
using braid::test::CliRun;
using braid::test::count_lines;
using braid::test::run_braid;

namespace {

// Every member of ModelConfig but where it came from (name, file): a new member must be compared
// here (the count below fails until it is).
void check_same_model(const ModelConfig& a, const ModelConfig& b) {
  static_assert(braid::test::member_count<ModelConfig>() == 24, "compare the new member below");
  CHECK(a.layers == b.layers);
  CHECK(a.hidden == b.hidden);
  CHECK(a.heads == b.heads);
  CHECK(a.kv_heads == b.kv_heads);
  CHECK(a.head_dim == b.head_dim);
  CHECK(a.ffn == b.ffn);
  CHECK(a.vocab == b.vocab);
  CHECK(a.tied_embeddings == b.tied_embeddings);
  CHECK(a.qkv_bias == b.qkv_bias);
  CHECK(a.activation == b.activation);
  CHECK(a.norm == b.norm);
  CHECK(a.linear_bias == b.linear_bias);
  CHECK(a.position == b.position);
  CHECK(a.max_positions == b.max_positions);
  CHECK(a.dropout == b.dropout);
  CHECK(a.flash_attention == b.flash_attention);
  CHECK(a.attention_impl == b.attention_impl);
  CHECK(a.sliding_window == b.sliding_window);
  CHECK(a.full_attention_every == b.full_attention_every);
  CHECK(a.vision.has_value() == b.vision.has_value());
  CHECK(a.moe == b.moe);
  CHECK(a.mla == b.mla);
}

// Every member of the study but the model's name and file.
void check_same_study(const Study& a, const Study& b) {
  static_assert(braid::test::member_count<Study>() == 8, "compare the new member below");
  CHECK(a.name == b.name);
  CHECK(a.file == b.file);
  check_same_model(a.model, b.model);
  CHECK(a.cluster.name == b.cluster.name);
  CHECK(a.cluster.nodes == b.cluster.nodes);
  CHECK(a.cluster.gpus_per_node == b.cluster.gpus_per_node);
  CHECK(a.cluster.profile == b.cluster.profile);
  CHECK(a.parallel == b.parallel);
  CHECK(a.training == b.training);
  CHECK(a.layout.vision_placement == b.layout.vision_placement);
  CHECK(a.layout.balance == b.layout.balance);
  CHECK(a.layout.layers_per_stage == b.layout.layers_per_stage);
  CHECK(a.schedules == b.schedules);
}

// The study file with `overrides`, emitted for 1f1b-i, read back onto the same file.
void check_round_trip(const std::string& study, const StudyOverrides& overrides = {}) {
  const std::filesystem::path file =
      study.find('/') == std::string::npos
          ? resolve_config("studies", study)
          : std::filesystem::path(BRAID_SOURCE_DIR) / "configs" / "studies" / (study + ".yaml");
  const Study s = load_study(file, overrides);
  const std::string flags = megatron_launch_args(s, {"1f1b-i", s.parallel.vpp});
  INFO(study << "\n" << flags);
  const MegatronLaunch read = parse_megatron_args(flags, "--megatron-args");
  CHECK(read.not_modelled.empty());
  StudyOverrides again = read.overrides;
  again.cluster = overrides.cluster;  // the cluster is the study's or --cluster, never a flag
  again.nodes = overrides.nodes;
  check_same_study(load_study(file, again), s);
}

}  // namespace

TEST_CASE("Megatron round trip: each study emitted and read back is the same study",
          "[launch-args]") {
  for (const char* study : {"default", "qwen2-7b-h20x16", "qwen2-26.3b-a800x32",
                            "megatron/gpt3-175b-full", "megatron/gpt3-175b-selective-sp",
                            "megatron/megatron-22b-full", "megatron/megatron-22b-selective-sp",
                            "megatron/turing-530b-full", "megatron/turing-530b-selective-sp",
                            "megatron/megatron-1t-full", "megatron/megatron-1t-selective-sp"})
    check_round_trip(study);
}

TEST_CASE("Megatron round trip: every switch on, GQA + SwiGLU + QKV bias, two-sample microbatches",
          "[launch-args]") {
  // qwen2-7b: GQA (4 KV heads), SwiGLU, RoPE, untied, QKV bias; dp 2 on h20x16.
  StudyOverrides o;
  o.sequence_parallel = true;
  o.recompute = Recompute::Full;
  o.overlap_grad_reduce = true;
  o.overlap_param_gather = true;
  o.gradient_accumulation_fusion = false;
  o.overlap_p2p_comm = false;  // --no-overlap-p2p-communication
  o.defer_embedding_wgrad_compute = true;
  o.wgrad_deferral_limit = 3;  // --wgrad-deferral-limit 3
  o.mbs = 2;
  o.microbatches = 8;
  o.vpp = 7;  // 28 layers on pp 2 x 7 chunks
  check_round_trip("qwen2-7b-h20x16", o);
  o.recompute = Recompute::Selective;
  o.cluster = "h100x64";  // 64 GPUs: tp 4 x pp 2, dp 8
  check_round_trip("qwen2-7b-h20x16", o);
  o.tp_comm_overlap = true;  // --tp-comm-overlap: SP on, tp 4 inside a node
  check_round_trip("qwen2-7b-h20x16", o);
  o.cp = 2;  // --context-parallel-size 2: dp 4
  check_round_trip("qwen2-7b-h20x16", o);
  // --cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 2: llama3.1-8b at tp 4 has 8
  // heads and 2 KV heads per rank for the a2a level of 2; cp 4 = 2 x 2, dp 2.
  StudyOverrides hcp = o;
  hcp.model = "llama3.1-8b";
  hcp.vpp = 8;  // 32 layers on pp 2 x 8 chunks
  hcp.cp = 4;
  hcp.cp_comm_type = CpCommType::A2AP2P;
  hcp.hierarchical_cp = std::vector<int>{2, 2};
  check_round_trip("qwen2-7b-h20x16", hcp);
  // Every FP8 recipe as --fp8-format + --fp8-recipe (tests/precision_test.cpp has the flags).
  for (Precision p :
       {Precision::Fp8Delayed, Precision::Fp8Current, Precision::Fp8Blockwise, Precision::Mxfp8}) {
    o.precision = p;
    check_round_trip("qwen2-7b-h20x16", o);
  }
}

TEST_CASE("Megatron round trip: Hugging Face models with their own head size and tied embeddings",
          "[launch-args]") {
  StudyOverrides o{.tp = 4, .pp = 2, .microbatches = 4};
  // Gemma 2 9B: head_dim 256, not 3584 / 16 (--kv-channels); Llama 3.2 1B: tied, no QKV bias.
  for (const char* model : {"gemma-2-9b", "llama-3.2-1b"}) {
    o.model = std::string(kHfModelPrefix) + BRAID_SOURCE_DIR + "/tests/data/hf/" + model;
    check_round_trip("default", o);
  }
}

TEST_CASE("Megatron round trip: MoE models' experts, shared experts, dense layers and routing",
          "[launch-args][moe]") {
  StudyOverrides o{.model = "mixtral-8x7b"};
  check_round_trip("default", o);  // tp 8 x pp 2 on a800x16
  // Every MoE field Megatron can say: a shared expert, 2 dense layers first, sigmoid, 4 groups
  // (top 2), capacity factor 1.25 with the experts' inputs padded to it, the DeepEP dispatcher.
  const std::string moe_file = (braid::test::scratch_dir() / "moe-all.yaml").string();
  std::ofstream(moe_file) << "name: moe-all\nlayers: 8\nhidden: 1024\nheads: 16\nkv_heads: 8\n"
                             "ffn: 4096\nvocab: 32000\nmoe:\n  experts: 16\n  top_k: 4\n"
                             "  expert_ffn: 512\n  shared_experts: 1\n  shared_expert_ffn: 1024\n"
                             "  first_k_dense: 2\n  router_score: sigmoid\n  router_groups: 4\n"
                             "  router_group_top_k: 2\n  capacity_factor: 1.25\n"
                             "  pad_to_capacity: true\n  dispatcher: deepep\n";
  o.model = moe_file;
  check_round_trip("default", o);
  // The all-to-all and all-gather dispatchers are written by name: Megatron's default is
  // allgather, so leaving the flag out would change the dispatcher.
  for (const char* dispatcher : {"alltoall", "allgather"}) {
    const std::string file = (braid::test::scratch_dir() / "moe-dispatcher.yaml").string();
    std::ofstream(file) << "name: moe-dispatcher\nlayers: 8\nhidden: 1024\nheads: 16\n"
                           "ffn: 4096\nvocab: 32000\nmoe:\n  experts: 16\n  top_k: 4\n"
                           "  expert_ffn: 512\n  dispatcher: "
                        << dispatcher << "\n";
    o.model = file;
    check_round_trip("default", o);
    const Study s = load_study(resolve_config("studies", "default"), o);
    CHECK_THAT(megatron_launch_args(s, {"1f1b", 1}),
               Catch::Contains(std::string("--moe-token-dispatcher-type ") + dispatcher + " \\\n"));
  }
}

TEST_CASE("Megatron round trip: multi-head latent attention's widths", "[launch-args][mla]") {
  // With q compression (DeepSeek-V3's widths on a small model) and without (q_lora_rank 0,
  // Megatron's default None, so no --q-lora-rank is written).
  const std::string head =
      "name: mla-all\nlayers: 8\nhidden: 1024\nheads: 16\nffn: 4096\n"
      "vocab: 32000\nmla:\n";
  const std::string widths =
      "  kv_lora_rank: 512\n  qk_head_dim: 128\n  qk_pos_emb_head_dim: 64\n  v_head_dim: 128\n";
  const std::string compressed = (braid::test::scratch_dir() / "mla-q.yaml").string();
  std::ofstream(compressed) << head << "  q_lora_rank: 1536\n" << widths;
  StudyOverrides o{.model = compressed};
  check_round_trip("default", o);
  const std::string plain = (braid::test::scratch_dir() / "mla-plain.yaml").string();
  std::ofstream(plain) << head << widths;
  o.model = plain;
  check_round_trip("default", o);
  const Study s = load_study(resolve_config("studies", "default"), o);
  const std::string flags = megatron_launch_args(s, {"1f1b-i", 1});
  for (const char* line :
       {"--multi-latent-attention \\\n", "--kv-lora-rank 512 \\\n", "--qk-head-dim 128 \\\n",
        "--qk-pos-emb-head-dim 64 \\\n", "--v-head-dim 128 \\\n"})
    CHECK_THAT(flags, Catch::Contains(line));
  CHECK_THAT(flags, !Catch::Contains("--q-lora-rank"));
}

TEST_CASE("Megatron flags: one per line, comments first, what Megatron cannot run noted",
          "[launch-args]") {
  const Study s = load_study(resolve_config("studies", "qwen2-7b-h20x16"));
  const std::string zb = megatron_launch_args(s, {"zb-v", 2});
  // Comments, then ` \`-continued flags; the last flag ends the command.
  CHECK_THAT(zb, Catch::StartsWith("# braid: Megatron-LM pretrain_gpt.py arguments of study "
                                   "qwen2-7b-h20x16, model qwen2-7b, schedule zb-v"));
  CHECK_THAT(zb, Catch::Contains("# schedule zb-v is not expressible: Megatron-LM runs 1F1B"));
  CHECK_THAT(zb, Catch::Contains("\n    --num-layers 28 \\\n    --hidden-size 3584 \\\n"));
  CHECK_THAT(zb, Catch::Contains("    --group-query-attention \\\n    --num-query-groups 4 \\\n"));
  CHECK_THAT(zb, Catch::EndsWith("    --use-distributed-optimizer \\\n    --bf16\n"));
  CHECK(zb.find("    --virtual-pipeline") == std::string::npos);  // V schedules are not interleaved
  const std::string i = megatron_launch_args(s, {"1f1b-i", 2});
  CHECK_THAT(i, Catch::Contains("    --virtual-pipeline-model-parallel-size 2 \\\n"));
  CHECK(i.find("not expressible") == std::string::npos);
  // 32 microbatches x 1 sample x dp 2.
  CHECK_THAT(i, Catch::Contains("    --global-batch-size 64 \\\n"));
}

TEST_CASE("torchtitan fragment: schedule names, batch sizes, checkpoint mode, what does not map",
          "[launch-args]") {
  StudyOverrides o;
  o.recompute = Recompute::Selective;
  o.sequence_parallel = true;
  const Study s = load_study(resolve_config("studies", "qwen2-7b-h20x16"), o);
  const std::string t = torchtitan_toml(s, {"1f1b-i", 2});
  CHECK_THAT(t, Catch::Contains("pipeline_parallel_schedule = \"Interleaved1F1B\"\n"));
  CHECK_THAT(t, Catch::Contains("pipeline_parallel_layers_per_stage = 7\n"));  // 28 / (2 x 2)
  // 32 microbatches of 1 sample per replica; dp 2.
  CHECK_THAT(t, Catch::Contains("local_batch_size = 32\nglobal_batch_size = 64\n"));
  CHECK_THAT(t, Catch::Contains("[activation_checkpoint]\nmode = \"selective\"\n"));
  CHECK(t.find("sequence parallelism off") == std::string::npos);
  CHECK_THAT(torchtitan_toml(s, {"1f1b", 1}), Catch::Contains("= \"1F1B\"\n"));
  CHECK_THAT(torchtitan_toml(s, {"gpipe", 1}), Catch::Contains("= \"GPipe\"\n"));
  CHECK_THAT(torchtitan_toml(s, {"dualpipe-v", 2}), Catch::Contains("= \"DualPipeV\"\n"));
  const std::string stp = torchtitan_toml(s, {"stp", 2});
  CHECK_THAT(stp, Catch::Contains("# schedule stp is not expressible: torchtitan has no such"));
  CHECK(stp.find("pipeline_parallel_schedule") == std::string::npos);
  CHECK(stp.find("pipeline_parallel_layers_per_stage") == std::string::npos);  // 7 would be wrong
  CHECK(t.find("context_parallel_degree") == std::string::npos);  // cp 1: torchtitan's default
  o.cluster = "h100x64";
  o.cp = 4;
  CHECK_THAT(
      torchtitan_toml(load_study(resolve_config("studies", "qwen2-7b-h20x16"), o), {"1f1b-i", 2}),
      Catch::Contains("context_parallel_degree = 4\n"));
  CHECK(t.find("tp_comm_overlap") == std::string::npos);
  o.tp_comm_overlap = true;
  CHECK_THAT(
      torchtitan_toml(load_study(resolve_config("studies", "qwen2-7b-h20x16"), o), {"1f1b-i", 2}),
      Catch::Contains("# tp_comm_overlap (Transformer Engine's userbuffers) is not expressible"));
  CHECK(launch_format_names() == std::vector<std::string>{"megatron", "torchtitan"});
  CHECK(parse_launch_format("torchtitan") == LaunchFormat::Torchtitan);
  CHECK_FALSE(parse_launch_format("nemo"));
}

TEST_CASE("braid simulate --emit megatron: the flags read back simulate the same iteration",
          "[launch-args][cli]") {
  const std::filesystem::path dir = braid::test::scratch_dir() / "emit";
  std::filesystem::create_directories(dir);
  const std::string flags = (dir / "flags.sh").string();
  const std::string run =
      "simulate --study qwen2-7b-h20x16 --schedule 1f1b-i --microbatches 8 --sp on ";
  const CliRun printed = run_braid(run + "--emit megatron");
  REQUIRE(printed.exit_code == 0);
  const CliRun json = run_braid(run + "--json --emit megatron --emit-file " + flags);
  REQUIRE(json.exit_code == 0);
  CHECK(json.err.empty());
  const std::string fragment = braid::test::slurp(flags);
  // Printed after the report, a blank line before it; the same text as the file.
  CHECK_THAT(printed.out, Catch::EndsWith("\n\n" + fragment));
  const CliRun back = run_braid(
      "simulate --study qwen2-7b-h20x16 --schedule 1f1b-i "
      "--json --megatron-args-file " +
      flags);
  REQUIRE(back.exit_code == 0);
  CHECK(back.err.empty());  // nothing not modelled
  // The same report but the model's name ("flags" after the script, "qwen2-7b" before).
  const auto without_names = [](std::string text) {
    for (const std::string& name : {std::string("\"flags\""), std::string("\"qwen2-7b\"")})
      for (std::size_t at = text.find(name); at != std::string::npos; at = text.find(name))
        text.erase(at, name.size());
    return text;
  };
  CHECK(without_names(back.out) == without_names(json.out));
}

TEST_CASE(
    "braid search --emit writes the best layout's flags, bad values fail in one line (exit 2)",
    "[launch-args][cli]") {
  const std::filesystem::path dir = braid::test::scratch_dir() / "emit-search";
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "best.sh").string();
  const CliRun r = run_braid(
      "search --study default --gpus 16 --global-batch 16 --mbs 1 --schedules 1f1b-i,stp "
      "--emit megatron --emit-file " +
      file);
  REQUIRE(r.exit_code == 0);
  const std::string flags = braid::test::slurp(file);
  CHECK_THAT(flags, Catch::Contains("--global-batch-size 16 \\\n"));
  CHECK(parse_megatron_args(flags, "best.sh").overrides.global_batch == 16);
  CHECK(r.out.find("--num-layers") == std::string::npos);  // in the file, not on stdout
  // Nothing fits a 1 GiB cap: a warning, and no file.
  const std::string none = (dir / "none.sh").string();
  const CliRun nothing = run_braid(
      "search --study default --gpus 16 --global-batch 16 --mbs 1 --schedules 1f1b-i "
      "--mem-cap 1 --emit megatron --emit-file " +
      none);
  REQUIRE(nothing.exit_code == 0);
  CHECK(nothing.err == "braid: warning: --emit megatron: no layout fits, nothing emitted\n");
  CHECK_FALSE(std::filesystem::exists(none));

  const CliRun bad = run_braid("simulate --schedule stp --emit nemo");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err ==
        "braid: --emit: nemo not in {megatron,torchtitan} (see braid simulate --help)\n");
  const CliRun json = run_braid("search --gpus 16 --global-batch 16 --json --emit torchtitan");
  CHECK(json.exit_code == 2);
  CHECK(count_lines(json.err) == 1);
  CHECK_THAT(json.err, Catch::Contains("--emit: torchtitan: with --json give --emit-file FILE"));
  const CliRun uniform = run_braid(
      "simulate --unit-costs 1,1,1,0 --pp 4 --microbatches 8 "
      "--schedule 1f1b --emit megatron");
  CHECK(uniform.exit_code == 2);
  CHECK_THAT(uniform.err, Catch::Contains("--emit: megatron: needs a study"));
}

TEST_CASE("Megatron round trip: an MoE model with expert parallelism keeps ep and etp",
          "[launch-args][moe]") {
  // mixtral-8x7b on the default study's a800x16 (16 GPUs, tp 8, pp 2): ep 2 with etp 1, then
  // tp 2 and ep 4 with etp left to the dense tp (not written: Megatron's default).
  StudyOverrides o;
  o.model = "mixtral-8x7b";
  o.ep = 2;
  o.etp = 1;
  check_round_trip("default", o);
  const Study s = load_study(resolve_config("studies", "default"), o);
  const std::string flags = megatron_launch_args(s, {"1f1b-i", s.parallel.vpp});
  CHECK_THAT(flags, Catch::Contains("--expert-model-parallel-size 2"));
  CHECK_THAT(flags, Catch::Contains("--expert-tensor-parallel-size 1"));
  o.tp = 2;
  o.ep = 4;
  o.etp.reset();
  check_round_trip("default", o);
  // A dense study writes neither flag.
  const Study dense = load_study(resolve_config("studies", "default"));
  CHECK_THAT(megatron_launch_args(dense, {"1f1b-i", dense.parallel.vpp}),
             !Catch::Contains("--expert-"));
}
