// `braid info` end to end through the built binary: the table, the documented JSON fields, and
// bad input as exit code 2 with one line on stderr.
#include <catch2/catch.hpp>

#include "cli_run.hpp"

using braid::test::CliRun;
using braid::test::count_lines;
using braid::test::run_braid;

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

TEST_CASE("braid info prints parameters, FLOPs, chunks and the unit cost table", "[cli][info]") {
  CliRun r = run_braid("info --study configs/studies/default.yaml");
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK_THAT(r.out, Catch::Contains("parameters: total 12.146 B"));
  CHECK_THAT(r.out, Catch::Contains("model FLOPs per iteration"));
  CHECK_THAT(r.out, Catch::Contains("M_a_gib"));
  CHECK_THAT(r.out, Catch::Contains("all_reduce>"));
  CHECK_THAT(r.out, Catch::Contains("spec-derived"));
  // Same input, byte-identical output.
  CHECK(run_braid("info --study configs/studies/default.yaml").out == r.out);
}

TEST_CASE("the unit cost table's collective column fits a unit running two collectives",
          "[cli][info]") {
  // Under SP a column unit's backward reduce-scatters its input gradient after the compute and
  // all-gathers its saved input inside it: "reduce_scatter>+all_gather~", 27 characters.
  const CliRun r = run_braid("info --study configs/studies/default.yaml --sp on");
  REQUIRE(r.exit_code == 0);
  std::istringstream lines(r.out);
  std::string line, header, two;
  while (std::getline(lines, line)) {
    if (line.rfind("unit ", 0) == 0 && line.find("coll_mib") != std::string::npos) header = line;
    if (line.rfind("PreAttn", 0) == 0 &&
        line.find("reduce_scatter>+all_gather~") != std::string::npos)
      two = line;
  }
  REQUIRE_FALSE(header.empty());
  REQUIRE_FALSE(two.empty());
  // coll_mib is right-aligned: its header and the row's value end in the same column.
  const std::size_t header_end = header.find("coll_mib") + std::string("coll_mib").size();
  const std::size_t label_end =
      two.find("reduce_scatter>+all_gather~") + std::string("reduce_scatter>+all_gather~").size();
  const std::size_t value_end = two.find_first_of(' ', two.find_first_not_of(' ', label_end));
  CHECK(value_end == header_end);
}

