// FP8 training precision (training.precision, --precision; docs/cost-model.md "FP8"): the names,
// an FP8 layer's GEMM and cast times and its memory computed by hand, the refusals on GPUs
// without FP8, and Megatron's --fp8-format / --fp8-recipe read and written back.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "braid/launch_args.hpp"
#include "braid/profile.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "cli_run.hpp"
#include "fixtures.hpp"

using namespace braid;

namespace {

// qwen2-7b (hidden 3584, 28 heads of 128, 4 KV heads, ffn 18944, SwiGLU) on one 8 x H200 node:
// tp 2, pp 1, seq 2048, one sample per microbatch, no SP.
Study qwen_tp2(Precision precision) {
  StudyOverrides o = test::layout_overrides("qwen2-7b", "h200x8", 2, 1, 2048, false);
  o.precision = precision;
  return load_study(resolve_config("studies", "default"), o);
}

// The H200 profile with every efficiency 1 and nothing fixed, so that times are FLOPs / peak and
// bytes / bandwidth: a GEMM's time is 2mnk / peak (the saturation curve with half_flops 0, no
// tiles), a memory-bound kernel's bytes / HBM bandwidth.
Profile ideal_h200() {
  Profile p = load_profile("h200");
  p.gemm.tiles = {};
  p.gemm.max_efficiency = 1;
  p.gemm.half_flops = 0;
  p.memory_bound_efficiency = 1;
  p.memory_kernel_s = 0;
  p.measured = nullptr;
  return p;
}

constexpr double kT = 2048, kT_TP = 2, kH = 3584, kF = 18944, kQ = 28 * 128, kKv = 4 * 128;

// qwen_tp2 with sequence parallelism.
Study qwen_tp2_sp(Precision precision, bool tp_comm_overlap = false) {
  StudyOverrides o = test::layout_overrides("qwen2-7b", "h200x8", 2, 1, 2048, true);
  o.precision = precision;
  o.tp_comm_overlap = tp_comm_overlap;
  return load_study(resolve_config("studies", "default"), o);
}

// ideal_h200 with a hand NVLink: 10 us latency, 475 GB/s bus bandwidth, no measured rows, so a
// collective of n ranks and B bytes takes 10 us + bus_factor(n) x B / 475 GB/s.
constexpr double kLatency = 10e-6, kBusBw = 475e9;
Profile hand_link_h200() {
  Profile p = ideal_h200();
  LinkProfile& nvlink = p.links.at("nvlink");
  nvlink.latency_s = kLatency;
  nvlink.bus_bandwidth_Bps = kBusBw;
  nvlink.measured.reset();
  nvlink.published = false;
  return p;
}

// The collectives of one group in a cost model, unit by unit.
std::vector<Collective> of_group(const CostModel& cm, Group g) {
  std::vector<Collective> out;
  for (const ChunkCost& c : cm.chunks)
    for_each_unit(c, [&](const UnitCost& u) {
      for (const PhaseCost& ph : u.phase)
        for (const Collective& col : ph.collectives)
          if (col.group == g) out.push_back(col);
    });
  return out;
}

}  // namespace

TEST_CASE("precision names: one name/parse pair, bf16 first", "[precision]") {
  CHECK(precision_names() ==
        std::vector<std::string>{"bf16", "fp8-delayed", "fp8-current", "fp8-blockwise", "mxfp8"});
  for (const std::string& n : precision_names()) CHECK(name(*parse_precision(n)) == n);
  CHECK_FALSE(parse_precision("fp8").has_value());
  CHECK(Study{}.training.precision == Precision::Bf16);
}

