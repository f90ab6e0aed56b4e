#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/error.hpp"
#include "braid/measured.hpp"
#include "braid/profile_plan.hpp"
#include "cli_run.hpp"
#include "fixtures.hpp"

using namespace braid;
using test::collective_of;

namespace {

// The true parameters of the synthetic measured profile in tests/data/measured_synthetic.yaml.
// Sources of the magnitudes (not of exactness): H200 peak 989 TFLOP/s, ~80 % large-GEMM
// efficiency, NVLink busbw ~360-480 GB/s, PCIe Gen5 copies ~40-55 GB/s
// (shared/reference/hardware-and-models.md §A, §B).
struct Truth {
  double peak = 989e12;
  double gemm_max_eff = 0.78;
  double gemm_half_flops = 2e11;
  double attn_fwd_eff = 0.55;
  double attn_bwd_eff = 0.42;
  double hbm = 4.0e12;
  double mem_eff = 0.82;
  double nv_latency = 12e-6, nv_busbw = 360e9;
  double p2p_latency = 8e-6, p2p_bw = 300e9;
  double d2h_latency = 10e-6, d2h_bw = 52e9;
  double h2d_latency = 10e-6, h2d_bw = 40e9;
};

// Deterministic +-0.5 % "measurement noise" so the fit has something to average out.
double noise(int i) { return 1.0 + 0.005 * ((i % 3) - 1); }

// Regenerate the golden file with: BRAID_REGENERATE_GOLDEN=1 build/braid_tests "[measured]"
MeasuredTables make_synthetic() {
  const Truth tr;
  MeasuredTables t;
  t.meta.gpu = "synthetic (tests/measured_test.cpp make_synthetic)";
  t.meta.gpus = 8;
  t.meta.date = "2026-11-29T00:00:00Z";
  t.meta.host = "none";
  t.meta.command = "BRAID_REGENERATE_GOLDEN=1 build/braid_tests \"[measured]\"";
  t.meta.attention_impl = "synthetic";
  t.peak_flops = tr.peak;
  t.hbm_bandwidth_Bps = tr.hbm;
  t.hbm_bytes = 141e9;
  t.fixed_overhead_bytes = 3.0 * (1 << 30);
  int i = 0;
  // Qwen2-7B shapes at TP 1 and TP 4, seq 4096 x mbs 1 and 2 (forward, input and weight grad).
  struct W {
    const char* label;
    std::int64_t in, out;
  };
  for (int tp : {1, 4}) {
    const W ws[] = {{"qkv", 3584, 4608 / tp},
                    {"out_proj", 3584 / tp, 3584},
                    {"fc1", 3584, 2 * 18944 / tp},
                    {"fc2", 18944 / tp, 3584}};
    for (std::int64_t tokens : {4096, 8192}) {
      for (const W& w : ws) {
        for (const GemmShape& shape : linear_gemms(tokens, w.in, w.out, w.label)) {
          GemmPoint g{shape.m, shape.n, shape.k, 0, shape.label};
          const double f = g.flops();
          const double eff = tr.gemm_max_eff * f / (f + tr.gemm_half_flops);
          g.time_s = f / (tr.peak * eff) * noise(i++);
          t.gemm.push_back(g);
        }
      }
    }
  }
  // Small GEMMs so the saturation knee is visible.
  for (std::int64_t s : {256, 512, 1024}) {
    GemmPoint g{s, s, s, 0, "square"};
    const double f = g.flops();
    g.time_s = f / (tr.peak * tr.gemm_max_eff * f / (f + tr.gemm_half_flops)) * noise(i++);
    t.gemm.push_back(g);
  }
  for (int seq : {1024, 2048, 4096, 8192}) {
    for (bool causal : {true, false}) {
      AttentionPoint a{1, seq, 28, 4, 128, causal, 0, 0};
      a.fwd_s = attention_fwd_flops(a) / (tr.peak * tr.attn_fwd_eff) * noise(i++);
      a.bwd_s = attention_bwd_flops(a) / (tr.peak * tr.attn_bwd_eff) * noise(i++);
      t.attention.push_back(a);
    }
  }
  for (ElementwiseKernel k :
       {ElementwiseKernel::RmsNorm, ElementwiseKernel::Rope, ElementwiseKernel::SwiGLU}) {
    for (double b : {64e6, 256e6, 1024e6})
      t.elementwise.push_back({k, b, b / (tr.hbm * tr.mem_eff) * noise(i++)});
  }
  for (CollectiveKind op :
       {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter}) {
    for (int ranks : {2, 4, 8}) {
      for (double b = 1024; b <= (1 << 30); b *= 16) {
        const double time = tr.nv_latency + bus_factor(op, ranks) * b / tr.nv_busbw;
        t.comm["nvlink"][op].push_back({ranks, b, time * noise(i++)});
      }
    }
  }
  for (double b = 1024; b <= (1 << 30); b *= 16) {
    t.comm["nvlink"][CollectiveKind::P2P].push_back(
        {2, b, (tr.p2p_latency + b / tr.p2p_bw) * noise(i++)});
    t.d2h.push_back({b, (tr.d2h_latency + b / tr.d2h_bw) * noise(i++)});
    t.h2d.push_back({b, (tr.h2d_latency + b / tr.h2d_bw) * noise(i++)});
  }
  MeasuredContention c;
  c.partner = "all_reduce";
  c.compute_alone_s = 1e-3, c.compute_together_s = 1.08e-3;
  c.comm_alone_s = 2e-3, c.comm_together_s = 2.3e-3;
  t.contention = c;
  return t;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::string kSynthetic =
    std::string(BRAID_SOURCE_DIR) + "/tests/data/measured_synthetic.yaml";

}  // namespace

// A whole measured profile (spec schema + tables) built from the synthetic tables; the spec base
// is a minimal H200-like profile so the file does not depend on profiles/.
const std::string kSyntheticProfile =
    std::string(BRAID_SOURCE_DIR) + "/tests/data/profile-synthetic-measured.yaml";
const std::string kSyntheticBase =
    "name: synthetic\ngpu: synthetic\nsource: spec-derived\npeak_tflops: 989\n"
    "links:\n  ib:\n    latency_us: 46\n    bus_bandwidth_gbps: 350\n    p2p_bandwidth_gbps: 50\n";

TEST_CASE("the synthetic measured profile in tests/data is what make_synthetic emits",
          "[measured]") {
  const MeasuredTables t = make_synthetic();
  const std::string text = emit_measured(t);
  const std::string profile =
      measured_profile_yaml("synthetic-measured", t, fit_profile(t), kSyntheticBase, "synthetic");
  if (std::getenv("BRAID_REGENERATE_GOLDEN")) {
    std::ofstream(kSynthetic) << text;
    std::ofstream(kSyntheticProfile) << profile;
  }
  CHECK(read_text(kSynthetic) == text);
  CHECK(read_text(kSyntheticProfile) == profile);
  const auto section = load_measured_section(kSyntheticProfile);
  REQUIRE(section);
  CHECK(emit_measured(*section) == text);
}

TEST_CASE("measured tables survive a save/load round trip byte for byte", "[measured]") {
  const MeasuredTables t = make_synthetic();
  const std::string text = emit_measured(t);
  const MeasuredTables back = parse_measured(text, "round-trip");
  CHECK(emit_measured(back) == text);
  REQUIRE(back.gemm.size() == t.gemm.size());
  CHECK(back.gemm[5].m == t.gemm[5].m);
  CHECK(back.gemm[5].label == t.gemm[5].label);
  CHECK(back.gemm[5].time_s == Approx(t.gemm[5].time_s).epsilon(1e-8));
  REQUIRE(back.attention.size() == t.attention.size());
  CHECK(back.attention[1].causal == false);
  CHECK(back.comm.at("nvlink").at(CollectiveKind::ReduceScatter).size() ==
        t.comm.at("nvlink").at(CollectiveKind::ReduceScatter).size());
  CHECK(back.d2h.size() == t.d2h.size());
  REQUIRE(back.contention);
  CHECK(back.contention->factors().compute_slowdown == Approx(1.08));
  CHECK(back.contention->factors().comm_slowdown == Approx(1.15));
  CHECK(back.meta.command == t.meta.command);
}

TEST_CASE("bad measured tables name the field", "[measured]") {
  CHECK_THROWS_WITH(parse_measured("gemm:\n  - {m: 1, n: 2, time_s: 1}\n", "p.yaml"),
                    Catch::Contains("measured.gemm[0].k") && Catch::Contains("missing"));
  CHECK_THROWS_WITH(parse_measured("elementwise:\n  - {kernel: gelu, bytes: 1, time_s: 1}\n", "p"),
                    Catch::Contains("allowed: rmsnorm, rope, swiglu"));
  CHECK_THROWS_WITH(parse_measured("comm: {nvlink: {broadcast: []}}\n", "p"),
                    Catch::Contains("measured.comm.nvlink.broadcast"));
  CHECK_THROWS_WITH(parse_measured("copies: {d2h: [{bytes: 1, time_s: -1}]}\n", "p"),
                    Catch::Contains("must be > 0"));
  CHECK_THROWS_AS(parse_measured("gemm: [oops", "p"), InputError);
}

TEST_CASE("log-log interpolation is exact at points and log-linear between", "[measured]") {
  const std::vector<std::pair<double, double>> xy = {{1e3, 1e-5}, {1e6, 1e-4}, {1e9, 1e-2}};
  CHECK(interpolate_loglog(xy, 1e6).time_s == 1e-4);
  CHECK(interpolate_loglog(xy, 1e6).kind == LookupKind::Exact);
  // Halfway in log x between 1e3 and 1e6 is the geometric mean of the times.
  const Lookup mid = interpolate_loglog(xy, std::sqrt(1e3 * 1e6));
  CHECK(mid.kind == LookupKind::Interpolated);
  CHECK(mid.time_s == Approx(std::sqrt(1e-5 * 1e-4)));
  // Monotone between points.
  double prev = 0;
  for (double x = 1e3; x <= 1e9; x *= 1.5) {
    const double y = interpolate_loglog(xy, x).time_s;
    CHECK(y >= prev);
    prev = y;
  }
  // Below the smallest point: the latency floor; above the largest: the last rate holds.
  CHECK(interpolate_loglog(xy, 10).time_s == 1e-5);
  CHECK(interpolate_loglog(xy, 4e9).time_s == Approx(4e-2));
  CHECK(interpolate_loglog(xy, 4e9).kind == LookupKind::Extrapolated);
  // For compute tables (floor_below = false) a smaller size keeps the smallest point's rate.
  CHECK(interpolate_loglog(xy, 100, false).time_s == Approx(1e-6));
}

TEST_CASE("GEMM lookups: exact, interpolated over tokens, scaled from the nearest shape",
          "[measured]") {
  MeasuredTables t;
  t.gemm = {{4096, 4608, 3584, 1e-4, "qkv.F"},
            {8192, 4608, 3584, 2.2e-4, "qkv.F"},
            {3584, 4608, 4096, 1.1e-4, "qkv.W"}};
  auto e = gemm_time(t, 4096, 4608, 3584);
  REQUIRE(e);
  CHECK(e->kind == LookupKind::Exact);
  CHECK(e->time_s == 1e-4);
  // m between the two measured token counts: log-linear over FLOPs.
  auto i = gemm_time(t, 5793, 4608, 3584);  // ~ sqrt(4096 * 8192)
  REQUIRE(i);
  CHECK(i->kind == LookupKind::Interpolated);
  CHECK(i->time_s == Approx(std::sqrt(1e-4 * 2.2e-4)).epsilon(1e-3));
  // An unmeasured shape takes the nearest shape's FLOP/s: twice the FLOPs, twice the time.
  auto s = gemm_time(t, 3584, 9216, 4096);
  REQUIRE(s);
  CHECK(s->kind == LookupKind::Scaled);
  CHECK(s->time_s == Approx(2.2e-4));
  CHECK_FALSE(gemm_time(MeasuredTables{}, 1, 1, 1));
}

TEST_CASE("attention and collective lookups", "[measured]") {
  const MeasuredTables t = make_synthetic();
  AttentionPoint a{1, 4096, 28, 4, 128, true, 0, 0};
  auto f = attention_time(t, a, false);
  REQUIRE(f);
  CHECK(f->kind == LookupKind::Exact);
  // Sequence 2x between 2048 and 4096 measured points is interpolated and lies between them.
  a.seq = 3000;
  auto b = attention_time(t, a, true);
  REQUIRE(b);
  CHECK(b->kind == LookupKind::Interpolated);
  // Other heads count: the nearest same-mask shape (log FLOPs, heads, head_dim) at its FLOP/s.
  // 7 heads at seq 4096 has the FLOPs of 28 heads at seq 2048, so that point is nearest and the
  // time is its time.
  AttentionPoint other{1, 4096, 7, 1, 128, true, 0, 0};
  auto sc = attention_time(t, other, false);
  REQUIRE(sc);
  CHECK(sc->kind == LookupKind::Scaled);
  AttentionPoint s2048{1, 2048, 28, 4, 128, true, 0, 0};
  CHECK(sc->time_s == Approx(attention_time(t, s2048, false)->time_s).epsilon(1e-12));

  auto ar = comm_time(t, "nvlink", CollectiveKind::AllReduce, 8, 1024);
  REQUIRE(ar);
  CHECK(ar->kind == LookupKind::Exact);
  // 6 ranks were not measured: 4 and 8 are equally near, the larger is used, scaled by the
  // bus factor (2*5/6) / (2*7/8).
  auto ar6 = comm_time(t, "nvlink", CollectiveKind::AllReduce, 6, 1024);
  REQUIRE(ar6);
  CHECK(ar6->kind == LookupKind::Scaled);
  CHECK(ar6->time_s == Approx(ar->time_s * (10.0 / 6) / (14.0 / 8)));
  CHECK_FALSE(comm_time(t, "ib", CollectiveKind::AllReduce, 8, 1024));
  CHECK(copy_time(t.d2h, 1024)->kind == LookupKind::Exact);
}

TEST_CASE("fit_profile recovers the synthetic profile's true parameters within 2 %",
          "[measured][fit]") {
  const Truth tr;
  const MeasuredTables t = parse_measured(read_text(kSynthetic), kSynthetic);
  const ProfileFit fit = fit_profile(t);
  CHECK(fit.gemm.max_efficiency == Approx(tr.gemm_max_eff).epsilon(0.02));
  CHECK(fit.gemm.half_flops == Approx(tr.gemm_half_flops).epsilon(0.02));
  CHECK(fit.attention_fwd_efficiency == Approx(tr.attn_fwd_eff).epsilon(0.02));
  CHECK(fit.attention_bwd_efficiency == Approx(tr.attn_bwd_eff).epsilon(0.02));
  CHECK(fit.memory_bound_efficiency == Approx(tr.mem_eff).epsilon(0.02));
  const LinkFit& nv = fit.links.at("nvlink");
  CHECK(nv.latency_s == Approx(tr.nv_latency).epsilon(0.02));
  CHECK(nv.bus_bandwidth_Bps == Approx(tr.nv_busbw).epsilon(0.02));
  CHECK(nv.p2p_latency_s == Approx(tr.p2p_latency).epsilon(0.02));
  CHECK(nv.p2p_bandwidth_Bps == Approx(tr.p2p_bw).epsilon(0.02));
  CHECK(fit.host_d2h_Bps == Approx(tr.d2h_bw).epsilon(0.02));
  CHECK(fit.host_h2d_Bps == Approx(tr.h2d_bw).epsilon(0.02));
  CHECK(fit.d2h_latency_s == Approx(tr.d2h_latency).epsilon(0.02));
  // Every point is within the noise (0.5 %) plus a little of the fitted model.
  const auto summary = summarize_fit(fit);
  CHECK(summary.at("gemm:qkv.F").points == 4);
  for (const auto& [unit, s] : summary) {
    INFO(unit);
    CHECK(s.max_abs_error < 0.012);
  }
}

TEST_CASE("fit_profile without a peak is an input error", "[measured][fit]") {
  MeasuredTables t;
  t.gemm = {{128, 128, 128, 1e-5, "x"}};
  CHECK_THROWS_WITH(fit_profile(t), Catch::Contains("peak_flops"));
}

namespace {

ModelConfig qwen2_7b() {
  // Qwen2-7B (shared/reference/hardware-and-models.md §C.1).
  ModelConfig m;
  m.name = "qwen2-7b";
  m.layers = 28, m.hidden = 3584, m.heads = 28, m.kv_heads = 4, m.head_dim = 128;
  m.ffn = 18944, m.vocab = 152064;
  return m;
}

}  // namespace

TEST_CASE("linear layers give forward, input-gradient and weight-gradient GEMMs",
          "[measured][plan]") {
  const auto g = linear_gemms(4096, 3584, 4608, "qkv");
  CHECK((g[0].m == 4096 && g[0].n == 4608 && g[0].k == 3584 && g[0].label == "qkv.F"));
  CHECK((g[1].m == 4096 && g[1].n == 3584 && g[1].k == 4608 && g[1].label == "qkv.B"));
  CHECK((g[2].m == 4608 && g[2].n == 3584 && g[2].k == 4096 && g[2].label == "qkv.W"));
  // The three have the same FLOPs.
  CHECK(2.0 * g[0].m * g[0].n * g[0].k == 2.0 * g[2].m * g[2].n * g[2].k);
}

TEST_CASE("the plan for Qwen2-7B covers every unit GEMM per TP size", "[measured][plan]") {
  PlanOptions o;
  o.tp = {1, 4};
  o.seq = {4096};
  const ProfilePlan p = make_plan(qwen2_7b(), o);
  auto has = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
    for (const GemmShape& g : p.gemm)
      if (g.m == m && g.n == n && g.k == k) return true;
    return false;
  };
  // TP 4: QKV out = (7 + 2*1) * 128 = 1152; out-proj in = 7 * 128 = 896; FC1 = 2 * 4736;
  // FC2 in = 4736; LM head = 152064 / 4 = 38016.
  CHECK(has(4096, 1152, 3584));
  CHECK(has(4096, 3584, 1152));
  CHECK(has(1152, 3584, 4096));
  CHECK(has(4096, 3584, 896));
  CHECK(has(4096, 9472, 3584));
  CHECK(has(3584, 4736, 4096));  // FC2 weight gradient: (out, in, tokens)
  CHECK(has(4096, 38016, 3584));
  // TP 1: 28 + 2*4 heads of 128 = 4608.
  CHECK(has(4096, 4608, 3584));
  // 5 linears x 3 phases x 2 TP sizes, minus TP 1's out-proj F and B (both 4096x3584x3584).
  CHECK(p.gemm.size() == 29);
  REQUIRE(p.attention.size() == 2);
  CHECK(p.attention[1].heads == 7);
  CHECK(p.attention[1].kv_heads == 1);
  CHECK(p.attention[1].causal);
  CHECK(p.elementwise.size() == 5);  // RMSNorm once (same shape), RoPE and SwiGLU per TP
  CHECK(p.comm_bytes.front() == 1024);
  CHECK(p.comm_bytes.back() == 1024.0 * 1024 * 1024);
  CHECK(p.comm_bytes.size() == 21);
  o.quick = true;
  CHECK(make_plan(qwen2_7b(), o).comm_bytes.size() == 6);
}

