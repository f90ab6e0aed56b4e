// The analytic cost model: FLOPs against Megatron's formula, activation bytes against the
// documented per-layer formula, collectives per DESIGN §2, collective time monotonic, static
// memory and parameter bookkeeping.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/error.hpp"
#include "braid/profile.hpp"
#include "cli_run.hpp"
#include "fixtures.hpp"

using namespace braid;
using test::collective_of;

namespace {

Study study_of(const std::string& model, const std::string& cluster, int tp, int pp, int seq,
               bool sp, int mbs = 1) {
  StudyOverrides o = test::layout_overrides(model, cluster, tp, pp, seq, sp);
  o.mbs = mbs;
  return load_study(resolve_config("studies", "default"), o);
}

double layer_f_alloc(std::span<const UnitCost> layer) {
  double sum = 0;
  for (const auto& u : layer) sum += u[Phase::F].alloc_bytes;
  return sum;
}

// Current Megatron-LM num_floating_point_operations per token (reference §D.1 [D3]): forward +
// backward (x3), causal attention halved, SwiGLU x3 matrices, logits once.
double megatron_flops_per_token(const ModelConfig& m, double s) {
  const double h = m.hidden, q = double(m.heads) * m.head_dim, kv = double(m.kv_heads) * m.head_dim;
  const double f = m.ffn, V = m.vocab;
  const double per_layer = 6 * (h * (q + 2 * kv) + q * s + q * h) + 6 * h * f * 3;
  return m.layers * per_layer + 6 * h * V;
}

}  // namespace

TEST_CASE("model FLOPs per token are within 2 % of Megatron's GQA/SwiGLU formula",
          "[cost][flops]") {
  struct Case {
    const char* model;
    const char* cluster;
    int tp, pp, seq;
  };
  for (Case c :
       {Case{"qwen2-7b", "a800x16", 4, 2, 4096}, Case{"qwen2-7b", "h200x8", 1, 4, 2048},
        Case{"qwen2-72b", "h100x64", 8, 8, 4096}, Case{"qwen2-12.1b", "a800x16", 8, 2, 6144}}) {
    Study s = study_of(c.model, c.cluster, c.tp, c.pp, c.seq, false);
    CostModel cm = build_cost_model(s, load_profile(s.cluster.profile), c.pp);
    double per_token = cm.model_flops / cm.tokens_per_iteration;
    INFO(c.model << " tp " << c.tp);
    CHECK(per_token == Approx(megatron_flops_per_token(s.model, c.seq)).epsilon(0.02));
  }
  // Reference §D.1 worked example: Qwen2-7B at s = 4096, current Megatron (causal /2): 44.9 GFLOP.
  Study s = study_of("qwen2-7b", "a800x16", 1, 2, 4096, false);
  CostModel cm = build_cost_model(s, load_profile("a800"), 2);
  CHECK(cm.model_flops / cm.tokens_per_iteration == Approx(44.9e9).epsilon(0.005));
  CHECK(cm.tokens_per_iteration == 4096.0 * 64 * 8);  // seq x microbatches x dp (16 / 2)
  CHECK(cm.hardware_flops > cm.model_flops);          // FlashAttention's backward recompute
}

