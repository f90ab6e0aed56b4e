// Megatron GPT models on A100 clusters: parameter counts of the four published sizes, activation
// memory per layer against Korthikanti et al.'s formulas (arXiv 2205.05198, reference §D.3) for
// every recomputation mode with and without sequence parallelism, recomputation's extra work
// (hardware FLOPs and time, never model FLOPs), Narayanan et al.'s FLOPs formulas, the A100 Selene
// cluster (--nodes, rank placement, P2P over InfiniBand) and the eight Megatron studies.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/error.hpp"
#include "braid/profile.hpp"
#include "braid/schedule.hpp"
#include "fixtures.hpp"

using namespace braid;
using test::collective_of;

namespace {

const char* const kModels[] = {"megatron-22b", "gpt3-175b", "turing-530b", "megatron-1t"};

std::string study_path(const std::string& model, const std::string& variant) {
  return "configs/studies/megatron/" + model + "-" + variant + ".yaml";
}

Study megatron_study(const std::string& model, const std::string& variant,
                     const StudyOverrides& o = {}) {
  return load_study(resolve_config("studies", study_path(model, variant)), o);
}

// GPT-3 175B with pp 8, one chunk per rank, the given recomputation, SP, tp and micro-batch.
Study gpt3(Recompute r, bool sp, int tp = 8, int mbs = 1) {
  // pp 8 x tp GPUs, 8 per node.
  return megatron_study(
      "gpt3-175b", "full",
      {.tp = tp, .vpp = 1, .mbs = mbs, .nodes = tp, .sequence_parallel = sp, .recompute = r});
}

double f_alloc(std::span<const UnitCost> layer) {
  double sum = 0;
  for (const auto& u : layer) sum += u[Phase::F].alloc_bytes;
  return sum;
}

double phase_sum(std::span<const UnitCost> layer, Phase p, double PhaseCost::*field) {
  double sum = 0;
  for (const auto& u : layer) sum += u[p].*field;
  return sum;
}

double recompute_sum(std::span<const UnitCost> layer, double PhaseCost::*field) {
  double sum = 0;
  for (const auto& u : layer) sum += u.recompute.*field;
  return sum;
}

}  // namespace

TEST_CASE("the four Megatron GPT models have the parameter counts of their names (within 1 %)",
          "[megatron][params]") {
  const auto [model, name_params] = GENERATE(table<const char*, double>({{"megatron-22b", 22e9},
                                                                         {"gpt3-175b", 175e9},
                                                                         {"turing-530b", 530e9},
                                                                         {"megatron-1t", 1e12}}));
  INFO(model);
  ModelConfig m = load_model(resolve_config("models", model));
  CHECK(m.activation == MlpActivation::GeLU);
  CHECK(m.kv_heads == m.heads);
  CHECK(m.ffn == 4 * m.hidden);
  CHECK(m.position == PositionEmbedding::Learned);
  CHECK(m.tied_embeddings);
  const ParameterCount pc = count_parameters(m);
  // 12h^2 + 13h per layer (QKV, out-projection, FC1, FC2 with biases, two LayerNorms).
  const double h = m.hidden;
  CHECK(pc.per_layer == 12 * h * h + 13 * h);
  // Token embedding (51200 x h) + learned positions (2048 x h), the output layer tied to it.
  CHECK(pc.embedding == (51200.0 + 2048.0) * h);
  CHECK(pc.head == 2 * h);
  CHECK(pc.total == Approx(name_params).epsilon(0.01));
}

TEST_CASE("Megatron pads the vocabulary to a multiple of 128 x tp in the sharded embedding",
          "[megatron][params]") {
  // 51200 = 50 x 1024 is already a multiple of 128 x 8; tp 6 (128 x 6 = 768) pads it to
  // 67 x 768 = 51456 rows, 8576 per GPU.
  StudyOverrides o;
  o.tp = 6;
  o.vpp = 1;
  o.nodes = 6;  // pp 8 x tp 6 = 48 GPUs
  Study s = megatron_study("gpt3-175b", "full", o);
  CostModel cm = build_cost_model(s, load_profile("a100"), 8);
  const double h = 12288;
  // Per layer on one GPU: QKV, out-projection, FC1, FC2 and the QKV and FC1 biases sharded
  // (12h^2 + 7h), the two LayerNorms and the two row-parallel biases replicated (6h).
  const double layer = (12 * h * h + 7 * h) / 6 + 6 * h;
  // Stage 0: the embedding shard, the (replicated) position embeddings and 12 layers.
  CHECK(cm.chunks[0].params == Approx(8576 * h + 2048 * h + 12 * layer).epsilon(1e-12));
  // Last stage: 12 layers, the final LayerNorm and the tied output layer's shard.
  CHECK(cm.chunks[7].params == Approx(12 * layer + 2 * h + 8576 * h).epsilon(1e-12));
}