TEST_CASE("the plan rejects a TP size that does not divide the heads", "[measured][plan]") {
  PlanOptions o;
  o.tp = {3};
  CHECK_THROWS_WITH(make_plan(qwen2_7b(), o),
                    Catch::Contains("--tp") && Catch::Contains("28 attention heads"));
}

TEST_CASE("known peaks come from the reference table", "[measured]") {
  CHECK(known_peak_flops("NVIDIA H200") == 989e12);
  CHECK(known_peak_flops("NVIDIA H20") == 148e12);
  CHECK(known_peak_flops("NVIDIA A800-SXM4-80GB") == 312e12);
  CHECK_FALSE(known_peak_flops("NVIDIA GeForce RTX 4090"));
}

TEST_CASE("a measured profile file keeps the spec schema and embeds the tables", "[measured]") {
  const MeasuredTables t = parse_measured(read_text(kSynthetic), kSynthetic);
  const ProfileFit fit = fit_profile(t);
  const std::string base =
      "name: h200\ngpu: x\nsource: spec-derived\npeak_tflops: 989\n"
      "links:\n  ib:\n    latency_us: 46\n    bus_bandwidth_gbps: 350\n"
      "contention: {compute_slowdown: 1.0, comm_slowdown: 1.0}\nfixed_overhead_gib: 2.0\n";
  const std::string text = measured_profile_yaml("h200-measured", t, fit, base, "h200");
  CHECK(text.find("source: measured") != std::string::npos);
  CHECK(text.find("name: h200-measured") != std::string::npos);
  CHECK(text.find("max_efficiency: 0.78") != std::string::npos);
  CHECK(text.find("bus_bandwidth_gbps: 360") != std::string::npos);  // nvlink, fitted
  CHECK(text.find("bus_bandwidth_gbps: 350") != std::string::npos);  // ib, kept from the base
  CHECK(text.find("compute_slowdown: 1.080") != std::string::npos);
  CHECK(text.find("fixed_overhead_gib: 3.00") != std::string::npos);
  // The measured section parses back into the same tables.
  const std::size_t at = text.find("\nmeasured:\n");
  REQUIRE(at != std::string::npos);
  std::string body;
  std::istringstream lines(text.substr(at + 11));
  for (std::string line; std::getline(lines, line);) body += line.substr(2) + "\n";
  CHECK(emit_measured(parse_measured(body, "profile")) == emit_measured(t));
  // Deterministic.
  CHECK(measured_profile_yaml("h200-measured", t, fit, base, "h200") == text);
}