TEST_CASE("activation bytes per layer equal the documented formula, TP without and with SP",
          "[cost][memory]") {
  // Documented formula (docs/cost-model.md), e = 2 bytes, per microbatch of s x b tokens:
  //   no SP: e*s*b*(4h + (2q + 2k + 3f)/t)     with SP: e*s*b*(4h + 2q + 2k + 3f)/t
  for (const char* model : {"qwen2-7b", "qwen2-72b"}) {
    for (int tp : {1, 2, 4}) {
      for (bool sp : {false, true}) {
        const int seq = 4096, mbs = 2;
        Study s = study_of(model, "a800x16", tp, 2, seq, sp, mbs);
        CostModel cm = build_cost_model(s, load_profile("a800"), 2);
        const ModelConfig& m = s.model;
        const double h = m.hidden, q = double(m.heads) * m.head_dim,
                     k = double(m.kv_heads) * m.head_dim, f = m.ffn, t = tp;
        const double tokens = double(seq) * mbs;
        const double expected = sp ? 2 * tokens * (4 * h + 2 * q + 2 * k + 3 * f) / t
                                   : 2 * tokens * (4 * h + (2 * q + 2 * k + 3 * f) / t);
        INFO(model << " tp " << tp << " sp " << sp);
        CHECK(layer_f_alloc(cm.chunks[1].layer(0)) == Approx(expected).epsilon(1e-12));
      }
    }
  }
  // Reference §D.3: Qwen2-7B is about 44 s*b*h bytes per layer at t = 1.
  Study s = study_of("qwen2-7b", "a800x16", 1, 2, 4096, false);
  CostModel cm = build_cost_model(s, load_profile("a800"), 2);
  CHECK(layer_f_alloc(cm.chunks[0].layer(0)) / (4096.0 * 3584) == Approx(44).epsilon(0.01));
}

TEST_CASE("every unit frees exactly what it allocates, and M_a is the chunk's F allocations",
          "[cost][memory]") {
  Study s = load_study(resolve_config("studies", "default"));
  CostModel cm = build_cost_model(s, load_profile("a800"), 4);
  for (const auto& c : cm.chunks) {
    double f_alloc = 0;
    auto check_unit = [&](const UnitCost& u) {
      double alloc = 0, freed = 0;
      for (const auto& p : u.phase) {
        alloc += p.alloc_bytes;
        freed += p.free_bytes;
      }
      CHECK(alloc == Approx(freed));
      f_alloc += u[Phase::F].alloc_bytes;
    };
    for (const auto& u : c.prologue) check_unit(u);
    for (const auto& u : c.layer_units) check_unit(u);
    for (const auto& u : c.epilogue) check_unit(u);
    CHECK(c.activation_bytes == Approx(f_alloc));
    CHECK(c.output_bytes == 6144.0 * 8192 * 2);
  }
  // The last stage also saves the LM head input and the fp32 logits (4 bytes x vocab / tp).
  CHECK(cm.chunks[3].activation_bytes > cm.chunks[1].activation_bytes * 2 / 3);
}

TEST_CASE("TP collectives follow DESIGN §2: units, phases, kinds and tokens x hidden x 2 bytes",
          "[cost][collective]") {
  const double bytes = 4096.0 * 3584 * 2;
  SECTION("without sequence parallelism: All-Reduce after Attn/MLP F and PreAttn/PreMLP B") {
    Study s = study_of("qwen2-7b", "a800x16", 4, 2, 4096, false);
    CostModel cm = build_cost_model(s, load_profile("a800"), 2);
    const auto l = cm.chunks[0].layer(0);
    using K = CollectiveKind;
    K expected[4][3] = {{K::None, K::AllReduce, K::None},
                        {K::AllReduce, K::None, K::None},
                        {K::None, K::AllReduce, K::None},
                        {K::AllReduce, K::None, K::None}};
    for (int u = 0; u < 4; ++u) {
      for (int p = 0; p < 3; ++p) {
        const Collective c = collective_of(l[u].phase[p]);
        INFO(name(l[u].kind) << " " << name(Phase(p)));
        CHECK(c.kind == expected[u][p]);
        if (c.kind != K::None) {
          CHECK(c.bytes == bytes);
          CHECK(c.position == CollectivePosition::After);
          CHECK(c.time_s > 0);
        }
      }
    }
    CHECK(collective_of(l[0][Phase::W]).kind == CollectiveKind::None);
    // Per unit: 2 All-Reduces in the forward, 2 in the backward (DESIGN §4's 2 x T_AR/2).
  }
  SECTION("with sequence parallelism: All-Gather before / Reduce-Scatter after") {
    Study s = study_of("qwen2-7b", "a800x16", 4, 2, 4096, true);
    CostModel cm = build_cost_model(s, load_profile("a800"), 2);
    const auto l = cm.chunks[0].layer(0);
    for (int u : {0, 2}) {  // PreAttn, PreMLP
      CHECK(collective_of(l[u][Phase::F]).kind == CollectiveKind::AllGather);
      CHECK(collective_of(l[u][Phase::F]).position == CollectivePosition::Before);
      // The backward reduce-scatters the input gradient after its compute and gathers the saved
      // input again inside it, beside the dgrad (the weight gradient needs every token).
      const Collectives& b = l[u][Phase::B].collectives;
      REQUIRE(b.size() == 2);
      CHECK(b[0].kind == CollectiveKind::ReduceScatter);
      CHECK(b[0].position == CollectivePosition::After);
      CHECK(b[1].kind == CollectiveKind::AllGather);
      CHECK(b[1].position == CollectivePosition::Inside);
      CHECK(b[1].bytes == bytes);
    }
    for (int u : {1, 3}) {  // Attn, MLP
      CHECK(collective_of(l[u][Phase::F]).kind == CollectiveKind::ReduceScatter);
      CHECK(collective_of(l[u][Phase::F]).position == CollectivePosition::After);
      CHECK(collective_of(l[u][Phase::B]).kind == CollectiveKind::AllGather);
      CHECK(collective_of(l[u][Phase::B]).position == CollectivePosition::Before);
    }
    CHECK(collective_of(l[1][Phase::F]).bytes == bytes);
    CHECK(cm.chunks[0].output_bytes == bytes / 4);
  }
  SECTION("TP 1 has no collectives") {
    Study s = study_of("qwen2-7b", "a800x16", 1, 2, 4096, false);
    CostModel cm = build_cost_model(s, load_profile("a800"), 2);
    for (const auto& u : cm.chunks[0].layer(0)) {
      for (const auto& p : u.phase) CHECK(collective_of(p).kind == CollectiveKind::None);
    }
  }
}