TEST_CASE("an FP8 layer: GEMMs at the FP8 peak, cast kernels by their bytes", "[precision][cost]") {
  const Profile p = ideal_h200();
  REQUIRE(p.fp8_peak_flops == 1979e12);
  REQUIRE(p.peak_flops == 989e12);
  const double bw = p.hbm_bandwidth_Bps;
  const CostModel bf16 = build_cost_model(qwen_tp2(Precision::Bf16), p, 1);
  const CostModel fp8 = build_cost_model(qwen_tp2(Precision::Fp8Delayed), p, 1);
  const CostModel current = build_cost_model(qwen_tp2(Precision::Fp8Current), p, 1);
  // The first layer's units: PreAttn, Attn, PreMLP, MLP.
  auto unit = [](const CostModel& cm, int u) { return cm.chunks[0].layer_units[u]; };
  // A GEMM of `flops` saves flops / bf16 peak - flops / FP8 peak.
  auto saved = [&](double flops) { return flops / p.peak_flops - flops / p.fp8_peak_flops; };
  const double fc2 = 2 * kT * kF * kH / kT_TP;  // FC2: 2048 x 9472 x 3584 per GPU
  SECTION("MLP: FC2's input cast in F, its output gradient's in B, none in W") {
    // F: cast FC2's input, 2048 x 9472 bf16 values, read 2 bytes and write 1 + 1 (the transpose).
    const double f_cast = 4 * kT * kF / kT_TP / bw;
    CHECK(unit(fp8, 3)[Phase::F].time_s ==
          Approx(unit(bf16, 3)[Phase::F].time_s - saved(fc2) + f_cast).epsilon(1e-12));
    // B: cast the output gradient, 2048 x 3584 values (tokens x hidden, whole under no SP).
    const double b_cast = 4 * kT * kH / bw;
    CHECK(unit(fp8, 3)[Phase::B].time_s ==
          Approx(unit(bf16, 3)[Phase::B].time_s - saved(fc2) + b_cast).epsilon(1e-12));
    CHECK(unit(fp8, 3)[Phase::W].time_s ==
          Approx(unit(bf16, 3)[Phase::W].time_s - saved(fc2)).epsilon(1e-12));
    // Current scaling reads each tensor once more for its amax first: 6 bytes per value.
    CHECK(unit(current, 3)[Phase::F].time_s ==
          Approx(unit(bf16, 3)[Phase::F].time_s - saved(fc2) + 1.5 * f_cast).epsilon(1e-12));
  }
  SECTION("PreAttn: the norm quantizes QKV's input itself; B casts the QKV gradient") {
    const double qkv = 2 * kT * kH * (kQ + 2 * kKv) / kT_TP;  // 2048 x 2304 x 3584 per GPU
    CHECK(unit(fp8, 0)[Phase::F].time_s ==
          Approx(unit(bf16, 0)[Phase::F].time_s - saved(qkv)).epsilon(1e-12));
    const double b_cast = 4 * kT * (kQ + 2 * kKv) / kT_TP / bw;
    CHECK(unit(fp8, 0)[Phase::B].time_s ==
          Approx(unit(bf16, 0)[Phase::B].time_s - saved(qkv) + b_cast).epsilon(1e-12));
  }
  SECTION("Attn: the core attention stays bf16; only the out-projection changes") {
    const double proj = 2 * kT * kQ * kH / kT_TP;
    const double f_cast = 4 * kT * kQ / kT_TP / bw;
    CHECK(unit(fp8, 1)[Phase::F].time_s ==
          Approx(unit(bf16, 1)[Phase::F].time_s - saved(proj) + f_cast).epsilon(1e-12));
    // Model FLOPs, and so MFU's numerator, do not change.
    CHECK(unit(fp8, 1)[Phase::F].flops == unit(bf16, 1)[Phase::F].flops);
  }
  SECTION("memory: an FP8 copy and its transpose of every linear weight, cast once per step") {
    // Per layer per GPU: (QKV 3584 x 4608 + out 3584 x 3584 + FC1 3584 x 37888 + FC2 18944 x
    // 3584) / 2 = 3584 x 65024 / 2 = 116,523,008 weights.
    const double weights = kH * (kQ + 2 * kKv + kQ + 2 * kF + kF) / kT_TP;
    REQUIRE(weights == 116523008.0);
    CHECK(fp8.chunks[0].static_bytes - bf16.chunks[0].static_bytes ==
          Approx(28 * 2 * weights).epsilon(1e-12));
    // One layer's saved activations shrink by 30,408,704 bytes (the next test).
    CHECK(bf16.chunks[0].activation_bytes - fp8.chunks[0].activation_bytes ==
          Approx(28 * 30408704.0).epsilon(1e-12));
    // The step's weight cast: read 2 bytes, write 1 + 1 per weight, 28 layers.
    CHECK(fp8.chunks[0].optimizer_s - bf16.chunks[0].optimizer_s ==
          Approx(28 * 4 * weights / bw).epsilon(1e-12));
  }
  SECTION("MFU keeps the bf16 peak in its denominator") { CHECK(fp8.peak_flops == 989e12); }
}

