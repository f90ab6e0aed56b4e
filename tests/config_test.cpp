// Config and profile loading: every shipped file loads, parameter counts match the model names,
// and every kind of bad input is one InputError naming the file, the field and what is allowed.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "../src/util/yaml_reader.hpp"

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/error.hpp"
#include "braid/profile.hpp"
#include "fixtures.hpp"

using namespace braid;
namespace fs = std::filesystem;

namespace {

const fs::path kRoot = BRAID_SOURCE_DIR;

// A scratch directory per test run for bad-input files.
fs::path scratch(const std::string& name, const std::string& text) {
  fs::path file = test::scratch_dir() / name;
  std::ofstream(file) << text;
  return file;
}

// Runs `f`, expects an InputError and returns it.
template <typename F>
InputError input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e;
  }
  FAIL("expected an InputError");
  return InputError("", "", "");
}

const char* kModel7b = R"(name: m
layers: 28
hidden: 3584
heads: 28
kv_heads: 4
head_dim: 128
ffn: 18944
vocab: 152064
qkv_bias: true
)";

std::string study_text(const std::string& model, const std::string& extra_parallel = "",
                       const std::string& extra_training = "") {
  return "name: s\nmodel: " + model + "\ncluster: a800x16\nparallel:\n  tp: 4\n  pp: 2\n" +
         extra_parallel + "training:\n  seq: 4096\n  microbatches: 8\n" + extra_training;
}

}  // namespace

TEST_CASE("every shipped model, cluster, study and profile loads", "[config]") {
  // Each folder counted on its own: an empty or moved folder fails instead of passing empty.
  int models = 0, clusters = 0, profiles = 0, studies = 0;
  for (const auto& e : fs::directory_iterator(kRoot / "configs/models")) {
    ModelConfig m = load_model(e.path());
    CHECK(m.name == e.path().stem().string());
    ++models;
  }
  for (const auto& e : fs::directory_iterator(kRoot / "configs/clusters")) {
    ClusterConfig c = load_cluster(e.path());
    CHECK(c.name == e.path().stem().string());
    Profile p = load_profile(c.profile);
    CHECK_NOTHROW(p.link(c.intra_node.name));
    CHECK_NOTHROW(p.link(c.inter_node.name));
    ++clusters;
  }
  for (const auto& e : fs::directory_iterator(kRoot / "profiles")) {
    Profile p = load_profile(e.path());
    CHECK(p.source == Source::SpecDerived);
    CHECK(p.peak_flops > 0);
    ++profiles;
  }
  // Studies, including configs/studies/megatron/ and the paper grid's configs/studies/paper/.
  for (const auto& e : fs::recursive_directory_iterator(kRoot / "configs/studies")) {
    if (!e.is_regular_file()) continue;
    Study s = load_study(e.path());
    CHECK(s.parallel.dp * s.parallel.tp * s.parallel.cp * s.parallel.pp == s.cluster.gpus());
    CHECK_FALSE(s.schedules.empty());
    ++studies;
  }
  CHECK(models >= 6);
  CHECK(clusters >= 5);
  CHECK(profiles >= 4);
  CHECK(studies >= 2);
}

TEST_CASE("the default study is Qwen2-12.1B on a800x16 with TP 8, PP 2, seq 6144, 64 mbs",
          "[config]") {
  Study s = load_study(resolve_config("studies", "default"));
  CHECK(s.model.name == "qwen2-12.1b");
  CHECK(s.cluster.name == "a800x16");
  CHECK(s.parallel.tp == 8);
  CHECK(s.parallel.pp == 2);
  CHECK(s.parallel.dp == 1);
  CHECK(s.training.seq == 6144);
  CHECK(s.training.micro_batch_size == 1);
  CHECK(s.training.microbatches == 64);
  CHECK(s.schedules ==
        std::vector<std::string>{"1f1b-i", "zb-v", "stp", "stp-offload", "dualpipe-v"});
}

TEST_CASE("Qwen2-7B and Qwen2-72B parameter counts match the published 7.62 B and 72.71 B",
          "[config][params]") {
  ParameterCount p7 = count_parameters(load_model(resolve_config("models", "qwen2-7b")));
  CHECK(p7.total == Approx(7.62e9).epsilon(0.005));
  CHECK(p7.per_layer == 233'057'792);  // by hand: q/k/v/o + biases + SwiGLU + 2 RMSNorms
  ParameterCount p72 = count_parameters(load_model(resolve_config("models", "qwen2-72b")));
  CHECK(p72.total == Approx(72.71e9).epsilon(0.005));
  CHECK(p72.per_layer == 877'684'736);
}