TEST_CASE("collective time is the latency plus algorithm factor x bytes / bus bandwidth",
          "[cost][collective]") {
  LinkProfile link;
  link.latency_s = 10e-6;
  link.bus_bandwidth_Bps = 100e9;
  // 8 ranks, 100 MB: all-reduce 2 x 7/8 x 1 ms, all-gather 7/8 x 1 ms.
  CHECK(collective_time_s(link, CollectiveKind::AllReduce, 8, 100e6) == Approx(10e-6 + 1.75e-3));
  CHECK(collective_time_s(link, CollectiveKind::AllGather, 8, 100e6) == Approx(10e-6 + 0.875e-3));
  CHECK(collective_time_s(link, CollectiveKind::ReduceScatter, 2, 100e6) == Approx(10e-6 + 0.5e-3));
  CHECK(collective_time_s(link, CollectiveKind::AllReduce, 1, 100e6) == 0);
}

TEST_CASE("collective time grows with bytes and with TP size", "[cost][collective]") {
  for (const char* gpu : {"a800", "h20", "h100", "h200"}) {
    Profile p = load_profile(gpu);
    for (const auto& [link_name, link] : p.links) {
      for (CollectiveKind k :
           {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter}) {
        double previous = 0;
        for (double bytes = 1024; bytes < 1e10; bytes *= 4) {
          double t = collective_time_s(link, k, 8, bytes);
          // Below a published table's first row small messages sit at the latency floor.
          if (has_measured_rows(link, k, 8) && t == link.latency_s) {
            CHECK(t >= previous);
          } else {
            CHECK(t > previous);
          }
          previous = t;
        }
        previous = 0;
        for (int ranks : {2, 4, 8, 16, 32}) {
          double t = collective_time_s(link, k, ranks, 64e6);
          CHECK(t > previous);
          previous = t;
        }
      }
    }
  }
  // And through the cost model: a larger TP group moves the same bytes more slowly.
  double previous = 0;
  for (int tp : {2, 4}) {
    Study s = study_of("qwen2-7b", "a800x16", tp, 2, 4096, false);
    const CostModel cm = build_cost_model(s, load_profile("a800"), 2);
    const double t = collective_of(cm.chunks[0].layer(0)[1][Phase::F]).time_s;
    CHECK(t > previous);
    previous = t;
  }
}