TEST_CASE("FP8 on a GPU without it, and MXFP8 on Hopper, are refused with one line",
          "[precision][errors]") {
  StudyOverrides o = test::layout_overrides("qwen2-7b", "a800x16", 2, 1);
  o.precision = Precision::Fp8Delayed;
  const Study a800 = load_study(resolve_config("studies", "default"), o);
  CHECK(test::input_error_of([&] { build_cost_model(a800, load_profile("a800"), 1); }) ==
        a800.file +
            ": training.precision: fp8-delayed needs FP8 tensor cores and profile a800 (NVIDIA "
            "A800 SXM4 80GB) gives no peak_fp8_tflops (Ampere has none; a GPU whose datasheet "
            "gives one may add it with its source): use bf16, or a GPU with FP8 (h100, h200)");
  CHECK_FALSE(precision_refusal(Precision::Fp8Current, load_profile("h20")).empty());
  CHECK(precision_refusal(Precision::Fp8Blockwise, load_profile("h100")).empty());
  CHECK(precision_refusal(Precision::Bf16, load_profile("a100")).empty());
  CHECK_THAT(precision_refusal(Precision::Mxfp8, load_profile("h100")),
             Catch::StartsWith("mxfp8 needs a Blackwell GPU"));

  const test::CliRun run =
      test::run_braid("simulate --cluster a800x16 --precision fp8-current --pp 2 --schedule 1f1b");
  CHECK(run.exit_code == 2);
  CHECK(test::count_lines(run.err) == 1);
  CHECK_THAT(run.err, Catch::Contains("--precision: training.precision: fp8-current needs FP8"));
  CHECK(run.out.empty());
}

TEST_CASE("Megatron's --fp8-format and --fp8-recipe read and written back",
          "[precision][megatron]") {
  auto read = [](const std::string& flags) {
    return parse_megatron_args(flags, "--megatron-args").overrides.precision;
  };
  CHECK_FALSE(read("--bf16").has_value());
  CHECK(read("--fp8-format hybrid") == Precision::Fp8Delayed);  // Megatron's default recipe
  CHECK(read("--fp8-format e4m3 --fp8-recipe tensorwise") == Precision::Fp8Current);
  CHECK(read("--fp8-format e4m3 --fp8-recipe blockwise") == Precision::Fp8Blockwise);
  CHECK(read("--fp8-format e4m3 --fp8-recipe mxfp8") == Precision::Mxfp8);
  CHECK_FALSE(read("--fp8-recipe tensorwise").has_value());  // no format: Megatron runs bf16
  CHECK(test::input_error_of([&] { read("--fp8-format e5m2"); }) ==
        "--megatron-args: --fp8-format: 'e5m2': Megatron allows e4m3 or hybrid");
  CHECK(parse_megatron_args("--fp8-format hybrid", "--megatron-args").not_modelled.empty());

  for (const std::string& n : precision_names()) {
    const Precision p = *parse_precision(n);
    const Study s = qwen_tp2(p);
    const std::string flags = megatron_launch_args(s, {"1f1b", 1});
    INFO(flags);
    CHECK(read(flags).value_or(Precision::Bf16) == p);
    CHECK((flags.find("--fp8-format") != std::string::npos) == (p != Precision::Bf16));
  }
}