TEST_CASE("the STP paper's models match their names within 1.5 % under the stated convention",
          "[config][params]") {
  auto params = [](const char* name) {
    return count_parameters(load_model(resolve_config("models", name)));
  };
  CHECK(params("qwen2-12.1b").total == Approx(12.1e9).epsilon(0.015));  // all parameters
  CHECK(params("qwen2-26.3b").non_embedding == Approx(26.3e9).epsilon(0.015));
  CHECK(params("qwen2-vl-14.9b").non_embedding == Approx(14.9e9).epsilon(0.015));
  CHECK(params("qwen2-vl-28.8b").non_embedding == Approx(28.8e9).epsilon(0.015));
  // The Qwen2-VL ViT: ~675 M with a 3584-wide merger (reference C.2), 699.4 M with 8192.
  CHECK(params("qwen2-vl-28.8b").vision == 699'356'672);
}

TEST_CASE("command-line overrides replace study fields and DP is what remains", "[config]") {
  StudyOverrides o = test::layout_overrides("qwen2-7b", "h100x64", 4, 4, 4096, true);
  o.mbs = 2;
  o.microbatches = 128;
  Study s = load_study(resolve_config("studies", "default"), o);
  CHECK(s.model.name == "qwen2-7b");
  CHECK(s.cluster.gpus() == 64);
  CHECK(s.parallel.dp == 4);
  CHECK(s.training.micro_batch_size == 2);
  CHECK(s.parallel.sequence_parallel);
  o.nodes = 2;
  CHECK(load_study(resolve_config("studies", "default"), o).parallel.dp == 1);
}

TEST_CASE("unknown names list the known ones", "[config][errors]") {
  StudyOverrides o;
  o.model = "qwen3-7b";
  InputError e = input_error([&] { load_study(resolve_config("studies", "default"), o); });
  CHECK(e.where == "--model");
  CHECK_THAT(e.problem, Catch::Contains("unknown model 'qwen3-7b'") &&
                            Catch::Contains("qwen2-7b") && Catch::Contains("qwen2-72b"));

  e = input_error([] { load_study(scratch("s.yaml", study_text("nope"))); });
  CHECK(e.field == "model");
  CHECK_THAT(e.where, Catch::EndsWith("s.yaml"));

  e = input_error([] { load_profile("b200"); });
  CHECK_THAT(e.problem, Catch::Contains("a800") && Catch::Contains("h200"));
  e = input_error([] { resolve_config("studies", "nope"); });
  CHECK(e.where == "--study");
}

TEST_CASE("an unknown key (a typo) is an error listing the allowed keys", "[config][errors]") {
  std::string text = kModel7b;
  text += "hiden: 4096\n";
  InputError e = input_error([&] { load_model(scratch("typo.yaml", text)); });
  CHECK(e.field == "hiden");
  CHECK_THAT(e.problem, Catch::Contains("unknown field") && Catch::Contains("hidden"));

  e = input_error(
      [] { load_study(scratch("s.yaml", study_text("qwen2-7b", "  sequence_paralel: true\n"))); });
  CHECK(e.field == "parallel.sequence_paralel");
}

TEST_CASE("missing, mistyped, zero and negative fields are errors", "[config][errors]") {
  std::string no_ffn = kModel7b;
  no_ffn.replace(no_ffn.find("ffn: 18944\n"), 11, "");
  InputError e = input_error([&] { load_model(scratch("m.yaml", no_ffn)); });
  CHECK(e.field == "ffn");
  CHECK_THAT(e.problem, Catch::Contains("missing"));

  std::string typed = kModel7b;
  typed.replace(typed.find("layers: 28"), 10, "layers: many");
  e = input_error([&] { load_model(scratch("m.yaml", typed)); });
  CHECK(e.field == "layers");
  CHECK_THAT(e.problem, Catch::Contains("'many'"));

  std::string zero = kModel7b;
  zero.replace(zero.find("hidden: 3584"), 12, "hidden: 0");
  e = input_error([&] { load_model(scratch("m.yaml", zero)); });
  CHECK(e.field == "hidden");

  e = input_error([] {
    load_study(scratch("s.yaml", study_text("qwen2-7b", "", "  micro_batch_size: -1\n")));
  });
  CHECK(e.field == "training.micro_batch_size");

  e = input_error(
      [] { load_study(scratch("s.yaml", study_text("qwen2-7b", "", "  recompute: some\n"))); });
  CHECK_THAT(e.problem, Catch::Contains("none, selective, full"));

  StudyOverrides o;
  o.seq = 0;
  e = input_error([&] { load_study(resolve_config("studies", "default"), o); });
  CHECK(e.where == "--seq");
}