TEST_CASE("a measured collective table takes precedence and is interpolated log-log in bytes",
          "[cost][collective]") {
  LinkProfile link;
  link.latency_s = 1;  // would dominate if the table were ignored
  link.bus_bandwidth_Bps = 1;
  link.measured = std::make_shared<const CollectiveRows>(
      CollectiveRows{{CollectiveKind::AllReduce, {{8, 1e6, 20e-6}, {8, 3e6, 40e-6}}}});
  // log-linear between (1e6, 20 us) and (3e6, 40 us): 20 us x 2^(ln 2 / ln 3).
  CHECK(collective_time_s(link, CollectiveKind::AllReduce, 8, 2e6) ==
        Approx(20e-6 * std::pow(2.0, std::log(2.0) / std::log(3.0))));
  CHECK(collective_time_s(link, CollectiveKind::AllReduce, 8, 6e6) == Approx(80e-6));
  CHECK(collective_time_s(link, CollectiveKind::AllReduce, 8, 1e3) == Approx(20e-6));
  // No row for 4 ranks: the 8-rank rows at the same bus bandwidth, 4 ranks' bus factor.
  CHECK(collective_time_s(link, CollectiveKind::AllReduce, 4, 1e6) == Approx(20e-6 * 1.5 / 1.75));
  // No row for the collective: the latency + bandwidth model.
  CHECK(collective_time_s(link, CollectiveKind::AllGather, 8, 1e6) > 1);
}

TEST_CASE("a TP group wider than a node uses the inter-node link", "[cost][collective]") {
  namespace fs = std::filesystem;
  const fs::path& dir = test::scratch_dir();
  std::ofstream(dir / "c4.yaml") << "name: c4\nnodes: 4\ngpus_per_node: 4\nprofile: a800\n";
  StudyOverrides o;
  o.cluster = (dir / "c4.yaml").string();
  o.tp = 8;
  o.pp = 2;
  Study wide = load_study(resolve_config("studies", "default"), o);
  Study narrow = load_study(resolve_config("studies", "default"));
  Profile p = load_profile("a800");
  const CostModel wide_cm = build_cost_model(wide, p, 4),
                  narrow_cm = build_cost_model(narrow, p, 4);
  const Collective w = collective_of(wide_cm.chunks[0].layer(0)[1][Phase::F]);
  const Collective n = collective_of(narrow_cm.chunks[0].layer(0)[1][Phase::F]);
  CHECK(w.time_s == Approx(collective_time_s(p.link("ib"), CollectiveKind::AllReduce, 8, w.bytes)));
  CHECK(n.time_s ==
        Approx(collective_time_s(p.link("nvlink"), CollectiveKind::AllReduce, 8, n.bytes)));
  CHECK(w.time_s > n.time_s);
}