TEST_CASE("GPT activation memory per layer equals Korthikanti et al.'s formulas",
          "[megatron][memory]") {
  // s b h (34 + 5 a s / h) without parallelism; reference §D.3 for TP, SP and recomputation.
  Profile p = load_profile("a100");
  struct Case {
    Recompute recompute;
    bool sp;
    int tp;
    int mbs;
    const char* label;
  };
  for (Case c :
       {Case{Recompute::None, false, 8, 1, "none"}, Case{Recompute::None, false, 1, 1, "none tp1"},
        Case{Recompute::None, false, 4, 2, "none tp4 b2"},
        Case{Recompute::None, true, 8, 1, "none sp"},
        Case{Recompute::Selective, false, 8, 1, "selective"},
        Case{Recompute::Selective, true, 8, 2, "selective sp b2"},
        Case{Recompute::Full, false, 8, 1, "full"}, Case{Recompute::Full, true, 8, 1, "full sp"}}) {
    INFO(c.label);
    Study st = gpt3(c.recompute, c.sp, c.tp, c.mbs);
    CostModel cm = build_cost_model(st, p, 8);
    const double s = 2048, b = c.mbs, h = 12288, a = 96, t = c.tp;
    const double sbh = s * b * h;
    double expected = 0;
    switch (c.recompute) {
      case Recompute::None:
        expected =
            c.sp ? sbh * (34 / t + 5 * a * s / (h * t)) : sbh * (10 + 24 / t + 5 * a * s / (h * t));
        break;
      case Recompute::Selective:
        expected = c.sp ? 34 * sbh / t : sbh * (10 + 24 / t);
        break;
      case Recompute::Full:
        expected = c.sp ? 2 * sbh / t : 2 * sbh;  // the layer input, sharded under SP
        break;
    }
    const auto layer = cm.chunks[3].layer(0);
    CHECK(f_alloc(layer) == Approx(expected).epsilon(1e-12));
    // Stage 3 holds 12 layers and nothing else.
    CHECK(cm.chunks[3].activation_bytes == Approx(12 * expected).epsilon(1e-12));
    // Everything allocated (forward, recomputation, backward) is freed by B and W.
    const double alloc = f_alloc(layer) + phase_sum(layer, Phase::B, &PhaseCost::alloc_bytes) +
                         recompute_sum(layer, &PhaseCost::alloc_bytes);
    const double freed = phase_sum(layer, Phase::B, &PhaseCost::free_bytes) +
                         phase_sum(layer, Phase::W, &PhaseCost::free_bytes);
    CHECK(alloc == Approx(freed).epsilon(1e-12));
  }
}