TEST_CASE("malformed YAML names the file, line and column of the syntax error",
          "[config][errors]") {
  InputError e = input_error([] { load_model(scratch("bad.yaml", "layers: [1, 2\nhidden: 3\n")); });
  CHECK_THAT(e.where, Catch::EndsWith("bad.yaml"));
  CHECK_THAT(e.field, Catch::StartsWith("line 2, column "));
  CHECK_THAT(e.problem, Catch::StartsWith("YAML syntax error: "));
  // A quote left open swallowed the rest of the file: it was "cluster: missing (required)".
  e = input_error([] { load_study(scratch("open.yaml", "model: \"qwen2-7b\ncluster: a800x8\n")); });
  CHECK(e.field == "line 1, column 8");
  CHECK(e.problem ==
        "YAML syntax error: the quoted value is not closed (no \" before the end of the file)");
  e = input_error([] { load_study(scratch("open1.yaml", "name: x\nmodel: 'it''s\n")); });
  CHECK(e.field == "line 2, column 8");
  // Closed quotes, an escaped one inside, load as before.
  const std::string quoted = std::string(kModel7b).replace(0, 8, "name: \"m \\\" 'q'\"\n");
  CHECK(load_model(scratch("quoted.yaml", quoted)).name == "m \" 'q'");
  // Nesting beyond yaml-cpp's depth guard: it said "bad file".
  e = input_error([] {
    load_model(
        scratch("deep.yaml", "a: " + std::string(1000, '[') + std::string(1000, ']') + "\n"));
  });
  CHECK_THAT(e.problem, Catch::Contains("nested too deeply, beyond what the YAML parser allows"));
}

TEST_CASE("heads or kv_heads not divisible by TP are errors with the allowed TP sizes",
          "[config][errors]") {
  StudyOverrides o;
  o.model = "qwen2-7b";
  o.tp = 8;  // 28 heads
  o.pp = 2;
  InputError e = input_error([&] { load_study(resolve_config("studies", "default"), o); });
  CHECK(e.where == "--tp");
  CHECK(e.field == "parallel.tp");
  CHECK_THAT(e.problem, Catch::Contains("heads (28)") && Catch::Contains("allowed tp: 1, 2, 4"));

  o.model = "qwen2-72b";  // 64 heads, 8 KV heads
  o.tp = 16;
  o.pp = 1;
  e = input_error([&] { load_study(resolve_config("studies", "default"), o); });
  CHECK_THAT(e.problem, Catch::Contains("kv_heads (8)"));
}

TEST_CASE("fewer layers than virtual stages and splits that do not divide the cluster are errors",
          "[config][errors]") {
  StudyOverrides o;
  o.tp = 1;
  o.pp = 8;  // 11 layers, 8 x 2 = 16 virtual stages
  InputError e = input_error([&] { load_study(resolve_config("studies", "default"), o); });
  CHECK_THAT(e.problem, Catch::Contains("11 layers, fewer than the 16 virtual stages"));

  o = {};
  o.pp = 3;  // 8 x 3 does not divide 16 GPUs
  e = input_error([&] { load_study(resolve_config("studies", "default"), o); });
  CHECK_THAT(e.problem, Catch::Contains("does not divide the 16 GPUs"));
}

TEST_CASE("a profile missing a field, or with an unknown one, is an error naming it",
          "[config][errors][profile]") {
  std::ifstream in(kRoot / "profiles/a800.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string missing = text;
  missing.replace(missing.find("  bwd_efficiency:"), 17, "  #bwd_efficiency:");
  InputError e = input_error([&] { load_profile(scratch("p.yaml", missing)); });
  CHECK(e.field == "attention.bwd_efficiency");
  CHECK_THAT(e.problem, Catch::Contains("missing"));

  std::string no_links = text;
  no_links.replace(no_links.find("links:"), 6, "linkz:");
  e = input_error([&] { load_profile(scratch("p.yaml", no_links)); });
  CHECK(e.field == "links");

  Profile p = load_profile("a800");
  e = input_error([&] { p.link("roce"); });
  CHECK_THAT(e.problem, Catch::Contains("known: ib, nvlink"));
}

TEST_CASE("a800 profile numbers are the spec-derived ones", "[config][profile]") {
  Profile p = load_profile("a800");
  CHECK(p.peak_flops == Approx(312e12));
  CHECK(p.hbm_bandwidth_Bps == Approx(2039e9));
  CHECK(p.link("nvlink").bus_bandwidth_Bps == Approx(150e9));
  CHECK(p.host_h2d_Bps == Approx(25.13e9));
  Profile h20 = load_profile("h20");
  CHECK(h20.peak_flops == Approx(148e12));  // capped, not SMs x clock
}

TEST_CASE("measured collective rows load sorted and take precedence over the link model",
          "[config][profile]") {
  std::ifstream in(kRoot / "profiles/a800.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string anchor = "    p2p_bandwidth_gbps: 160";
  size_t at = text.find(anchor);
  REQUIRE(at != std::string::npos);
  at = text.find('\n', at) + 1;
  text.insert(at,
              "    measured:\n"
              "      all_reduce:\n"
              "        - {ranks: 8, bytes: 104857600, time_us: 1300}\n"
              "        - {ranks: 8, bytes: 1048576, time_us: 45}\n");
  Profile p = load_profile(scratch("measured.yaml", text));
  const auto& rows = p.link("nvlink").measured->at(CollectiveKind::AllReduce);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].bytes == 1048576);
  CHECK(collective_time_s(p.link("nvlink"), CollectiveKind::AllReduce, 8, 1048576) ==
        Approx(45e-6));

  std::string bad = text;
  bad.replace(bad.find("time_us: 45"), 11, "time_ms: 45");
  InputError e = input_error([&] { load_profile(scratch("measured.yaml", bad)); });
  CHECK(e.field == "links.nvlink.measured.all_reduce[1].time_us");
}