TEST_CASE("W is the weight-gradient GEMMs, and B adds attention backward and elementwise work",
          "[cost][time]") {
  Study s = load_study(resolve_config("studies", "default"));
  Profile p = load_profile("a800");
  CostModel cm = build_cost_model(s, p, 4);
  const auto l = cm.chunks[1].layer(0);
  // MLP W: one FC2 weight-gradient GEMM of 2 x T x f x h / t FLOPs by the tile model, plus the
  // read and write of its f x h / t fp32 main gradients (gradient-accumulation fusion, in the
  // GEMM's epilogue: no kernel of its own). The GEMM is h x f/t x T = 8192 x 3696 x 6144: as
  // 256x128 tiles 32 x 29 = 928 tiles, 9 waves of 108 (as 128x256, 64 x 15 = 960: 9 waves too;
  // the first orientation is kept), each tile K + 256 steps at 0.881 of an SM's share of peak.
  const double flops = 2.0 * 6144 * 29568 * 8192 / 8;
  const GemmTileModel& g = p.gemm.tiles;
  REQUIRE(g.tile_m == 256);
  REQUIRE(p.sms == 108);
  const double gemm_s = g.fixed_s + 9 * 2.0 * 256 * 128 * (6144 + g.k_overhead) /
                                        (p.peak_flops / 108 * g.wave_efficiency);
  REQUIRE(s.training.gradient_accumulation_fusion);
  const double main_grad_bytes = 2 * s.training.grad_bytes_per_param * 29568.0 * 8192 / 8;
  CHECK(l[3][Phase::W].time_s ==
        Approx(gemm_s + main_grad_bytes / (p.hbm_bandwidth_Bps * p.memory_bound_efficiency)));
  CHECK(l[3][Phase::W].flops == flops);
  for (const auto& u : l) {
    // B runs the input-gradient GEMM (as many FLOPs as W's) and, in Attn, attention backward.
    CHECK(u[Phase::B].flops >= u[Phase::W].flops);
    CHECK(u[Phase::F].time_s > 0);
  }
  // Attention core: causal forward 2 x T x s x q / t FLOPs; backward counted as 2x (model).
  const double core = 2.0 * 6144 * 6144 * 8192 / 8;
  CHECK(l[1][Phase::F].flops == Approx(core + 2.0 * 6144 * 8192 * 8192 / 8));
  CHECK(l[1][Phase::B].flops == Approx(2 * core + 2.0 * 6144 * 8192 * 8192 / 8));
}

TEST_CASE("parameters per chunk add up to the model and static memory follows the training config",
          "[cost][params]") {
  Study s = study_of("qwen2-7b", "a800x16", 1, 4, 4096, false);  // vocab 152064 = 1188 x 128
  CostModel cm = build_cost_model(s, load_profile("a800"), 4);
  double params = 0;
  for (const auto& c : cm.chunks) params += c.params;
  CHECK(params == Approx(count_parameters(s.model).total));
  // dp = 16 / 4 = 4; distributed optimizer: 2 + 4 + 12 / 4 bytes per parameter.
  CHECK(s.parallel.dp == 4);
  CHECK(cm.chunks[1].static_bytes == Approx(cm.chunks[1].params * 9));
  CHECK(cm.chunks[0].prologue.front().kind == UnitKind::Embedding);
  CHECK(cm.chunks[3].epilogue.front().kind == UnitKind::Head);
  CHECK(cm.chunks[0].layers.size() == 7);
  CHECK(cm.node_of_rank == std::vector<int>{0, 0, 1, 1});
}

TEST_CASE("uneven and explicit layer splits work, and impossible splits are errors",
          "[cost][split]") {
  Study s = load_study(resolve_config("studies", "default"));  // 11 layers
  Profile p = load_profile("a800");
  CostModel cm = build_cost_model(s, p, 4);
  CHECK(cm.chunks[0].layers.size() == 3);
  CHECK(cm.chunks[3].layers.size() == 2);
  CHECK(cm.chunks[3].layer_units.back().layer == 10);
  LayerSplit split{{2, 3, 3, 3}};
  CHECK(build_cost_model(s, p, 4, split).chunks[0].layers.size() == 2);
  CHECK_THROWS_AS(build_cost_model(s, p, 12), InputError);
  CHECK_THROWS_AS(build_cost_model(s, p, 4, LayerSplit{{2, 3, 3}}), InputError);
  CHECK_THROWS_AS(build_cost_model(s, p, 4, LayerSplit{{2, 3, 3, 4}}), InputError);
}

TEST_CASE("selective recomputation reruns the attention forward (full: tests/megatron_test.cpp)",
          "[cost][recompute]") {
  Profile p = load_profile("a800");
  Study plain = load_study(resolve_config("studies", "default"));
  StudyOverrides o;
  o.recompute = Recompute::Selective;
  Study selective = load_study(resolve_config("studies", "default"), o);
  CostModel a = build_cost_model(plain, p, 4), b = build_cost_model(selective, p, 4);
  const PhaseCost& before = a.chunks[1].layer(0)[1][Phase::B];
  const PhaseCost& after = b.chunks[1].layer(0)[1][Phase::B];
  const double core = 2.0 * 6144 * 6144 * 8192 / 8;  // causal attention forward, one GPU
  CHECK(after.time_s - before.time_s == Approx(core / (p.peak_flops * p.attention_fwd_efficiency)));
  CHECK(after.hw_flops - before.hw_flops == Approx(core));
  CHECK(after.flops == before.flops);                                   // model FLOPs unchanged
  CHECK(b.chunks[1].activation_bytes == a.chunks[1].activation_bytes);  // FlashAttention: no s^2
  CHECK(b.model_flops == a.model_flops);
  CHECK(b.hardware_flops > a.hardware_flops);
}