TEST_CASE("braid-profile is built when nvcc is present and refuses bad input before the GPU",
          "[measured][profiler]") {
#ifdef BRAID_PROFILE_EXE
  const std::string exe = BRAID_PROFILE_EXE;
  REQUIRE(std::ifstream(exe).good());
  CHECK(std::system((exe + " --help > /dev/null").c_str()) == 0);
  const std::string bad = exe + " --model qwen2-7b --tp 3 --out /tmp/unused.yaml 2> /dev/null";
  const int rc = std::system(bad.c_str());
  CHECK(WIFEXITED(rc));
  CHECK(WEXITSTATUS(rc) == 2);
#else
  // Configured without CUDA (BRAID_CUDA=OFF or no nvcc): then nvcc must indeed be absent, or
  // the option was turned off on purpose.
  WARN("braid-profile not built in this configuration");
#endif
}

TEST_CASE("braid calibrate prints the fit and its errors per unit and size", "[measured][cli]") {
  const std::string out = (test::scratch_dir() / "calibrate.json").string();
  const std::string cmd =
      std::string(BRAID_EXE) + " calibrate --profile " + kSyntheticProfile + " --json > " + out;
  REQUIRE(std::system(cmd.c_str()) == 0);
  const std::string json = read_text(out);
  CHECK(json.find("\"max_efficiency\": 0.78") != std::string::npos);
  CHECK(json.find("\"gemm:qkv.F\"") != std::string::npos);
  CHECK(json.find("\"nvlink:all_reduce:8\"") != std::string::npos);
  const std::string text_cmd =
      std::string(BRAID_EXE) + " calibrate --profile " + kSyntheticProfile + " > " + out;
  REQUIRE(std::system(text_cmd.c_str()) == 0);
  const std::string text = read_text(out);
  CHECK(text.find("fit error per unit") != std::string::npos);
  CHECK(text.find("fit error per size") != std::string::npos);
  // A profile without measured tables is refused with exit 2.
  const std::string bad = std::string(BRAID_EXE) + " calibrate --profile h200 2> /dev/null";
  const int rc = std::system(bad.c_str());
  CHECK(WEXITSTATUS(rc) == 2);
}