TEST_CASE("full recomputation keeps the layer input and reruns the forward, with its collectives",
          "[megatron][recompute]") {
  Profile p = load_profile("a100");
  for (bool sp : {false, true}) {
    INFO("sp " << sp);
    CostModel none = build_cost_model(gpt3(Recompute::None, sp), p, 8);
    CostModel full = build_cost_model(gpt3(Recompute::Full, sp), p, 8);
    CHECK(full.recompute == Recompute::Full);
    CHECK(none.recompute == Recompute::None);
    double rerun_hw_flops = 0;
    for (std::size_t v = 0; v < full.chunks.size(); ++v) {
      for (std::size_t l = 0; l < full.chunks[v].layers.size(); ++l) {
        const auto a = none.chunks[v].layer(l);
        const auto b = full.chunks[v].layer(l);
        for (int k = 0; k < 4; ++k) {
          const UnitCost& u0 = a[k];
          const UnitCost& u1 = b[k];
          // The rerun is the forward again: same time, same hardware FLOPs, same collective,
          // and it saves what the plain forward saved (less the kept layer input).
          CHECK(u1.recompute.time_s == u0[Phase::F].time_s);
          CHECK(u1.recompute.hw_flops == u0[Phase::F].hw_flops);
          CHECK(u1.recompute.flops == 0);
          CHECK(collective_of(u1.recompute).kind == collective_of(u0[Phase::F]).kind);
          CHECK(collective_of(u1.recompute).position == collective_of(u0[Phase::F]).position);
          CHECK(collective_of(u1.recompute).time_s == collective_of(u0[Phase::F]).time_s);
          CHECK(u1.recompute.alloc_bytes + u1[Phase::F].alloc_bytes ==
                Approx(u0[Phase::F].alloc_bytes));
          // Forward, backward and weight gradient themselves are unchanged.
          for (Phase ph : {Phase::F, Phase::B, Phase::W}) {
            CHECK(u1[ph].time_s == u0[ph].time_s);
            CHECK(u1[ph].flops == u0[ph].flops);
            CHECK(u1[ph].hw_flops == u0[ph].hw_flops);
            CHECK(u1[ph].free_bytes == u0[ph].free_bytes);
          }
          CHECK(a[k].recompute.time_s == 0);
          rerun_hw_flops += u1.recompute.hw_flops;
        }
      }
    }
    // Collectives of the rerun: without SP the All-Reduces after Attn and MLP, with SP the
    // All-Gathers before PreAttn and PreMLP and the Reduce-Scatters after Attn and MLP.
    const auto layer = full.chunks[0].layer(0);
    CHECK(collective_of(layer[1].recompute).kind ==
          (sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce));
    CHECK(collective_of(layer[0].recompute).kind ==
          (sp ? CollectiveKind::AllGather : CollectiveKind::None));
    // Model FLOPs exclude the rerun; hardware FLOPs add exactly it (x tp GPUs x microbatches).
    CHECK(full.model_flops == none.model_flops);
    CHECK(full.hardware_flops ==
          Approx(none.hardware_flops + rerun_hw_flops * 8 * 64).epsilon(1e-12));
  }
}

TEST_CASE("selective recomputation reruns the unfused core attention inside the backward",
          "[megatron][recompute]") {
  Profile p = load_profile("a100");
  CostModel none = build_cost_model(gpt3(Recompute::None, true), p, 8);
  CostModel sel = build_cost_model(gpt3(Recompute::Selective, true), p, 8);
  const PhaseCost& b0 = none.chunks[2].layer(1)[1][Phase::B];
  const PhaseCost& b1 = sel.chunks[2].layer(1)[1][Phase::B];
  // The core attention forward on one GPU: QK^T and P.V over the full s x s (unfused kernels
  // mask, they do not skip): 4 x T x s x q / t FLOPs as batched GEMMs, one per sample and head
  // (12 on a GPU), and 13 bytes per score element (QK^T write 2, softmax 4, dropout 5, P.V read 2)
  // of a / t x s x T elements in two kernels (softmax, dropout). By the tile model (a100: 256x128
  // tiles, 108 SMs): QK^T (2048 x 2048 x 128) is 8 x 16 x 12 = 1536 tiles, 15 waves of K 128;
  // P.V (2048 x 128 x 2048) is 8 x 1 x 12 = 96 tiles, one wave of K 2048 (under one wave split-K
  // may apply, and is slower here: 2 waves of K 1024 + 256 > 1 wave of 2048 + 256).
  const double T = 2048, s = 2048, q = 12288, t = 8, a = 96;
  const double gemm_flops = 4 * T * s * q / t;
  const GemmTileModel& g = p.gemm.tiles;
  REQUIRE(g.tile_m == 256);
  REQUIRE(p.sms == 108);
  const double step_s = 2.0 * 256 * 128 / (p.peak_flops / 108 * g.wave_efficiency);
  const double gemm_s =
      2 * g.fixed_s + 15 * (128 + g.k_overhead) * step_s + 1 * (2048 + g.k_overhead) * step_s;
  const double score_bytes = 13 * a / t * s * T;
  const double rerun_s = gemm_s + 2 * p.memory_kernel_s +
                         score_bytes / (p.hbm_bandwidth_Bps * p.memory_bound_efficiency);
  CHECK(b1.time_s - b0.time_s == Approx(rerun_s).epsilon(1e-9));
  CHECK(b1.hw_flops - b0.hw_flops == Approx(gemm_flops).epsilon(1e-12));
  CHECK(b1.flops == b0.flops);
  CHECK(sel.model_flops == none.model_flops);
  CHECK(sel.hardware_flops ==
        Approx(none.hardware_flops + gemm_flops * 96 * 8 * 64).epsilon(1e-12));
  // The s x s tensors (softmax output 2, dropout mask 1, dropout output 2 bytes per element) live
  // only while the backward runs: allocated at its start, freed at its end.
  CHECK(b1.alloc_bytes - b0.alloc_bytes == Approx(5 * a / t * s * T));
  CHECK(b1.free_bytes == Approx(b0.free_bytes));
}