TEST_CASE("a vision-language model puts the ViT before the embedding on stage 0",
          "[cost][vision]") {
  StudyOverrides o;
  o.model = "qwen2-vl-28.8b";
  o.vision_placement = VisionPlacement::FirstStage;  // the default (separate): multimodal_test
  Study s = load_study(resolve_config("studies", "default"), o);
  CostModel cm = build_cost_model(s, load_profile("a800"), 4);
  const auto& pro = cm.chunks[0].prologue;
  REQUIRE(pro.size() == 1 + 32 * 4 + 1 + 1);
  CHECK(pro.front().kind == UnitKind::VisionPatch);
  CHECK(pro[1].vision);
  CHECK(pro[1].kind == UnitKind::PreAttn);
  CHECK(pro[pro.size() - 2].kind == UnitKind::VisionMerger);
  CHECK(pro.back().kind == UnitKind::Embedding);
  CHECK(cm.chunks[1].prologue.empty());
  double params = 0;
  for (const auto& c : cm.chunks) params += c.params;
  CHECK(params * 8 == Approx(count_parameters(s.model).total).epsilon(0.01));  // vocab padding
}

TEST_CASE("the unit-costs option takes four or five numbers with tf and ma positive",
          "[cost][uniform]") {
  const UniformCosts c = parse_unit_costs("1,2,3,0.5");
  CHECK(c.tf == 1);
  CHECK(c.tb == 2);
  CHECK(c.tw == 3);
  CHECK(c.tar == 0.5);
  CHECK(c.ma == 1);  // the default
  CHECK(parse_unit_costs("4,8,8,0,2.5").ma == 2.5);
  CHECK(parse_unit_costs("1e-3,0,0,0").tf == 1e-3);
}

TEST_CASE("the unit-costs option refuses a trailing comma, ma = 0 and anything but 4 or 5 numbers",
          "[cost][uniform]") {
  for (const char* bad : {"1,2,3,4,", "1,2,3,4,0", "1,2,3", "1,2,3,4,5,6", "", "1,,3,4", ",1,2,3,4",
                          "0,2,3,1", "1,x,3,1", "1,2,3,-1", "1,2,3,inf", "1,2,nan,4", "1;2;3;4"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_unit_costs(bad, "--unit-costs"),
                      Catch::Contains("--unit-costs") && Catch::Contains("tf,tb,tw,tar[,ma]"));
  }
}

TEST_CASE("simulate and theory refuse the same --unit-costs with the same line", "[cost][cli]") {
  for (const char* bad : {"1,2,3,4,", "1,2,3,4,0"}) {
    INFO(bad);
    const test::CliRun sim = test::run_braid(
        std::string("simulate --schedule 1f1b --pp 2 --microbatches 4 --unit-costs ") + bad);
    const test::CliRun theory = test::run_braid(
        std::string("theory --schedule 1f1b --pp 2 --microbatches 4 --unit-costs ") + bad);
    CHECK(sim.exit_code == 2);
    CHECK(theory.exit_code == 2);
    CHECK(test::count_lines(sim.err) == 1);
    CHECK(sim.err == theory.err);
  }
}