TEST_CASE("an FP8 layer saves its linear layers' inputs in FP8, one layout, 1 byte each",
          "[precision][memory]") {
  // qwen2-7b at tp 2 without SP, FlashAttention, SwiGLU: per GPU T = 2048 tokens, hidden 3584,
  // q = 3584 / 2 = 1792 query columns, k = 512 / 2 = 256, f = 18944 / 2 = 9472. TE saves each
  // linear layer's input as the FP8 copy its GEMM read, columnwise only (1 byte; the scale of
  // a tensor is negligible), where braid saves the bf16 input (2 bytes) in bf16.
  const Profile p = ideal_h200();
  const CostModel bf16 = build_cost_model(qwen_tp2(Precision::Bf16), p, 1);
  const CostModel fp8 = build_cost_model(qwen_tp2(Precision::Fp8Current), p, 1);
  const CostModel block = build_cost_model(qwen_tp2(Precision::Fp8Blockwise), p, 1);
  auto unit = [](const CostModel& cm, int u) { return cm.chunks[0].layer_units[u]; };
  SECTION("PreAttn and PreMLP: the norm's bf16 input, the GEMM's FP8 input") {
    // norm input 2048 x 3584 x 2 = 14,680,064 + the norm's FP8 output 2048 x 3584 x 1 =
    // 7,340,032 (bf16: 14,680,064).
    for (int u : {0, 2}) {
      CHECK(unit(bf16, u)[Phase::F].alloc_bytes == 29360128.0);
      CHECK(unit(fp8, u)[Phase::F].alloc_bytes == 22020096.0);
      // B frees the norm input, W the FP8 input with the output gradient.
      CHECK(unit(fp8, u)[Phase::B].free_bytes == 14680064.0);
      CHECK(unit(fp8, u)[Phase::W].free_bytes == 7340032.0 + unit(fp8, u)[Phase::B].alloc_bytes);
    }
  }
  SECTION(
      "Attn: FlashAttention keeps q, k, v and its bf16 output; the out-projection an FP8 copy") {
    // q, k, v: 2048 x (1792 + 2 x 256) x 2 = 9,437,184; O: 2048 x 1792 x 2 = 7,340,032 (in bf16
    // also the out-projection's saved input); its FP8 copy 2048 x 1792 x 1 = 3,670,016.
    CHECK(unit(bf16, 1)[Phase::F].alloc_bytes == 9437184.0 + 7340032.0);
    CHECK(unit(fp8, 1)[Phase::F].alloc_bytes == 9437184.0 + 7340032.0 + 3670016.0);
    // The attention backward (B) frees q, k, v and O; the wgrad (W) the FP8 copy and the
    // output gradient 2048 x 3584 x 2.
    CHECK(unit(fp8, 1)[Phase::B].free_bytes == 9437184.0 + 7340032.0);
    CHECK(unit(fp8, 1)[Phase::W].free_bytes == 3670016.0 + 14680064.0);
  }
  SECTION("MLP: SwiGLU's bf16 input, FC2's FP8 input") {
    // gate and up 2048 x 18944 x 2 = 77,594,624; FC2's input 2048 x 9472 x 1 = 19,398,656 (bf16
    // 38,797,312).
    CHECK(unit(bf16, 3)[Phase::F].alloc_bytes == 77594624.0 + 38797312.0);
    CHECK(unit(fp8, 3)[Phase::F].alloc_bytes == 77594624.0 + 19398656.0);
    CHECK(unit(fp8, 3)[Phase::W].free_bytes == 19398656.0 + 14680064.0);
  }
  SECTION("a layer: 161,480,704 bytes in FP8 against 191,889,408 in bf16") {
    double fp8_layer = 0, bf16_layer = 0;
    for (int u = 0; u < 4; ++u) {
      fp8_layer += unit(fp8, u)[Phase::F].alloc_bytes;
      bf16_layer += unit(bf16, u)[Phase::F].alloc_bytes;
      // What F and B allocate, B and W free.
      CHECK(unit(fp8, u)[Phase::F].alloc_bytes + unit(fp8, u)[Phase::B].alloc_bytes ==
            Approx(unit(fp8, u)[Phase::B].free_bytes + unit(fp8, u)[Phase::W].free_bytes)
                .epsilon(1e-12));
    }
    CHECK(fp8_layer == 2 * 22020096.0 + 20447232.0 + 96993280.0);
    CHECK(bf16_layer == 2 * 29360128.0 + 16777216.0 + 116391936.0);
  }
  SECTION("block scaling adds a 4-byte scale per 128 values (1 x 128 blocks)") {
    // FC2's input: 2048 x 9472 x (1 + 4 / 128) = 20,004,864 bytes.
    CHECK(unit(block, 3)[Phase::F].alloc_bytes == Approx(77594624.0 + 20004864.0).epsilon(1e-12));
  }
}