TEST_CASE("the study enums' names read back to the same value", "[config]") {
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
    CHECK(parse_recompute(name(r)) == r);
  CHECK(recompute_names() == std::vector<std::string>{"none", "selective", "full"});
  CHECK_FALSE(parse_recompute("Full").has_value());
  CHECK(parse_vision_placement("first-stage") == VisionPlacement::FirstStage);
  CHECK(std::string(name(VisionPlacement::Separate)) == "separate");
  CHECK(parse_stage_balance("cost") == StageBalance::Cost);
  CHECK(std::string(name(StageBalance::Uniform)) == "uniform");
  CHECK_FALSE(parse_stage_balance("even").has_value());
}

TEST_CASE("YamlMap reads numbers as yaml-cpp's conversions do", "[config]") {
  // The short decimals YamlMap reads itself, and texts on either side of that rule (octal and hex
  // integers, long mantissas, large exponents), against yaml-cpp's own decoding.
  std::vector<std::string> texts = {"0",
                                    "-0",
                                    "7",
                                    "010",
                                    "0x1f",
                                    "-12",
                                    "1.5",
                                    "-0.25",
                                    "1e9",
                                    "1E-7",
                                    "2.5e+3",
                                    "1e999",
                                    "1e-999",
                                    ".5",
                                    "1.",
                                    "+3",
                                    "3 3",
                                    "3 ",
                                    "1_000",
                                    ".inf",
                                    "-.inf",
                                    ".nan",
                                    "12345678901234567890",
                                    "9223372036854775807",
                                    "989",
                                    "0.798",
                                    "54.1",
                                    "134217728",
                                    "613.3",
                                    "1e100",
                                    "1e-99",
                                    "123456789012345678",
                                    "0.1234567890123456789"};
  for (int i = 0; i < 200; ++i) {
    // Pseudo-random decimals, reproducibly.
    const unsigned r = static_cast<unsigned>(i) * 2654435761U;
    texts.push_back(std::to_string(r % 100000) + "." + std::to_string(r % 977) + "e" +
                    std::to_string(static_cast<int>(r % 41) - 20));
    texts.push_back((i % 2 ? "-" : "") + std::to_string(r));
  }
  for (const std::string& text : texts) {
    INFO(text);
    const YAML::Node root = YAML::Load("x: " + text + "\n");
    double expected_number = 0;
    long long expected_integer = 0;
    const bool is_number =
        YAML::convert<double>::decode(root["x"], expected_number) && std::isfinite(expected_number);
    const bool is_integer = YAML::convert<long long>::decode(root["x"], expected_integer);
    detail::YamlMap map(root, "f.yaml", "");
    if (is_number)
      CHECK(map.number("x") == expected_number);
    else
      CHECK_THROWS_AS(map.number("x"), InputError);
    if (is_integer)
      CHECK(map.integer("x") == expected_integer);
    else
      CHECK_THROWS_AS(map.integer("x"), InputError);
  }
}

// Megatron-Core's parallel_state (initialize_model_parallel's docstring and RankGenerator, order
// tp-cp-ep-dp-pp): 16 GPUs, tp 2, pp 4 give 8 TP groups [g0, g1], ..., 8 DP groups [g0, g2],
// [g1, g3], [g4, g6], ... and 4 pipeline groups [g0, g4, g8, g12], ...
TEST_CASE("the rank layout numbers ranks as Megatron-Core: tp fastest, then cp, dp, pp",
          "[config][layout]") {
  const RankLayout l = make_rank_layout(16, 8, 2, 1, 4);
  CHECK(l.dp == 2);
  CHECK(l.world() == 16);
  CHECK(l.ranks(Group::Tp, 0) == std::vector<int>{0, 1});
  CHECK(l.ranks(Group::Tp, 7) == std::vector<int>{6, 7});
  CHECK(l.ranks(Group::Dp, 0) == std::vector<int>{0, 2});
  CHECK(l.ranks(Group::Dp, 5) == std::vector<int>{5, 7});
  CHECK(l.ranks(Group::Pp, 1) == std::vector<int>{1, 5, 9, 13});
  CHECK(l.first_rank_of_stage(3) == 12);
  CHECK(l.node_of(l.first_rank_of_stage(2)) == 1);
  // Its context-parallel example: 8 GPUs, tp 4, cp 2 give CP groups [g0, g4], ..., [g3, g7].
  const RankLayout c = make_rank_layout(8, 8, 4, 2, 1);
  CHECK(c.dp == 1);
  CHECK(c.ranks(Group::Cp, 0) == std::vector<int>{0, 4});
  CHECK(c.ranks(Group::Cp, 7) == std::vector<int>{3, 7});
  // dp x cp: the group gradients are reduced over. 32 GPUs, tp 2, cp 2, pp 2: dp 4, and rank 0's
  // dp-cp group holds the ranks 2 apart within its stage of 16.
  const RankLayout dc = make_rank_layout(32, 8, 2, 2, 2);
  CHECK(dc.dp == 4);
  CHECK(dc.size(Group::DpCp) == 8);
  CHECK(dc.ranks(Group::DpCp, 0) == std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14});
  CHECK(dc.ranks(Group::Dp, 0) == std::vector<int>{0, 4, 8, 12});
}