TEST_CASE("MLA's units: the latents' TP collectives, its GEMM FLOPs and what it saves, by hand",
          "[cost][mla]") {
  // DeepSeek-V3's attention widths on an 8-layer dense model: h 7168, 128 heads, q_lora 1536,
  // kv_lora 512, qk 128, rope 64, v 128; tp 4 with SP, seq 4096, mbs 1 (T 4096, Ts 1024).
  const std::string file = (test::scratch_dir() / "mla-dense.yaml").string();
  std::ofstream(file) << "name: mla-dense\nlayers: 8\nhidden: 7168\nheads: 128\nffn: 18432\n"
                         "vocab: 129280\nmla:\n  q_lora_rank: 1536\n  kv_lora_rank: 512\n"
                         "  qk_head_dim: 128\n  qk_pos_emb_head_dim: 64\n  v_head_dim: 128\n";
  Study s = study_of(file, "a800x16", 4, 2, 4096, true);
  CostModel cm = build_cost_model(s, load_profile("a800"), 2);
  const auto l = cm.chunks[0].layer(0);
  // PreAttn gathers the up-projections' inputs, not the hidden state: 4096 x (1536 + 512 + 64)
  // x 2 bytes = 17,301,504; its backward reduce-scatters the same, and gathers the latents the
  // up-projections saved sharded again (k_pos_emb's gather has a reduce-scatter as backward):
  // 4096 x (1536 + 512) x 2 = 16,777,216.
  CHECK(collective_of(l[0][Phase::F]).kind == CollectiveKind::AllGather);
  CHECK(collective_of(l[0][Phase::F]).bytes == 17'301'504);
  const Collectives& pre_attn_b = l[0][Phase::B].collectives;
  REQUIRE(pre_attn_b.size() == 2);
  CHECK(pre_attn_b[0].kind == CollectiveKind::ReduceScatter);
  CHECK(pre_attn_b[0].bytes == 17'301'504);
  CHECK(pre_attn_b[1].kind == CollectiveKind::AllGather);
  CHECK(pre_attn_b[1].position == CollectivePosition::Inside);
  CHECK(pre_attn_b[1].bytes == 16'777'216);
  // Attn's are a dense layer's: 4096 x 7168 x 2.
  CHECK(collective_of(l[1][Phase::F]).bytes == 4096.0 * 7168 * 2);
  // PreAttn FLOPs: the duplicated down-projection over the GPU's 1024 tokens, 2 x 1024 x 7168 x
  // 2112 = 31,004,295,168; the up-projections over all 4096 tokens at 128 / 4 heads: q 1536 x
  // 32 x 192 = 9,437,184, kv 512 x 32 x 256 = 4,194,304, 2 x 4096 x 13,631,488 =
  // 111,669,149,696. Sum 142,673,444,864.
  CHECK(l[0][Phase::F].flops == 142'673'444'864.0);
  // Attn FLOPs: causal QK^T at 192 and P.V at 128 per head, 4096 x 4096 x 32 x (192 + 128) =
  // 171,798,691,840; out-projection 2 x 4096 x (32 x 128) x 7168 = 240,518,168,576.
  CHECK(l[1][Phase::F].flops == 171'798'691'840.0 + 240'518'168'576.0);
  // PreAttn saves the norm and GEMM inputs of the hidden state and of the two latents, sharded:
  // 2 x 1024 x (7168 + 2048) x 2 bytes = 37,748,736.
  CHECK(l[0][Phase::F].alloc_bytes == 37'748'736);
  // Attn saves q, k, v (4096 x 32 x (192 + 192 + 128) x 2 = 134,217,728) and the
  // out-projection's input (4096 x 32 x 128 x 2 = 33,554,432).
  CHECK(l[1][Phase::F].alloc_bytes == 134'217'728.0 + 33'554'432.0);
  // Every unit frees what it allocates.
  for (const auto& u : l) {
    double alloc = 0, freed = 0;
    for (const auto& p : u.phase) {
      alloc += p.alloc_bytes;
      freed += p.free_bytes;
    }
    CHECK(alloc == Approx(freed));
  }
}

TEST_CASE("sliding-window attention: a windowed layer's core attention FLOPs, counted by hand",
          "[cost][window]") {
  // 4 layers, h 64, 4 heads of 16 (q = 64), window 3 on every layer but each second
  // (full_attention_every 2: layers 0 and 2 windowed, 1 and 3 full); tp 1, seq 8, mbs 1 (T = 8).
  auto model = [](const std::string& name, int window) {
    std::string file = (test::scratch_dir() / (name + ".yaml")).string();
    std::ofstream(file) << "name: " << name
                        << "\nlayers: 4\nhidden: 64\nheads: 4\nffn: 128\nvocab: 1000\n"
                           "sliding_window: "
                        << window << "\nfull_attention_every: 2\n";
    return file;
  };
  Study s = study_of(model("swa-tiny", 3), "a800x16", 1, 2, 8, false);
  REQUIRE(s.model.sliding_window == 3);
  const Profile p = load_profile("a800");
  CostModel cm = build_cost_model(s, p, 2);
  // The Attn unit of each LM layer, by layer number.
  auto attn_units = [](const CostModel& c) {
    std::vector<UnitCost> out(4);
    for (const ChunkCost& chunk : c.chunks)
      for (int i = 0; i < static_cast<int>(chunk.layers.size()); ++i) {
        const auto l = chunk.layer(i);
        out.at(static_cast<std::size_t>(l[1].layer)) = l[1];
      }
    return out;
  };
  const std::vector<UnitCost> attn = attn_units(cm);
  const UnitCost &windowed = attn[0], &full = attn[1];
  // Out-projection: 2 x T x q x h = 2 x 8 x 64 x 64 = 65,536 in every layer.
  // Full causal core (QK^T and P.V, half the 8 x 8 scores): 2 x 2 x T x (seq / 2) x q =
  // 4 x 8 x 4 x 64 = 8,192.
  CHECK(full[Phase::F].flops == 8'192.0 + 65'536.0);
  // Window 3: positions 0..7 see 1, 2, 3, 3, 3, 3, 3, 3 keys, 21 in all: 2 x 2 x 21 x 64 = 5,376.
  CHECK(windowed[Phase::F].flops == 5'376.0 + 65'536.0);
  CHECK(windowed[Phase::B].flops == 2 * 5'376.0 + 65'536.0);  // backward: 2 x the forward's
  CHECK(windowed[Phase::F].time_s < full[Phase::F].time_s);
  // Layer 2 is windowed again, layer 3 full.
  CHECK(attn[2][Phase::F].flops == windowed[Phase::F].flops);
  CHECK(attn[3][Phase::F].flops == full[Phase::F].flops);
  // Model FLOPs of the step: 2 windowed layers' 3 x (8,192 - 5,376) = 8,448 fewer per microbatch.
  Study plain = study_of(model("swa-tiny-none", 8), "a800x16", 1, 2, 8, false);
  const CostModel none = build_cost_model(plain, p, 2);
  // A window as long as the sequence is full causal attention (seq / 2 keys per query).
  CHECK(attn_units(none)[0][Phase::F].flops == full[Phase::F].flops);
  const double microbatches = double(s.training.microbatches) * s.parallel.dp;
  CHECK(none.model_flops - cm.model_flops == Approx(2 * 3 * 2'816.0 * microbatches));
}

TEST_CASE("sliding-window attention under context parallelism: a2a only, else one error",
          "[cost][window][errors]") {
  const std::string file = (test::scratch_dir() / "swa-cp.yaml").string();
  std::ofstream(file) << "name: swa-cp\nlayers: 4\nhidden: 64\nheads: 4\nffn: 128\nvocab: "
                         "1000\nsliding_window: 128\n";
  StudyOverrides o = test::layout_overrides(file, "a800x16", 1, 2, 1024, false);
  o.cp = 2;
  const Profile p = load_profile("a800");
  const Study ring = load_study(resolve_config("studies", "default"), o);
  try {
    build_cost_model(ring, p, 2);
    FAIL("p2p context parallelism with a window was accepted");
  } catch (const InputError& e) {
    CHECK(e.field == "parallel.cp_comm_type");
  }
  o.cp_comm_type = CpCommType::A2A;
  CHECK_NOTHROW(build_cost_model(load_study(resolve_config("studies", "default"), o), p, 2));
}
