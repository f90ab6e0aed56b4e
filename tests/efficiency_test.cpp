// Kernel efficiencies of the spec model (src/cost/efficiency.hpp, docs/cost-model.md): the GEMM
// tile and wave model, a GEMM overlapped with communication kernels, attention rows interpolated
// by sequence length and head size, memory-bound kernels with a fixed time each, the profile
// fields that feed them, and `braid info`'s per-layer kernel list against the cost model.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <span>
#include <sstream>
#include <string>
#include <utility>

#include "../src/cost/efficiency.hpp"
#include "../src/cost/units.hpp"
#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/error.hpp"
#include "braid/profile.hpp"
#include "fixtures.hpp"

using namespace braid;
using detail::attention_rate;
using detail::GemmEstimate;
using detail::memory_kernel_s;
using detail::overlapped_gemm;
using detail::tile_gemm;

namespace {

// 8 SMs of 1 TFLOP/s each at half efficiency (0.5 TFLOP/s per SM in a full wave), 128x128
// tiles, no per-tile or per-GEMM fixed cost: a 128x128x128 tile takes 2 x 128^3 / 0.5e12 =
// 8.388608 us.
GemmTileModel toy_tiles() {
  GemmTileModel t;
  t.tile_m = 128;
  t.tile_n = 128;
  t.wave_efficiency = 0.5;
  return t;
}
constexpr int kToySms = 8;
constexpr double kToyPeak = 8e12;
constexpr double kToyTile_s = 8.388608e-6;

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A copy of profiles/<name>.yaml with `from` replaced by `to` (each must occur), in the scratch
// folder; returns its path.
std::filesystem::path edited_profile(const std::string& name,
                                     const std::vector<std::pair<std::string, std::string>>& edits,
                                     const std::string& file) {
  std::string text = slurp(resolve_config("profiles", name));
  for (const auto& [from, to] : edits) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  }
  auto path = test::scratch_dir() / file;
  std::ofstream(path) << text;
  return path;
}