TEST_CASE("expert layers fold etp x ep x edp over the same ranks and the same pipeline",
          "[config][layout]") {
  // 64 GPUs, attention tp 4 pp 2 (dp 8), experts etp 1 ep 8: edp = 64 / (1 x 8 x 2) = 4. An EP
  // group is 8 consecutive ranks; the expert DP group strides over them within the stage of 32.
  const RankLayout l = make_rank_layout(64, 8, 4, 1, 2, 8, 1);
  CHECK(l.dp == 8);
  CHECK(l.etp == 1);
  CHECK(l.ep == 8);
  CHECK(l.edp == 4);
  CHECK(l.ranks(Group::Ep, 0) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(l.ranks(Group::Edp, 0) == std::vector<int>{0, 8, 16, 24});
  CHECK(l.ranks(Group::Edp, 33) == std::vector<int>{33, 41, 49, 57});
  // The pipeline groups are the dense layers' (Megatron-Core asserts the two agree).
  CHECK(l.ranks(Group::Pp, 5) == std::vector<int>{5, 37});
  // etp defaults to the dense tp, as expert_tensor_parallel_size does.
  CHECK(make_rank_layout(64, 8, 4, 1, 2, 2).etp == 4);
  CHECK(make_rank_layout(64, 8, 4, 1, 2, 2).edp == 4);
}

TEST_CASE("the rank layout says which groups cross nodes and who shares the node's NICs",
          "[config][layout]") {
  // tp 4 x dp 4 = 16 ranks per stage on 8-GPU nodes: a DP group spans both nodes of its stage
  // with 2 members on each, and all 8 GPUs of the node sync at once.
  const RankLayout l = make_rank_layout(32, 8, 4, 1, 2);
  CHECK_FALSE(l.spans_nodes(Group::Tp));
  CHECK(l.members_per_node(Group::Tp) == 4);
  CHECK(l.nic_users(Group::Tp) == 0);
  CHECK(l.spans_nodes(Group::Dp));
  CHECK(l.members_per_node(Group::Dp) == 2);
  CHECK(l.nic_users(Group::Dp) == 8);
  CHECK(l.spans_nodes(Group::Pp));
  // tp 8, dp 1 per stage: DP is one rank, inside its node.
  const RankLayout one = make_rank_layout(16, 8, 8, 1, 2);
  CHECK_FALSE(one.spans_nodes(Group::Dp));
  CHECK(one.members_per_node(Group::Dp) == 1);
  // tp 16 on 8-GPU nodes: the TP group itself crosses the network.
  CHECK(make_rank_layout(32, 8, 16, 1, 2).spans_nodes(Group::Tp));
  // tp 2, dp 8, pp 2 on 8-GPU nodes: a stage of 16 spans two nodes; a DP group has 4 members on
  // each (2 apart), and every GPU of the node is in a group that crosses.
  const RankLayout wide = make_rank_layout(32, 8, 2, 1, 2);
  CHECK(wide.members_per_node(Group::Dp) == 4);
  CHECK(wide.nic_users(Group::Dp) == 8);
  // The group names read back.
  for (Group g : {Group::Tp, Group::Cp, Group::Dp, Group::Pp, Group::DpCp, Group::Etp, Group::Ep,
                  Group::Edp, Group::TpDpCp})
    CHECK(parse_group(name(g)) == g);
  CHECK_FALSE(parse_group("xp").has_value());
}

TEST_CASE("a study's rank layout is its cluster's at its tp and pp", "[config][layout]") {
  const Study s = load_study(kRoot / "configs/studies/default.yaml");
  const RankLayout l = rank_layout(s);
  CHECK(l.world() == s.cluster.gpus());
  CHECK(l.tp == s.parallel.tp);
  CHECK(l.pp == s.parallel.pp);
  CHECK(l.dp == s.parallel.dp);
  CHECK(l.gpus_per_node == s.cluster.gpus_per_node);
}

TEST_CASE("attention_impl names the fused kernel, and unfused is flash_attention false",
          "[config]") {
  CHECK(load_model(scratch("m.yaml", kModel7b)).attention_impl == AttentionImpl::Default);
  const ModelConfig fa3 =
      load_model(scratch("m.yaml", std::string(kModel7b) + "attention_impl: flash3\n"));
  CHECK(fa3.attention_impl == AttentionImpl::Flash3);
  CHECK(fa3.flash_attention);
  const ModelConfig unfused =
      load_model(scratch("m.yaml", std::string(kModel7b) + "attention_impl: unfused\n"));
  CHECK_FALSE(unfused.flash_attention);
  // flash_attention: false alone means unfused too.
  CHECK(load_model(resolve_config("models", "megatron-22b")).attention_impl ==
        AttentionImpl::Unfused);
  InputError e = input_error([&] {
    load_model(scratch("m.yaml",
                       std::string(kModel7b) + "flash_attention: false\nattention_impl: cudnn\n"));
  });
  CHECK(e.field == "attention_impl");
  CHECK_THAT(e.problem, Catch::Contains("unfused"));
  e = input_error(
      [&] { load_model(scratch("m.yaml", std::string(kModel7b) + "attention_impl: fa3\n")); });
  CHECK(e.field == "attention_impl");
  CHECK_THAT(e.problem, Catch::Contains("flash3"));
  for (const std::string& n : attention_impl_names()) CHECK(name(*parse_attention_impl(n)) == n);
}

// ---- Mixture-of-Experts models ----------------------------------------------------------------

namespace {

// A small MoE model: 4 layers, 8 experts; `moe` is the body of its `moe:` map.
std::string moe_model(const std::string& moe) {
  return "name: tiny-moe\nlayers: 4\nhidden: 64\nheads: 4\nkv_heads: 2\nffn: 128\nvocab: 1000\n"
         "moe:\n" +
         moe;
}

}  // namespace

TEST_CASE("Mixtral-8x7B counts 46.7 B parameters, 12.9 B active per token, by hand",
          "[config][moe]") {
  const ModelConfig m = load_model(resolve_config("models", "mixtral-8x7b"));
  REQUIRE(m.moe);
  CHECK(m.moe->experts == 8);
  CHECK(m.moe->top_k == 2);
  CHECK(moe_layer_count(*m.moe, m.layers) == 32);
  // Per layer: attention 4096 x (4096 + 2 x 1024) + 4096 x 4096 = 41,943,040 (32 heads, 8 KV
  // heads of 128); two RMSNorms 8,192; one SwiGLU expert 3 x 4096 x 14336 = 176,160,768, eight
  // of them 1,409,286,144; router 4096 x 8 = 32,768. Sum 1,451,270,144.
  const ParameterCount p = count_parameters(m);
  CHECK(p.per_moe_layer == 1'451'270'144);
  // 32 layers 46,440,644,608 + embedding 32000 x 4096 = 131,072,000 + untied head 131,072,000
  // + final norm 4,096 = 46,702,792,704.
  CHECK(p.total == 46'702'792'704);
  CHECK(p.embedding == 131'072'000);
  CHECK(p.head == 131'076'096);
  // Active: 2 of the 8 experts, 6 x 176,160,768 = 1,056,964,608 fewer per layer:
  // 32 x 394,305,536 + 262,148,096 = 12,879,925,248. Mixtral paper: 46.7 B / 12.9 B.
  CHECK(p.active == 12'879'925'248);
  // The dense layer it would be (one FFN) is not what the model counts.
  CHECK(p.per_layer == 41'943'040 + 8'192 + 176'160'768);
}

TEST_CASE("MoE layers: first_k_dense dense layers, then every layer_freq-th", "[config][moe]") {
  MoeConfig e;
  e.first_k_dense = 3;
  e.layer_freq = 1;
  CHECK_FALSE(is_moe_layer(e, 2));
  CHECK(is_moe_layer(e, 3));
  CHECK(moe_layer_count(e, 61) == 58);  // DeepSeek-V3: 61 layers, first 3 dense
  e.first_k_dense = 0;
  e.layer_freq = 2;
  CHECK(is_moe_layer(e, 0));
  CHECK_FALSE(is_moe_layer(e, 1));
  CHECK(moe_layer_count(e, 5) == 3);  // Megatron's --moe-layer-freq 2: layers 0, 2, 4
  // Counts follow: a tiny model with one dense and three MoE layers (hidden 64, ffn 128, 8
  // experts of 32, top-2, one shared expert of 64). Dense layer: attention 64 x (64 + 2 x 32)
  // + 64 x 64 = 12,288, norms 128, MLP 3 x 64 x 128 = 24,576: 36,992. MoE layer: 12,288 + 128
  // + router 512 + 8 x 6,144 + shared 12,288 = 74,368. Embedding and head 2 x 64,000 + 64.
  const ModelConfig m = load_model(scratch(
      "tiny-moe.yaml", moe_model("  experts: 8\n  top_k: 2\n  expert_ffn: 32\n  shared_experts: 1\n"
                                 "  shared_expert_ffn: 64\n  first_k_dense: 1\n")));
  const ParameterCount p = count_parameters(m);
  CHECK(p.per_layer == 36'992);
  CHECK(p.per_moe_layer == 74'368);
  CHECK(p.total == 36'992 + 3 * 74'368 + 128'064);
  CHECK(p.active == p.total - 3 * 6 * 6'144);  // 6 routed experts unused per MoE layer
}

TEST_CASE("MoE fields are validated with one error naming the field", "[config][moe][errors]") {
  auto error_of = [](const std::string& moe) {
    return input_error([&] { load_model(scratch("bad-moe.yaml", moe_model(moe))); });
  };
  InputError e = error_of("  experts: 8\n  top_k: 9\n");
  CHECK(e.field == "moe.top_k");
  CHECK(e.problem == "9 is more than the 8 experts");
  e = error_of("  top_k: 2\n");
  CHECK(e.field == "moe.experts");
  CHECK_THAT(e.problem, Catch::Contains("missing"));
  e = error_of("  experts: 8\n  top_k: 2\n  expert: 32\n");
  CHECK(e.field == "moe.expert");
  CHECK_THAT(e.problem, Catch::Contains("unknown field") && Catch::Contains("expert_ffn"));
  e = error_of("  experts: 8\n  top_k: 2\n  router_groups: 3\n  router_group_top_k: 1\n");
  CHECK(e.field == "moe.router_groups");
  CHECK(e.problem == "3 does not divide the 8 experts");
  e = error_of("  experts: 8\n  top_k: 4\n  router_groups: 4\n  router_group_top_k: 1\n");
  CHECK(e.field == "moe.top_k");
  CHECK(e.problem == "4 is more than the 2 experts in router_group_top_k groups");
  e = error_of("  experts: 8\n  top_k: 2\n  router_groups: 4\n");
  CHECK(e.field == "moe.router_group_top_k");
  e = error_of("  experts: 8\n  top_k: 2\n  first_k_dense: 4\n");
  CHECK(e.field == "moe.first_k_dense");
  CHECK(e.problem == "must be 0 up to layers - 1 (3), got 4");
  e = error_of("  experts: 8\n  top_k: 2\n  first_k_dense: 3\n  layer_freq: 2\n");
  CHECK(e.field == "moe.layer_freq");
  CHECK_THAT(e.problem, Catch::StartsWith("leaves no MoE layer among the 4 layers"));
  e = error_of("  experts: 8\n  top_k: 2\n  router_score: relu\n");
  CHECK(e.field == "moe.router_score");
  CHECK_THAT(e.problem, Catch::Contains("softmax, sigmoid"));
  e = error_of("  experts: 8\n  top_k: 2\n  capacity_factor: 0\n");
  CHECK(e.field == "moe.capacity_factor");
  e = error_of("  experts: 8\n  top_k: 2\n  shared_experts: -1\n");
  CHECK(e.field == "moe.shared_experts");
  // Defaults: widths from ffn, every layer, softmax, dropless.
  const ModelConfig ok =
      load_model(scratch("ok-moe.yaml", moe_model("  experts: 8\n  top_k: 2\n")));
  REQUIRE(ok.moe);
  CHECK(ok.moe->expert_ffn == 128);
  CHECK(ok.moe->shared_experts == 0);
  CHECK(ok.moe->layer_freq == 1);
  CHECK(ok.moe->router_score == RouterScore::Softmax);
  CHECK_FALSE(ok.moe->capacity_factor.has_value());
  CHECK_FALSE(load_model(scratch("dense.yaml", kModel7b)).moe.has_value());
}

TEST_CASE("the shipped MoE models count their published totals", "[config][moe]") {
  auto counts = [](const char* name) {
    return count_parameters(load_model(resolve_config("models", name)));
  };
  // Mixtral 8x22B: 141 B, 39 B active (Mistral AI); Qwen3 report Table 2: 30.5 B / 3.3 B,
  // 235 B / 22 B.
  CHECK(counts("mixtral-8x22b").total == Approx(141e9).epsilon(0.005));
  CHECK(counts("mixtral-8x22b").active == Approx(39e9).epsilon(0.005));
  CHECK(counts("qwen3-30b-a3b").total == Approx(30.5e9).epsilon(0.005));
  CHECK(counts("qwen3-30b-a3b").active == Approx(3.3e9).epsilon(0.02));
  CHECK(counts("qwen3-235b-a22b").total == Approx(235e9).epsilon(0.005));
  CHECK(counts("qwen3-235b-a22b").active == Approx(22e9).epsilon(0.01));
}

TEST_CASE("gpt-oss-120b counts the model card's 116.83 B, biases included, by hand",
          "[config][moe]") {
  const ModelConfig m = load_model(resolve_config("models", "gpt-oss-120b"));
  REQUIRE(m.moe);
  CHECK(m.linear_bias);
  // Per layer: attention weights 2880 x (4096 + 2 x 512) + 4096 x 2880 = 26,542,080 (64 heads and
  // 8 KV heads of 64) and biases 4096 + 1024 + 2880 = 8,000; two RMSNorms 5,760; router 2880 x
  // 128 = 368,640; one SwiGLU expert 3 x 2880 x 2880 = 24,883,200 plus biases 5760 + 2880 =
  // 8,640, 128 of them 3,186,155,520. Sum 3,213,080,000.
  const ParameterCount p = count_parameters(m);
  CHECK(p.per_moe_layer == 3'213'080'000);
  // 36 layers 115,670,880,000 + embedding 201088 x 2880 = 579,133,440 + untied head 579,133,440
  // + final norm 2,880 = 116,829,149,760: the card's 116.83 B.
  CHECK(p.total == 116'829'149'760);
  CHECK(p.total == Approx(116.83e9).epsilon(0.005));
  // Active: 4 of the 128 experts, 124 x 24,891,840 = 3,086,588,160 fewer per layer:
  // 36 x 126,491,840 + 1,158,269,760 = 5,711,976,000. The card's 5.13 B leaves out the embedding
  // table: 5,711,976,000 - 579,133,440 = 5,132,842,560.
  CHECK(p.active == 5'711'976'000);
  CHECK(p.active - p.embedding == Approx(5.13e9).epsilon(0.005));
}

// ---- multi-head latent attention ----------------------------------------------------------------

namespace {

// A one-layer model with an `mla:` map (body `mla`): hidden 64, 4 heads, ffn 128.
std::string mla_model(const std::string& mla, const std::string& extra = "") {
  return "name: tiny-mla\nlayers: 1\nhidden: 64\nheads: 4\nffn: 128\nvocab: 1000\n" + extra +
         "mla:\n" + mla;
}

}  // namespace

TEST_CASE("an mla block replaces the QKV projection's parameters, counted by hand",
          "[config][mla]") {
  const ModelConfig m = load_model(
      scratch("tiny-mla.yaml", mla_model("  q_lora_rank: 16\n  kv_lora_rank: 8\n  qk_head_dim: 8\n"
                                         "  qk_pos_emb_head_dim: 4\n  v_head_dim: 8\n")));
  REQUIRE(m.mla);
  CHECK(*m.mla == MlaConfig{16, 8, 8, 4, 8});
  // q_down 64 x 16 = 1,024, q norm 16, q_up 16 x 4 x (8 + 4) = 768, kv_down 64 x (8 + 4) = 768,
  // kv norm 8, kv_up 8 x 4 x (8 + 8) = 512, out 4 x 8 x 64 = 2,048: 5,144. Two norms 128,
  // MLP 3 x 64 x 128 = 24,576: 29,848 per layer.
  CHECK(count_parameters(m).per_layer == 29'848);
  // Without q compression q is one projection, 64 x 4 x 12 = 3,072, in place of 1,808.
  const ModelConfig plain = load_model(scratch(
      "tiny-mla-plain.yaml",
      mla_model(
          "  kv_lora_rank: 8\n  qk_head_dim: 8\n  qk_pos_emb_head_dim: 4\n  v_head_dim: 8\n")));
  CHECK(plain.mla->q_lora_rank == 0);
  CHECK(count_parameters(plain).per_layer == 29'848 - 1'808 + 3'072);
}

TEST_CASE("mla fields are validated with one error naming the field", "[config][mla][errors]") {
  auto error_of = [](const std::string& mla, const std::string& extra = "") {
    return input_error([&] { load_model(scratch("bad-mla.yaml", mla_model(mla, extra))); });
  };
  const std::string widths = "  qk_head_dim: 8\n  qk_pos_emb_head_dim: 4\n  v_head_dim: 8\n";
  InputError e = error_of(widths);
  CHECK(e.field == "mla.kv_lora_rank");
  CHECK_THAT(e.problem, Catch::Contains("missing"));
  e = error_of("  kv_lora_rank: 8\n  q_lora_rank: -1\n" + widths);
  CHECK(e.field == "mla.q_lora_rank");
  CHECK(e.problem == "must be 0 or a positive integer up to 1048576, got -1");
  e = error_of("  kv_lora_rank: 8\n  v_head: 8\n" + widths);
  CHECK(e.field == "mla.v_head");
  CHECK_THAT(e.problem, Catch::Contains("unknown field"));
  e = error_of("  kv_lora_rank: 8\n" + widths, "kv_heads: 2\n");
  CHECK(e.field == "mla.kv_lora_rank");
  CHECK(e.problem ==
        "one latent serves all 4 heads, so kv_heads must equal heads (got 2); drop kv_heads");
}

TEST_CASE("DeepSeek-V3's model file counts 671.03 B total, 37.55 B active", "[config][mla]") {
  // The sums by hand are in hf_import_test ("DeepSeek-V3 imports its MLA and experts").
  const ModelConfig m = load_model(resolve_config("models", "deepseek-v3"));
  const ParameterCount p = count_parameters(m);
  CHECK(p.total == 671'026'404'352);
  CHECK(p.active == 37'552'282'624);
  CHECK(p.per_layer == 583'483'392);
  CHECK(p.per_moe_layer == 11'507'286'016);
}