TEST_CASE("FLOPs per iteration follow Narayanan et al.'s formulas for GPT models",
          "[megatron][flops]") {
  // Hardware FLOPs with full recomputation: 96 B s l h^2 (1 + s/6h + V/16lh) (reference §D.1) —
  // unfused attention computes the whole s x s, and the logits are never recomputed. Model FLOPs:
  // braid halves causal attention (as current Megatron does): 72 B s l h^2 (1 + s/12h + V/12lh).
  Profile p = load_profile("a100");
  for (const char* model : kModels) {
    INFO(model);
    Study st = megatron_study(model, "full");
    CostModel cm = build_cost_model(st, p, st.parallel.pp * st.parallel.vpp);
    const double B = cm.samples_per_iteration, s = 2048, l = st.model.layers, h = st.model.hidden;
    const double V = 51200;  // already a multiple of 128 x 8
    CHECK(cm.hardware_flops ==
          Approx(96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))).epsilon(1e-12));
    CHECK(cm.model_flops ==
          Approx(72 * B * s * l * h * h * (1 + s / (12 * h) + V / (12 * l * h))).epsilon(1e-12));
  }
}

TEST_CASE("the A100 Selene cluster: 512 GPUs, --nodes, TP on NVLink, pipeline P2P over IB",
          "[megatron][cluster]") {
  ClusterConfig c = load_cluster(resolve_config("clusters", "a100-selene"));
  CHECK(c.gpus() == 512);
  CHECK(c.gpus_per_node == 8);
  Profile p = load_profile(c.profile);
  CHECK(p.peak_flops == 312e12);
  CHECK(p.link("nvlink").bus_bandwidth_Bps == 230e9);
  CHECK(p.link("ib").p2p_bandwidth_Bps == 22.5e9);

  // The study's `nodes:` picks 8 of the 64 nodes; --nodes 16 doubles them (data parallel 2).
  Study s = megatron_study("gpt3-175b", "full");
  CHECK(s.cluster.nodes == 8);
  CHECK(s.parallel.dp == 1);
  StudyOverrides o;
  o.nodes = 16;
  Study s16 = megatron_study("gpt3-175b", "full", o);
  CHECK(s16.cluster.gpus() == 128);
  CHECK(s16.parallel.dp == 2);
  o.nodes = 3;  // 24 GPUs cannot hold tp 8 x pp 8
  CHECK_THROWS_AS(megatron_study("gpt3-175b", "full", o), InputError);

  // Megatron's rank order: tp fastest, then dp, then pp. With tp 8 and dp 1 every pipeline rank
  // is a node of its own, so every P2P crosses InfiniBand; with dp 2 a rank spans two nodes.
  CostModel cm = build_cost_model(s, p, 24);
  CHECK(cm.node_of_rank == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(cm.inter_p2p_Bps == 22.5e9);
  CHECK(cm.intra_p2p_Bps == 237e9);
  // 48 MiB of activations between stages 0 and 1 (nodes 0 and 1): with Megatron's scatter/gather
  // (default, no SP) each GPU sends its 1/8 over one HDR NIC, then the receiver all-gathers the
  // slices on NVLink (10 us + 7/8 x bytes / 230 GB/s); without it the whole tensor crosses.
  const double bytes = 2048.0 * 12288 * 2;
  CHECK(cm.p2p_scatter_gather);
  CHECK(cm.p2p_time_s(0, 1, bytes) ==
        Approx(cm.p2p_latency_s + bytes / 8 / 22.5e9 + 10e-6 + 7.0 / 8 * bytes / 230e9));
  Study whole = s;
  whole.training.p2p_scatter_gather = false;
  const CostModel cm_whole = build_cost_model(whole, p, 24);
  CHECK(cm_whole.p2p_time_s(0, 1, bytes) == Approx(cm_whole.p2p_latency_s + bytes / 22.5e9));
  CostModel cm16 = build_cost_model(s16, p, 24);
  CHECK(cm16.node_of_rank == std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14});
  // TP stays inside a node: the layer collectives are timed on NVLink.
  const Collective ar = collective_of(cm.chunks[1].layer(0)[1][Phase::F]);
  CHECK(ar.kind == CollectiveKind::AllReduce);
  CHECK(ar.time_s == collective_time_s(p.link("nvlink"), CollectiveKind::AllReduce, 8, ar.bytes));
}