namespace {

Study qwen2_7b_study(int tp, int seq) {
  StudyOverrides o;
  o.model = "qwen2-7b";
  o.cluster = "h200x8";
  o.tp = tp;
  o.pp = 2;
  o.vpp = 1;
  o.seq = seq;
  o.mbs = 1;
  o.sequence_parallel = false;
  return load_study(resolve_config("studies", "default"), o);
}

}  // namespace

TEST_CASE("a measured profile loads its tables into the Profile", "[measured][cost]") {
  const Profile p = load_profile(kSyntheticProfile);
  CHECK(p.source == Source::Measured);
  REQUIRE(p.measured);
  CHECK(p.measured->gemm.size() == make_synthetic().gemm.size());
  // The links answer from its collective tables (shared, in the file's order).
  const auto& rows = p.link("nvlink").measured->at(CollectiveKind::AllReduce);
  CHECK(rows.front().ranks == 2);
  CHECK(rows.back().ranks == 8);
  CHECK(rows.back().bytes == 1024.0 * 1024 * 1024);
  // A spec-derived profile has none.
  CHECK_FALSE(load_profile("h200").measured);
}

TEST_CASE("measured tables take precedence over the spec model and are tagged measured",
          "[measured][cost]") {
  const Profile measured = load_profile(kSyntheticProfile);
  const Profile spec = load_profile("h200");
  const MeasuredTables& t = *measured.measured;
  const Study study = qwen2_7b_study(1, 4096);
  const CostModel cm = build_cost_model(study, measured, 2);
  const auto layer = cm.chunks[0].layer(0);

  // PreAttn W is the QKV weight-gradient GEMM (the measured table's time) plus the memory-bound
  // kernels next to it at the profile's HBM rate: the RMSNorm weight gradient (2 T h x 2 B), the
  // fp32 main-gradient read + write (8 B per weight) and the QKV bias gradient (T x 4608 x 2 B).
  const auto qkv_w = gemm_time(t, 4608, 3584, 4096);
  REQUIRE(qkv_w);
  CHECK(qkv_w->kind == LookupKind::Exact);
  const double Bps = measured.hbm_bandwidth_Bps * measured.memory_bound_efficiency;
  auto w_extra = [](double T, double h, double width, double bps) {
    return (2 * T * h * 2 + 8 * h * width + T * width * 2) / bps;
  };
  CHECK(layer[0][Phase::W].time_s ==
        Approx(qkv_w->time_s + w_extra(4096, 3584, 4608, Bps)).epsilon(1e-12));
  CHECK(layer[0][Phase::W].source == Source::Measured);
  // PreAttn F: the measured RMSNorm, QKV GEMM and RoPE.
  const double T = 4096, h = 3584;
  const double expected_f = elementwise_time(t, ElementwiseKernel::RmsNorm, 2 * T * h * 2)->time_s +
                            gemm_time(t, 4096, 4608, 3584)->time_s +
                            elementwise_time(t, ElementwiseKernel::Rope, 2 * T * 4096 * 2)->time_s;
  CHECK(layer[0][Phase::F].time_s == Approx(expected_f).epsilon(1e-12));
  CHECK(layer[0][Phase::F].source == Source::Measured);
  // Attn B: out-projection input gradient + the measured attention backward + the copy that
  // concatenates the q, k, v gradients (read + write T x 4608 x 2 B).
  const AttentionPoint shape{1, 4096, 28, 4, 128, true, 0, 0};
  const double expected_attn_b = gemm_time(t, 4096, 3584, 3584)->time_s +
                                 attention_time(t, shape, true)->time_s + 2 * 4096 * 4608 * 2 / Bps;
  CHECK(layer[1][Phase::B].time_s == Approx(expected_attn_b).epsilon(1e-12));
  CHECK(layer[1][Phase::B].source == Source::Measured);

  // The spec-derived profile gives the roofline numbers, tagged spec-derived.
  const CostModel cs = build_cost_model(study, spec, 2);
  const PhaseCost& spec_w = cs.chunks[0].layer(0)[0][Phase::W];
  CHECK(spec_w.source == Source::SpecDerived);
  // The tile model: the QKV weight gradient 4608 x 3584 x 4096 is 36 x 28 = 1008 tiles of
  // 128x128 on 132 SMs, 8 waves, each tile K + 128 steps at h200's wave efficiency; the norm and
  // bias gradients are two kernels of their own (the main-gradient traffic is the GEMM's).
  const GemmTileModel& g = spec.gemm.tiles;
  REQUIRE(g.tile_m == 128);
  REQUIRE(g.tile_n == 128);
  REQUIRE(spec.sms == 132);
  const double gemm_s = g.fixed_s + 8 * 2.0 * 128 * 128 * (T + g.k_overhead) /
                                        (spec.peak_flops / 132 * g.wave_efficiency);
  CHECK(spec_w.time_s ==
        Approx(gemm_s + 2 * spec.memory_kernel_s +
               w_extra(T, h, 4608, spec.hbm_bandwidth_Bps * spec.memory_bound_efficiency)));
  CHECK(spec_w.time_s != Approx(layer[0][Phase::W].time_s));
}