std::string load_error(const std::filesystem::path& p) {
  try {
    load_profile(p);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a GEMM whose last wave is 1/8 full costs a whole wave", "[cost][efficiency]") {
  // 8 tiles (1024 x 128, k 128) fill one wave of 8 SMs; 9 tiles (1152 x 128) need a second wave
  // holding 1 tile of 8: twice the time for 9/8 of the work. K 128 cannot be split (slices of 128
  // at least), and the square tile has one orientation.
  const GemmEstimate one = tile_gemm(toy_tiles(), kToySms, kToyPeak, 1024, 128, 128);
  CHECK(one.waves == 1);
  CHECK(one.time_s == Approx(kToyTile_s).epsilon(1e-12));
  CHECK(one.efficiency == Approx(0.5).epsilon(1e-12));
  const GemmEstimate nine = tile_gemm(toy_tiles(), kToySms, kToyPeak, 1152, 128, 128);
  CHECK(nine.waves == 2);
  CHECK(nine.split_k == 1);
  CHECK(nine.time_s == Approx(2 * kToyTile_s).epsilon(1e-12));
  // 2 x 1152 x 128 x 128 FLOPs in 16.777216 us of 8 TFLOP/s: 0.5 x 9/16.
  CHECK(nine.efficiency == Approx(0.5 * 9 / 16).epsilon(1e-12));
  // A partial tile costs a whole one: 1025 rows are 9 tiles too.
  CHECK(tile_gemm(toy_tiles(), kToySms, kToyPeak, 1025, 128, 128).time_s ==
        Approx(2 * kToyTile_s).epsilon(1e-12));

  // Per-tile and per-GEMM fixed costs: k_overhead 64 makes a tile 128 + 64 steps long (12.582912
  // us), fixed_us 2 adds once: 2 x 12.582912 + 2 = 27.165824 us.
  GemmTileModel fixed = toy_tiles();
  fixed.k_overhead = 64;
  fixed.fixed_s = 2e-6;
  CHECK(tile_gemm(fixed, kToySms, kToyPeak, 1152, 128, 128).time_s ==
        Approx(27.165824e-6).epsilon(1e-12));
}

TEST_CASE("split-K fills a grid of less than one wave, and only such a grid",
          "[cost][efficiency]") {
  // One 128x128 tile with K 1024 on 8 SMs: split 8 ways (slices of 128) it is 8 tiles of K 128 in
  // one wave, 8.388608 us instead of 8 x that; split 12 would make slices under 128.
  const GemmEstimate one_tile = tile_gemm(toy_tiles(), kToySms, kToyPeak, 128, 128, 1024);
  CHECK(one_tile.split_k == 8);
  CHECK(one_tile.waves == 1);
  CHECK(one_tile.time_s == Approx(kToyTile_s).epsilon(1e-12));
  // 9 tiles already fill the SMs: no split, 2 waves of K 1024 (8 x 8.388608 us each).
  const GemmEstimate nine = tile_gemm(toy_tiles(), kToySms, kToyPeak, 1152, 128, 1024);
  CHECK(nine.split_k == 1);
  CHECK(nine.time_s == Approx(2 * 8 * kToyTile_s).epsilon(1e-12));
}

TEST_CASE("the tile model takes the tile's better orientation", "[cost][efficiency]") {
  // 256x128 tiles on 8 SMs, M 128 x N 1024: as 256x128 it is 1 x 8 tiles (half of each wasted),
  // as 128x256 it is 1 x 4 tiles, both one wave; a 128x256 tile costs the same as 256x128, so
  // the time is one tile of 2 x 256 x 128 x 128 / 0.5e12 = 16.777216 us either way, and the
  // estimate says which it chose (the first found, 256x128, on a tie).
  GemmTileModel t = toy_tiles();
  t.tile_m = 256;
  const GemmEstimate e = tile_gemm(t, kToySms, kToyPeak, 128, 1024, 128);
  CHECK(e.time_s == Approx(2 * kToyTile_s).epsilon(1e-12));
  CHECK(e.waves == 1);
  // M 2304 x N 128: as 256x128, 9 tiles (2 waves); as 128x256, 18 tiles (3 waves): 2 waves.
  const GemmEstimate tall = tile_gemm(t, kToySms, kToyPeak, 2304, 128, 128);
  CHECK(tall.waves == 2);
  CHECK(tall.tile_m == 256);
}

TEST_CASE("a GEMM overlapped with communication kernels runs on the SMs they leave",
          "[cost][efficiency][contention]") {
  // H100-like: 132 SMs of 1 TFLOP/s (efficiency 1), 128x256 tiles, K 1024: a 1408 x 3072 GEMM is
  // 11 x 12 = 132 tiles, one wave, 2 x 128 x 256 x 1024 / 1e12 = 67.108864 us (as 256x128 it
  // would be 6 x 24 = 144 tiles, two waves). An NCCL kernel holding 24 SMs [K2] leaves 108: the
  // 132 tiles take two waves (both orientations), 134.217728 us, 2x -- what the NVIDIA forum
  // thread saw ("nearly doubles"); the simulator's fluid factor for the same share is 132/108.
  GemmTileModel h;
  h.tile_m = 128;
  h.tile_n = 256;
  h.wave_efficiency = 1.0;
  const double peak = 132e12;
  const GemmEstimate alone = tile_gemm(h, 132, peak, 1408, 3072, 1024);
  CHECK(alone.waves == 1);
  CHECK(alone.time_s == Approx(67.108864e-6).epsilon(1e-12));
  const GemmEstimate shared = overlapped_gemm(h, 132, peak, 1408, 3072, 1024, 24);
  CHECK(shared.waves == 2);
  CHECK(shared.time_s == Approx(134.217728e-6).epsilon(1e-12));
  CHECK(sm_share_slowdown(132, 24) == Approx(132.0 / 108).epsilon(1e-15));
  CHECK(sm_share_slowdown(108, 24) == Approx(1.2857142857142858).epsilon(1e-15));
  // A GEMM of many waves sees about the fluid factor: 132 x 100 tiles take 100 waves alone and
  // ceil(13200 / 108) = 123 waves on 108 SMs, 1.23 (the fluid 1.2222 up to the last wave).
  CHECK(overlapped_gemm(h, 132, peak, 1408, 3072 * 100, 1024, 24).time_s /
            tile_gemm(h, 132, peak, 1408, 3072 * 100, 1024).time_s ==
        Approx(1.23).epsilon(1e-12));
  CHECK_THROWS_AS(overlapped_gemm(h, 132, peak, 1408, 3072, 1024, 132), InternalError);
}

TEST_CASE("attention between two sequence lengths of a row is interpolated in log2(seq)",
          "[cost][efficiency][attention]") {
  // FlashAttention-3, head 128, no mask, forward [F3]: 565 TFLOP/s at 1k, 625 at 2k, 638 at 4k.
  AttentionRow r;
  r.impl = AttentionImpl::Flash3;
  r.head_dim = 128;
  r.causal = false;
  r.seq = {1024, 2048, 4096};
  r.fwd_flops_per_s = {565e12, 625e12, 638e12};
  r.source = "test";
  const std::vector<AttentionRow> rows = {r};
  // 1448.15 = 1024 x sqrt(2): halfway in log2 between 1k and 2k: (565 + 625) / 2 = 595.
  auto fwd =
      attention_rate(rows, AttentionImpl::Flash3, 128, false, 1024 * std::sqrt(2.0), false, 0.8);
  REQUIRE(fwd);
  CHECK(fwd->flops_per_s == Approx(595e12).epsilon(1e-12));
  CHECK(fwd->lower == &rows[0]);
  CHECK(fwd->upper == &rows[0]);
  // 3000: log2(3000 / 2048) = 0.5507468 of the way from 625 to 638: 632.1597.
  auto at3000 = attention_rate(rows, AttentionImpl::Flash3, 128, false, 3000, false, 0.8);
  REQUIRE(at3000);
  CHECK(at3000->flops_per_s == Approx(632.15970821e12).epsilon(1e-9));
  // Outside the row: its end values. The backward without rows: forward x the ratio (0.8).
  CHECK(attention_rate(rows, AttentionImpl::Flash3, 128, false, 512, false, 0.8)->flops_per_s ==
        Approx(565e12));
  auto bwd = attention_rate(rows, AttentionImpl::Flash3, 128, false, 16384, true, 0.8);
  CHECK(bwd->flops_per_s == Approx(638e12 * 0.8));
  CHECK(bwd->backward_from_forward);
  // Another kernel or mask has no row: nullopt (the flat efficiency answers).
  CHECK_FALSE(attention_rate(rows, AttentionImpl::Cudnn, 128, false, 2048, false, 0.8));
  CHECK_FALSE(attention_rate(rows, AttentionImpl::Flash3, 128, true, 2048, false, 0.8));

  // Between head sizes: FA3 hd64 460 and hd128 625 at 2k; head 90.51 = 64 x sqrt(2) is halfway
  // in log2(head_dim): 542.5. A published backward row is used as it is.
  AttentionRow r64 = r;
  r64.head_dim = 64;
  r64.fwd_flops_per_s = {392e12, 460e12, 476e12};
  r64.bwd_flops_per_s = {300e12, 350e12, 400e12};
  const std::vector<AttentionRow> two = {r64, r};
  auto mid =
      attention_rate(two, AttentionImpl::Flash3, 64 * std::sqrt(2.0), false, 2048, false, 0.8);
  REQUIRE(mid);
  CHECK(mid->flops_per_s == Approx(542.5e12).epsilon(1e-12));
  CHECK(mid->lower == &two[0]);
  CHECK(mid->upper == &two[1]);
  CHECK(attention_rate(two, AttentionImpl::Flash3, 64, false, 2048, true, 0.8)->flops_per_s ==
        Approx(350e12));
}

TEST_CASE("a small memory-bound kernel does not reach the HBM efficiency", "[cost][efficiency]") {
  // A100 [B1]: 5.03 us per kernel + bytes / (2039 GB/s x 0.859). 1 MiB: 5.03 + 0.59867 = 5.62867
  // us, 186 GB/s (9 % of HBM); 1 GB: 5.03 + 570.94 = 575.97 us (0.85 of HBM).
  const double hbm = 2039e9, eff = 0.859, fixed = 5.03e-6;
  const double small = memory_kernel_s(1048576, 1, hbm, eff, fixed);
  CHECK(small == Approx(5.628673e-6).epsilon(1e-6));
  CHECK(1048576 / small / hbm == Approx(0.0913).epsilon(1e-3));
  const double large = memory_kernel_s(1e9, 1, hbm, eff, fixed);
  CHECK(large == Approx(575.9688e-6).epsilon(1e-6));
  // Two kernels pay two fixed times; traffic inside another kernel (0 kernels) none; no bytes,
  // no kernel.
  CHECK(memory_kernel_s(1048576, 2, hbm, eff, fixed) == Approx(small + fixed).epsilon(1e-12));
  CHECK(memory_kernel_s(1048576, 0, hbm, eff, fixed) == Approx(small - fixed).epsilon(1e-12));
  CHECK(memory_kernel_s(0, 1, hbm, eff, fixed) == 0);
}

TEST_CASE("profiles load the tile model, the attention rows and the SM-share contention",
          "[cost][efficiency][profile]") {
  const Profile a100 = load_profile("a100");
  CHECK(a100.sms == 108);
  CHECK(a100.gemm.tiles.enabled());
  CHECK(a100.gemm.tiles.tile_m == 256);
  CHECK(a100.gemm.tiles.fixed_s == Approx(7e-6));
  CHECK_FALSE(a100.gemm.tiles.source.empty());
  CHECK(a100.memory_kernel_s == Approx(5.03e-6));
  CHECK(a100.contention.comm_sms == 24);
  CHECK(a100.contention.compute_slowdown == Approx(108.0 / 84));
  CHECK(a100.attention_default_impl == AttentionImpl::Flash2);
  const Profile h100 = load_profile("h100");
  CHECK(h100.attention_default_impl == AttentionImpl::Cudnn);
  CHECK(h100.attention_rows.size() == 18);
  for (const AttentionRow& r : h100.attention_rows) {
    CHECK(r.seq.size() == r.fwd_flops_per_s.size());
    CHECK_FALSE(r.source.empty());
  }
  // A800 names no channel count: its contention stays as written (1.0).
  CHECK(load_profile("a800").contention.compute_slowdown == 1.0);
}

TEST_CASE("bad tile, attention and contention fields are one clear error each",
          "[cost][efficiency][profile]") {
  CHECK_THAT(load_error(edited_profile("a100", {{"sms: 108", "# no sms"}}, "nosms.yaml")),
             Catch::Contains("gemm.tiles") && Catch::Contains("sms"));
  CHECK_THAT(load_error(edited_profile(
                 "a100", {{"  tiles:\n", "  max_efficiency: 0.8\n  tiles:\n"}}, "both.yaml")),
             Catch::Contains("not both"));
  CHECK_THAT(load_error(edited_profile("a100", {{"comm_sms: 24", "comm_sms: 108"}}, "sms.yaml")),
             Catch::Contains("contention.comm_sms") && Catch::Contains("less than sms"));
  CHECK_THAT(
      load_error(edited_profile("a100", {{"comm_sms: 24", "comm_sms: 24\n  compute_slowdown: 1.2"}},
                                "twice.yaml")),
      Catch::Contains("not both"));
  CHECK_THAT(load_error(edited_profile(
                 "h100", {{"fwd_tflops: [282, 306, 318, 321, 322, 324]", "fwd_tflops: [282, 306]"}},
                 "rows.yaml")),
             Catch::Contains("attention.rows[0]") && Catch::Contains("one value per seq"));
  CHECK_THAT(load_error(edited_profile("h100", {{"default_impl: cudnn", "default_impl: unfused"}},
                                       "impl.yaml")),
             Catch::Contains("attention.default_impl") && Catch::Contains("flash2"));
}

TEST_CASE("the per-layer kernel list accounts for every GEMM and attention FLOP of the layer",
          "[cost][efficiency][info]") {
  // The list `braid info` prints is recorded while the layer is timed; per unit and phase its
  // FLOPs must be the phase's hardware FLOPs (GEMMs + attention: every FLOP the model counts).
  const auto [study, recompute] = GENERATE(table<const char*, const char*>(
      {{"configs/studies/megatron/megatron-22b-full.yaml", "selective"},
       {"configs/studies/megatron/megatron-22b-full.yaml", "none"},
       {"configs/studies/qwen2-7b-h20x16.yaml", "none"},
       {"configs/studies/default.yaml", "selective"}}));
  CAPTURE(study, recompute);
  StudyOverrides o;
  o.recompute = *parse_recompute(recompute);
  const Study s = load_study(resolve_config("studies", study), o);
  const Profile p = load_profile(s.cluster.profile);
  const CostModel cm = build_cost_model(s, p, s.parallel.pp * s.parallel.vpp, {});
  std::span<const UnitCost> layer;
  for (const ChunkCost& ch : cm.chunks)
    if (ch.layer_count() > 0 && !ch.layer(0)[0].vision) layer = ch.layer(0);
  REQUIRE(!layer.empty());
  std::map<std::pair<int, int>, double> flops;
  const auto kernels = detail::lm_layer_kernels(s, p);
  REQUIRE(kernels.size() >= 12);
  for (const detail::LayerKernel& k : kernels)
    flops[{static_cast<int>(k.unit), static_cast<int>(k.phase)}] += k.call.flops;
  for (const UnitCost& u : layer)
    for (Phase ph : {Phase::F, Phase::B, Phase::W}) {
      CAPTURE(name(u.kind), name(ph));
      CHECK(flops[{static_cast<int>(u.kind), static_cast<int>(ph)}] ==
            Approx(u[ph].hw_flops).epsilon(1e-12));
    }
}