TEST_CASE("the eight Megatron studies load with TP 8 and data parallel 1", "[megatron][studies]") {
  struct Case {
    const char* model;
    int gpus, pp, vpp, mbs, microbatches;
  };
  for (Case c :
       {Case{"megatron-22b", 8, 1, 1, 4, 1}, Case{"gpt3-175b", 64, 8, 3, 1, 64},
        Case{"turing-530b", 280, 35, 3, 1, 280}, Case{"megatron-1t", 512, 64, 1, 1, 512}}) {
    for (const char* variant : {"full", "selective-sp"}) {
      INFO(c.model << " " << variant);
      Study s = megatron_study(c.model, variant);
      CHECK(s.cluster.gpus() == c.gpus);
      CHECK(s.parallel.tp == 8);
      CHECK(s.parallel.dp == 1);
      CHECK(s.parallel.pp == c.pp);
      CHECK(s.parallel.vpp == c.vpp);
      CHECK(s.training.micro_batch_size == c.mbs);
      CHECK(s.training.microbatches == c.microbatches);
      CHECK(s.training.seq == 2048);
      const bool full = std::string(variant) == "full";
      CHECK(s.parallel.sequence_parallel == !full);
      CHECK(s.training.recompute == (full ? Recompute::Full : Recompute::Selective));
      CostModel cm = build_cost_model(s, load_profile(s.cluster.profile), c.pp * c.vpp);
      // Recomputation makes the hardware FLOPs exceed the model FLOPs in both variants.
      CHECK(cm.model_flops > 0);
      CHECK(cm.hardware_flops > cm.model_flops);
    }
  }
}

TEST_CASE("1f1b-i with one chunk per rank is plain 1F1B, and with one rank there is no pipeline",
          "[megatron][schedule]") {
  ScheduleOptions o;
  o.vpp = 1;
  for (int p : {1, 4, 64}) {
    for (int m : {1, 3, 8, 512}) {
      o.pp = p;
      o.microbatches = m;
      INFO("p " << p << " m " << m);
      CHECK(min_microbatches("1f1b-i", o) == 1);
      // Plain 1f1b refuses m < p (docs/schedules.md); 1f1b-i at one chunk runs it, as Megatron.
      if (m < p) {
        CHECK_THROWS_AS(make_schedule("1f1b", o), InputError);
        CHECK(validate(make_schedule("1f1b-i", o)).ok());
        continue;
      }
      Schedule a = make_schedule("1f1b-i", o), b = make_schedule("1f1b", o);
      CHECK(a.name == "1f1b-i");
      CHECK(a.vpp == 1);
      REQUIRE(a.ranks.size() == b.ranks.size());
      for (std::size_t r = 0; r < a.ranks.size(); ++r)
        CHECK(a.ranks[r].instructions == b.ranks[r].instructions);
      CHECK(validate(a).ok());
    }
  }
  // PP 1 (Megatron-22B): F B per microbatch; with chunks, forward through them and back.
  o.pp = 1;
  o.microbatches = 2;
  CHECK(format_program(make_schedule("1f1b-i", o).ranks[0]) == "F0.0 B0.0 F0.1 B0.1");
  o.vpp = 3;
  CHECK(min_microbatches("1f1b-i", o) == 1);
  Schedule s = make_schedule("1f1b-i", o);
  CHECK(format_program(s.ranks[0]) ==
        "F0.0 F1.0 F2.0 B2.0 B1.0 B0.0 F0.1 F1.1 F2.1 B2.1 B1.1 B0.1");
  CHECK(validate(s).ok());
}

TEST_CASE("the Megatron pipelines of PP 35 and PP 8 with 3 chunks are valid 1F1B-I schedules",
          "[megatron][schedule]") {
  struct Case {
    int pp, vpp, m;
  };
  for (Case c : {Case{35, 3, 280}, Case{8, 3, 64}, Case{64, 1, 512}}) {
    ScheduleOptions o;
    o.pp = c.pp;
    o.vpp = c.vpp;
    o.microbatches = c.m;
    INFO("pp " << c.pp << " vpp " << c.vpp);
    Schedule s = make_schedule("1f1b-i", o);
    ValidationResult v = validate(s);
    CHECK(v.ok());
    CHECK(s.virtual_stages() == c.pp * c.vpp);
  }
}
