// FP8 training precision (training.precision, --precision; docs/cost-model.md "FP8"): the names,
// an FP8 layer's GEMM and cast times and its memory computed by hand, the refusals on GPUs
// without FP8, and Megatron's --fp8-format / --fp8-recipe read and written back.
#include <catch2/catch.hpp>

#include <string>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/error.hpp"
#include "braid/launch_args.hpp"
#include "braid/profile.hpp"
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