TEST_CASE("braid info --json has the documented fields", "[cli][info]") {
  CliRun r = run_braid("info --study configs/studies/default.yaml --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["model"] == "qwen2-12.1b");
  CHECK(j["tp"] == 8);
  CHECK(j["pp"] == 2);
  CHECK(j["dp"] == 1);
  CHECK(j["virtual_stages"] == 4);
  CHECK(j["params_total"].get<double>() == Approx(12.146e9).epsilon(0.001));
  CHECK(j["model_flops_per_iteration"].get<double>() > 0);
  CHECK(j["model_flops_per_token"].get<double>() ==
        Approx(j["model_flops_per_iteration"].get<double>() /
               j["tokens_per_iteration"].get<double>()));
  REQUIRE(j["chunks"].size() == 4);
  for (const auto& c : j["chunks"]) {
    for (const char* key :
         {"virtual_stage", "layers", "first_layer", "prologue", "epilogue", "params_per_gpu",
          "static_bytes", "static_gib", "activation_bytes", "activation_gib", "output_bytes"}) {
      CHECK(c.contains(key));
    }
  }
  CHECK(j["chunks"][0]["prologue"][0] == "Embedding");
  CHECK(j["chunks"][3]["epilogue"][0] == "Head");
  REQUIRE(j["units"].size() == 6);  // Embedding, four layer units, Head
  const auto& attn_f = j["units"][2]["phases"]["F"];
  CHECK(j["units"][2]["unit"] == "Attn");
  // Its collectives, each with its group and where it runs: the TP All-Reduce after it.
  REQUIRE(attn_f["collectives"].size() == 1);
  const auto& ar = attn_f["collectives"][0];
  CHECK(ar["kind"] == "all_reduce");
  CHECK(ar["group"] == "tp");
  CHECK(ar["position"] == "after");
  CHECK(ar["bytes"].get<double>() == 6144.0 * 8192 * 2);
  CHECK(ar["time_s"].get<double>() > 0);
  for (const char* key :
       {"time_s", "flops", "hw_flops", "collectives", "alloc_bytes", "free_bytes", "source"}) {
    CHECK(attn_f.contains(key));
  }
  // A phase without collectives lists none.
  CHECK(j["units"][2]["phases"]["W"]["collectives"].empty());
}

TEST_CASE("braid info accepts every override", "[cli][info]") {
  CliRun r = run_braid(
      "info --model qwen2-7b --cluster h100x64 --tp 4 --pp 4 --vpp 1 --seq 4096 --mbs 2 "
      "--microbatches 128 --sp on --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["dp"] == 4);
  CHECK(j["sequence_parallel"] == true);
  CHECK(j["samples_per_iteration"] == 2 * 128 * 4);
  CHECK(j["units"][1]["phases"]["F"]["collectives"][0]["kind"] == "all_gather");
  CHECK(j["units"][1]["phases"]["F"]["collectives"][0]["position"] == "before");
  CHECK(run_braid("info --profile h200 --nodes 1 --pp 1 --json").exit_code == 0);
}

TEST_CASE("bad input to braid info: exit code 2 and one line on stderr", "[cli][info][errors]") {
  struct Case {
    const char* args;
    const char* message;
  };
  for (Case c : {Case{"info --tp 3", "--tp: parallel.tp: tp 3 does not divide the heads"},
                 Case{"info --model qwen9",
                      "unknown model 'qwen9'; known: deepseek-v3, gpt-oss-120b, gpt3-175b"},
                 Case{"info --cluster nope", "unknown cluster 'nope'"},
                 Case{"info --profile nope", "unknown profile 'nope'"},
                 Case{"info --study nope", "unknown study 'nope'"},
                 Case{"info --pp 0", "--pp: parallel.pp: must be a positive integer"},
                 Case{"info --pp 3", "does not divide the 16 GPUs"},
                 Case{"info --pp 8 --tp 1", "fewer than the 16 virtual stages"},
                 Case{"info --sp maybe", "--sp"}, Case{"info --tp x", "--tp"},
                 Case{"info --recompute most", "--recompute"}}) {
    CliRun r = run_braid(c.args);
    INFO(c.args << " -> " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK_THAT(r.err, Catch::Contains(c.message));
    CHECK(r.out.empty());
  }
}

TEST_CASE("braid info lists one layer's GEMMs and attention kernels with their sources",
          "[cli][info][efficiency]") {
  // A100 (Megatron 22B, unfused attention): every GEMM with its waves and the tile model's
  // source; H100 (Qwen2-7B, cuDNN by the profile's default): the attention rows used and theirs.
  CliRun a = run_braid("info --study configs/studies/megatron/megatron-22b-full.yaml");
  REQUIRE(a.exit_code == 0);
  CHECK_THAT(a.out, Catch::Contains("kernels of one LM layer"));
  // The QKV forward GEMM: 576 tiles of 256x128, 6 waves on 108 SMs, 0.741 of peak.
  CHECK_THAT(a.out, Catch::Contains("PreAttn  F     gemm      8192x2304x6144"));
  CHECK_THAT(a.out, Catch::Contains("0.741      6     1 256x128  tiles"));
  // Megatron's unfused QK^T: 32 batched 2048x2048x96 GEMMs.
  CHECK_THAT(a.out, Catch::Contains("2048x2048x96 b32"));
  CHECK_THAT(a.out, Catch::Contains("gemm tiles: 256x128 on 108 SMs") &&
                        Catch::Contains("source: G2 8192^2 (A100-SXM4-80GB)"));
  CliRun h = run_braid(
      "info --study configs/studies/qwen2-7b-h20x16.yaml --cluster h100x64 --tp 4 --pp 2 "
      "--seq 4096");
  REQUIRE(h.exit_code == 0);
  CHECK_THAT(h.out, Catch::Contains("attention s4096 hd128 causal cudnn"));
  CHECK_THAT(h.out, Catch::Contains("attention row cudnn hd128 causal: source: F3 Fig. 5"));
  CliRun j = run_braid(
      "info --study configs/studies/qwen2-7b-h20x16.yaml --cluster h100x64 --tp 4 --pp 2 "
      "--seq 4096 --json");
  REQUIRE(j.exit_code == 0);
  const auto kernels = nlohmann::json::parse(j.out)["layer_kernels"];
  REQUIRE(kernels.size() == 14);  // 12 linear GEMMs + the attention forward and backward
  int attention = 0;
  for (const auto& k : kernels) {
    if (k["kernel"] != "attention") continue;
    ++attention;
    CHECK(k["impl"] == "cudnn");
    CHECK(k["model"] == "rows");
    CHECK(k["rows"][0]["source"] == "F3 Fig. 5 hd128 causal");
  }
  CHECK(attention == 2);
}

TEST_CASE(
    "braid info on an MoE model shows its experts, total and active parameters, and the MoE "
    "layer's units in its cost model",
    "[cli][info][moe]") {
  const CliRun r = run_braid("info --model mixtral-8x7b --tp 2 --ep 4 --etp 1");
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  // config_test derives both counts by hand: 46,702,792,704 and 12,879,925,248.
  CHECK_THAT(r.out, Catch::Contains("parameters: total 46.703 B, active per token 12.880 B"));
  CHECK_THAT(r.out, Catch::Contains("MoE: 32 of 32 layers; 8 experts, top-2, expert ffn 14336, "
                                    "shared experts 0 (ffn 14336), router softmax, dropless"));
  CHECK_THAT(r.out, Catch::Contains(", ep 4, etp 1"));
  // The unit table times the MoE units; the kernel table stops at the attention half.
  for (const char* unit : {"Router", "Dispatch", "Experts", "Combine"})
    CHECK_THAT(r.out, Catch::Contains(std::string("\n") + unit + " "));
  CHECK_THAT(r.out, Catch::Contains("kernels of one LM layer's attention half"));
  const CliRun j = run_braid("info --model mixtral-8x7b --tp 2 --ep 4 --etp 1 --json");
  REQUIRE(j.exit_code == 0);
  const auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["params_total"] == 46'702'792'704.0);
  CHECK(doc["params_active"] == 12'879'925'248.0);
  CHECK(doc["ep"] == 4);
  CHECK(doc["etp"] == 1);
  CHECK(doc["moe"]["experts"] == 8);
  CHECK(doc["moe"]["top_k"] == 2);
  CHECK(doc["moe"]["capacity_factor"].is_null());
  for (const auto& k : doc["layer_kernels"]) CHECK((k["unit"] == "PreAttn" || k["unit"] == "Attn"));
  CHECK(doc["layer_kernels"].size() >= 4);
}