TEST_CASE(
    "the delayed recipe all-reduces its amaxes over tp x dp x cp after each forward and "
    "backward of a chunk",
    "[precision][amax]") {
  // qwen2-7b, 28 layers on one stage of tp 2 x dp 4 (8 H200 of one node). Transformer Engine
  // keeps 3 FP32 amaxes per GEMM for the forward (input, weight, output) and 2 for the backward
  // (output gradient, input gradient); 4 GEMMs per layer: forward 28 x 4 x 3 x 4 = 1,344 bytes,
  // backward 28 x 4 x 2 x 4 = 896, each an all-reduce of the 8 GPUs inside the node.
  const Profile p = hand_link_h200();
  const CostModel fp8 = build_cost_model(qwen_tp2(Precision::Fp8Delayed), p, 1);
  const std::vector<UnitCost>& units = fp8.chunks[0].layer_units;
  REQUIRE(of_group(fp8, Group::TpDpCp).size() == 2);
  SECTION("forward: after the chunk's last layer, 1,344 bytes") {
    const Collective& fwd = units.back()[Phase::F].collectives.back();
    CHECK(fwd.group == Group::TpDpCp);
    CHECK(fwd.kind == CollectiveKind::AllReduce);
    CHECK(fwd.position == CollectivePosition::After);
    CHECK(fwd.bytes == 1344.0);
    CHECK(fwd.time_s == Approx(kLatency + 2.0 * 7 / 8 * 1344 / kBusBw).epsilon(1e-12));
  }
  SECTION("backward: after the chunk's first layer's QKV backward, 896 bytes") {
    CHECK(units.front().kind == UnitKind::PreAttn);
    const Collective& bwd = units.front()[Phase::B].collectives.back();
    CHECK(bwd.group == Group::TpDpCp);
    CHECK(bwd.bytes == 896.0);
    CHECK(bwd.time_s == Approx(kLatency + 2.0 * 7 / 8 * 896 / kBusBw).epsilon(1e-12));
  }
  SECTION("exposed once per microbatch's forward and backward in a 1F1B of one stage") {
    // Synchronous on the compute stream: with 4 microbatches and no contention the iteration
    // grows by 4 x (forward + backward reduction) against the same model without them.
    CostModel with = fp8;
    with.contention = Contention{1.0, 1.0};
    CostModel without = with;
    without.chunks[0].layer_units.back()[Phase::F].collectives.pop_back();
    without.chunks[0].layer_units.front()[Phase::B].collectives.pop_back();
    const Schedule s = make_schedule("1f1b", ScheduleOptions{.pp = 1, .vpp = 1, .microbatches = 4});
    const double grown =
        simulate(lower(s, with)).iteration_time_s - simulate(lower(s, without)).iteration_time_s;
    const double fwd = units.back()[Phase::F].collectives.back().time_s;
    const double bwd = units.front()[Phase::B].collectives.back().time_s;
    CHECK(grown == Approx(4 * (fwd + bwd)).epsilon(1e-9));
  }
  SECTION("the other recipes and bf16 have none") {
    for (Precision other : {Precision::Bf16, Precision::Fp8Current, Precision::Fp8Blockwise})
      CHECK(of_group(build_cost_model(qwen_tp2(other), p, 1), Group::TpDpCp).empty());
  }
}