TEST_CASE("shapes and group sizes that were not measured scale from the nearest measured ones",
          "[measured][cost]") {
  const Profile measured = load_profile(kSyntheticProfile);
  const MeasuredTables& t = *measured.measured;
  // Sequence 6144 lies between the measured 4096 and 8192 tokens: interpolated, still measured.
  const CostModel cm = build_cost_model(qwen2_7b_study(4, 6144), measured, 2);
  const auto layer = cm.chunks[0].layer(0);
  const auto w = gemm_time(t, 1152, 3584, 6144);
  REQUIRE(w);
  CHECK(w->kind == LookupKind::Interpolated);
  // Plus the norm weight gradient, the main-gradient traffic and the bias gradient (tp 4: a
  // 1152-wide QKV shard), at HBM speed.
  const double Bps = measured.hbm_bandwidth_Bps * measured.memory_bound_efficiency;
  CHECK(layer[0][Phase::W].time_s ==
        Approx(w->time_s + (2 * 6144.0 * 3584 * 2 + 8 * 3584.0 * 1152 + 6144.0 * 1152 * 2) / Bps)
            .epsilon(1e-12));
  CHECK(layer[0][Phase::W].source == Source::Measured);
  const double lo = gemm_time(t, 1152, 3584, 4096)->time_s;
  const double hi = gemm_time(t, 1152, 3584, 8192)->time_s;
  CHECK(w->time_s > lo);
  CHECK(w->time_s < hi);
  // TP 4's All-Reduce of the PreAttn input gradient answers from the nvlink table (4 ranks),
  // interpolated log-log in bytes.
  const Collective ar = collective_of(layer[0][Phase::B]);
  CHECK(ar.kind == CollectiveKind::AllReduce);
  CHECK(ar.source == Source::Measured);
  CHECK(ar.time_s ==
        Approx(comm_time(t, "nvlink", CollectiveKind::AllReduce, 4, ar.bytes)->time_s));
  // The LM head of a 152k vocabulary was never measured: nearest shape at its FLOP/s, tagged
  // measured; the embedding (no table) stays spec-derived.
  CHECK(cm.chunks[1].epilogue.back()[Phase::W].source == Source::Measured);
  CHECK(cm.chunks[0].prologue.front()[Phase::F].source == Source::SpecDerived);
}