TEST_CASE("under SP an FP8 layer all-gathers the quantized GEMM operands", "[precision][sp]") {
  // qwen2-7b at tp 2 with SP: the full activation is 2048 x 3584 = 7,340,032 values (14,680,064
  // bytes in bf16). On the hand link a TP all-gather of B bytes takes 10 us + B / 2 / 475 GB/s.
  const Profile p = hand_link_h200();
  const double values = kT * kH;
  auto gather = [](const CostModel& cm, int unit, Phase phase) {
    for (const Collective& c : cm.chunks[0].layer_units[unit][phase].collectives)
      if (c.kind == CollectiveKind::AllGather) return c;
    return Collective{};
  };
  auto gather_s = [](double bytes) { return kLatency + 0.5 * bytes / kBusBw; };
  const CostModel bf16 = build_cost_model(qwen_tp2_sp(Precision::Bf16), p, 1);
  const CostModel delayed = build_cost_model(qwen_tp2_sp(Precision::Fp8Delayed), p, 1);
  const CostModel block = build_cost_model(qwen_tp2_sp(Precision::Fp8Blockwise), p, 1);
  SECTION("the norm's FP8 output before QKV and FC1: 1 byte per value") {
    for (int u : {0, 2}) {
      CHECK(gather(bf16, u, Phase::F).bytes == 2 * values);
      CHECK(gather(delayed, u, Phase::F).bytes == values);
      CHECK(gather(delayed, u, Phase::F).time_s == Approx(gather_s(values)).epsilon(1e-12));
    }
    // The reduce-scatters of the row layers' bf16 outputs stay 2 bytes per value.
    CHECK(delayed.chunks[0].layer_units[1][Phase::F].collectives.front().bytes == 2 * values);
  }
  SECTION("the output gradient before the out-projection's and FC2's dgrad: 1 byte per value") {
    for (int u : {1, 3}) CHECK(gather(delayed, u, Phase::B).bytes == values);
  }
  SECTION("block scaling gathers its scales, and both layouts of an output gradient") {
    // (1 + 4 / 128) bytes per value: 7,569,408; the gradient's row- and column-wise data twice.
    CHECK(gather(block, 0, Phase::F).bytes == Approx(7569408.0).epsilon(1e-12));
    CHECK(gather(block, 3, Phase::B).bytes == Approx(2 * 7569408.0).epsilon(1e-12));
  }
  SECTION("current scaling all-reduces each gathered tensor's amax over the TP group first") {
    const CostModel current = build_cost_model(qwen_tp2_sp(Precision::Fp8Current), p, 1);
    const std::vector<std::pair<int, Phase>> gathered = {
        {0, Phase::F}, {1, Phase::B}, {2, Phase::F}, {3, Phase::B}};
    for (const auto& [u, phase] : gathered) {
      const auto& cs = current.chunks[0].layer_units[u][phase].collectives;
      REQUIRE(cs.size() >= 2);
      CHECK(cs[0].kind == CollectiveKind::AllReduce);
      CHECK(cs[0].position == CollectivePosition::Before);
      CHECK(cs[0].bytes == 4.0);
      CHECK(cs[0].time_s == Approx(kLatency + 2.0 * 1 / 2 * 4 / kBusBw).epsilon(1e-12));
      CHECK(cs[1].kind == CollectiveKind::AllGather);
      CHECK(cs[1].bytes == values);
    }
    CHECK(bf16.chunks[0].layer_units[0][Phase::F].collectives.size() == 1);
  }
  SECTION("TE's ring all-gather (tp_comm_overlap) carries the FP8 chunks too") {
    const CostModel ring = build_cost_model(qwen_tp2_sp(Precision::Fp8Delayed, true), p, 1);
    const Collective& c = ring.chunks[0].layer_units[0][Phase::F].collectives.front();
    CHECK(c.position == CollectivePosition::Inside);
    CHECK(c.bytes == values / 2);  // tp - 1 = 1 transfer of the 1-byte shard
  }
}