TEST_CASE("the plan for a multimodal model adds the ViT's GEMMs and full attention",
          "[measured][plan]") {
  PlanOptions o;
  o.tp = {8};
  o.seq = {4096};
  const ProfilePlan p = make_plan(load_model(resolve_config("models", "qwen2-vl-14.9b")), o);
  // 1024 LM tokens per image after the 2x2 merge: 4096 patches attend to each other.
  bool vit_attention = false;
  for (const AttentionPoint& a : p.attention)
    if (!a.causal) {
      vit_attention = true;
      CHECK(a.seq == 4096);
      CHECK(a.heads == 2);  // 16 / 8
      CHECK(a.head_dim == 80);
    }
  CHECK(vit_attention);
  bool vit_fc1 = false;
  for (const GemmShape& g : p.gemm)
    if (g.label == "vit.fc1.F") {
      vit_fc1 = true;
      CHECK((g.m == 4096 && g.n == 640 && g.k == 1280));  // 5120 / 8 per GPU
    }
  CHECK(vit_fc1);
}

TEST_CASE("a one-GPU measured profile keeps the spec profile's links and loads", "[measured]") {
  MeasuredTables t = make_synthetic();
  t.comm.clear();  // one GPU: no collectives, no P2P
  t.meta.gpus = 1;
  const std::string base = read_text(std::string(BRAID_SOURCE_DIR) + "/profiles/h200.yaml");
  const std::string text = measured_profile_yaml("one-gpu", t, fit_profile(t), base, "h200.yaml");
  const std::string file = (test::scratch_dir() / "one-gpu.yaml").string();
  std::ofstream(file) << text;
  const Profile p = load_profile(file);
  const Profile spec = load_profile("h200");
  CHECK(p.source == Source::Measured);
  CHECK(p.link("nvlink").bus_bandwidth_Bps == spec.link("nvlink").bus_bandwidth_Bps);
  CHECK(p.link("ib").latency_s == spec.link("ib").latency_s);
  CHECK(p.gemm.max_efficiency == Approx(0.78).epsilon(0.01));
  CHECK(p.host_d2h_Bps == Approx(52e9).epsilon(0.02));
  REQUIRE(p.measured);
  CHECK(p.measured->comm.empty());
  CHECK_FALSE(p.link("nvlink").measured);
}

TEST_CASE("a measured profile with the typo peak_flop is refused with one line naming the field",
          "[measured][cli]") {
  std::string text = read_text(kSyntheticProfile);
  const auto at = text.find("  peak_flops:");
  REQUIRE(at != std::string::npos);
  text.replace(at, 13, "  peak_flop:");
  const std::string file = (test::scratch_dir() / "peak-flop-typo.yaml").string();
  std::ofstream(file) << text;
  CHECK_THROWS_WITH(load_profile(file), Catch::Contains(file) &&
                                            Catch::Contains("measured.peak_flop") &&
                                            Catch::Contains("unknown field; allowed here:") &&
                                            Catch::Contains("peak_flops"));
  const test::CliRun run = test::run_braid("info --profile " + file);
  CHECK(run.exit_code == 2);
  CHECK(run.out.empty());
  CHECK(test::count_lines(run.err) == 1);
  CHECK_THAT(run.err, Catch::Contains("measured.peak_flop") && Catch::Contains("allowed here:"));
}

TEST_CASE("the measured tables' reader refuses unknown keys at every level", "[measured]") {
  CHECK_THROWS_WITH(parse_measured("gemm:\n  - {m: 1, n: 2, k: 3, time_s: 1, tme_s: 2}\n", "p"),
                    Catch::Contains("measured.gemm[0].tme_s") && Catch::Contains("allowed here:"));
  CHECK_THROWS_WITH(parse_measured("meta: {gpu: x, gpu_count: 2}\n", "p"),
                    Catch::Contains("measured.meta.gpu_count"));
  CHECK_THROWS_WITH(parse_measured("copies: {d2h: [], h2dd: []}\n", "p"),
                    Catch::Contains("measured.copies.h2dd"));
  CHECK_THROWS_WITH(
      parse_measured("comm: {nvlink: {p2p: [{ranks: 2, bytes: 1, time_s: 1, link: x}]}}\n", "p"),
      Catch::Contains("measured.comm.nvlink.p2p[0].link"));
}