TEST_CASE("FP8 parameters (--fp8-param-gather): linear weights gathered in 1 byte, no bf16 copy",
          "[precision][param-gather]") {
  // qwen2-7b at tp 2 on 8 H200: dp 4, the distributed optimizer, one bucket per chunk (no
  // overlapped reduce). 28 layers x 116,523,008 linear weights per GPU are FP8 parameters.
  const Profile p = hand_link_h200();
  auto study = [](Precision precision, bool distributed, bool fp8_gather) {
    StudyOverrides o = test::layout_overrides("qwen2-7b", "h200x8", 2, 1, 2048, false);
    o.precision = precision;
    o.distributed_optimizer = distributed;
    o.fp8_param_gather = fp8_gather;
    return load_study(resolve_config("studies", "default"), o);
  };
  const double linear = 28 * 116523008.0;
  const CostModel fp8 = build_cost_model(study(Precision::Fp8Delayed, true, false), p, 1);
  const CostModel gathered = build_cost_model(study(Precision::Fp8Delayed, true, true), p, 1);
  REQUIRE(fp8.chunks[0].grad_buckets.size() == 1);
  REQUIRE(gathered.chunks[0].grad_buckets.size() == 1);
  const GradBucket& before = fp8.chunks[0].grad_buckets[0];
  const GradBucket& after = gathered.chunks[0].grad_buckets[0];
  SECTION("the all-gather: 1 byte per linear weight instead of 2, on the hand link") {
    CHECK(before.gather_bytes == 2 * before.params);
    CHECK(after.gather_bytes == Approx(2 * before.params - linear).epsilon(1e-15));
    // dp 4 inside the node: 10 us + 3/4 x bytes / 475 GB/s.
    CHECK(after.gather_s == Approx(kLatency + 0.75 * after.gather_bytes / kBusBw).epsilon(1e-12));
    // The gradients are reduced as before (fp32 main gradients).
    CHECK(after.reduce_bytes == before.reduce_bytes);
  }
  SECTION("memory: the FP8 parameter (data + transpose) replaces bf16 weight and FP8 copy") {
    // 2 + 2 bytes per linear weight become 1 + 1.
    CHECK(fp8.chunks[0].static_bytes - gathered.chunks[0].static_bytes ==
          Approx(2 * linear).epsilon(1e-12));
  }
  SECTION("refused without FP8 or without the distributed optimizer, in one line") {
    const std::string why =
        "training.fp8_param_gather: needs an FP8 precision and distributed_optimizer on (as in "
        "Megatron); turn them on or this off";
    CHECK(test::input_error_of([&] { study(Precision::Bf16, true, true); }) ==
          "--fp8-param-gather: " + why);
    CHECK(test::input_error_of([&] { study(Precision::Fp8Current, false, true); }) ==
          "--fp8-param-gather: " + why);
    const test::CliRun run = test::run_braid(
        "simulate --cluster h100x64 --precision fp8-delayed --fp8-param-gather on "
        "--distributed-optimizer off --pp 2 --schedule 1f1b");
    CHECK(run.exit_code == 2);
    CHECK(test::count_lines(run.err) == 1);
    CHECK_THAT(run.err, Catch::Contains("--fp8-param-gather: " + why));
  }
  SECTION("Megatron's --fp8-param-gather read and written back") {
    const Study s = study(Precision::Fp8Delayed, true, true);
    const std::string flags = megatron_launch_args(s, {"1f1b", 1});
    INFO(flags);
    const MegatronLaunch read = parse_megatron_args(flags, "--megatron-args");
    CHECK(read.overrides.fp8_param_gather == true);
    CHECK(std::find(read.not_modelled.begin(), read.not_modelled.end(), "--fp8-param-gather") ==
          read.not_modelled.end());
    CHECK(megatron_launch_args(study(Precision::Fp8Delayed, true, false), {"1f1b", 1})
              .find("--fp8-param-gather") == std::string::npos);
  }
}
