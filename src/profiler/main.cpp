// braid-profile: measures the real unit kernels (cuBLASLt GEMMs, attention, RMSNorm, RoPE,
// SwiGLU), NCCL collectives, P2P and host copies and compute/communication contention on the GPUs
// of this machine, checks every kernel against a reference first, and writes a profile YAML
// (`source: measured`) that braid's cost model uses. Exit 2 on bad input or when there is no GPU
// or NCCL to measure; exit 1 when a kernel fails its correctness check (naming it) or a CUDA call
// fails.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <cublasLt.h>
#include <cudnn.h>
#include <CLI/CLI.hpp>

#include "../util/atomic_file.hpp"
#include "attention.hpp"
#include "braid/config.hpp"
#include "braid/error.hpp"
#include "braid/measured.hpp"
#include "braid/profile.hpp"
#include "braid/profile_plan.hpp"
#include "checks.hpp"
#include "comm.hpp"
#include "device.hpp"
#include "gemm.hpp"
#include "kernels.hpp"

namespace fs = std::filesystem;
using namespace braid;
using namespace braid::profiler;

namespace {

struct Args {
  std::string model;
  std::vector<int> tp = {1};
  std::vector<int> seq = {4096};
  std::vector<int> mbs = {1};
  std::string out;
  std::string name;
  std::string spec;  // spec-derived profile to keep unmeasured fields from
  std::string link = "nvlink";
  double peak_tflops = 0;  // overrides the known-GPU table
  int gpus = 0;            // 0: all visible
  bool quick = false;
};

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string cudnn_version_string() {
  const std::size_t v = cudnnGetVersion();  // major*10000 + minor*100 + patch (cuDNN 9)
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

fs::path data_dir() { return data_root(); }

// profiles/<key>.yaml of the spec-derived profile for a GPU name, or "" (longest keys first:
// "h20" is a prefix of "h200").
std::string spec_profile_for(const std::string& gpu) {
  std::string lower;
  for (char c : gpu) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* key : {"h200", "h100", "h800", "a100", "a800", "h20"})
    if (lower.find(key) != std::string::npos &&
        fs::exists(data_dir() / "profiles" / (std::string(key) + ".yaml")))
      return key;
  return "";
}

void say(const std::string& s) { std::cerr << "braid-profile: " << s << "\n"; }

MeasuredTables measure(const Args& args, const ModelConfig& model, const std::string& command) {
  // The machine first: no GPU (or no driver) is a clear message, not a crash.
  const DeviceInfo dev = query_devices();
  const int gpus = args.gpus > 0 ? std::min(args.gpus, dev.count) : dev.count;
  std::string nccl_why;
  std::shared_ptr<Nccl> nccl = load_nccl(&nccl_why);
  if (gpus >= 2 && !nccl)
    throw InputError("NCCL", "libnccl.so.2",
                     nccl_why + "; install NCCL or run with --gpus 1 (no collectives measured)");

  MeasuredTables t;
  t.meta.gpu = dev.name;
  t.meta.gpus = gpus;
  t.meta.driver = dev.driver;
  t.meta.cuda = dev.runtime;
  t.meta.cudnn = cudnn_version_string();
  t.meta.nccl = nccl ? nccl_version(*nccl) : "not loaded";
  t.meta.date = utc_now_iso();
  t.meta.host = host_name();
  t.meta.command = command;
  t.meta.quick = args.quick;
  t.hbm_bytes = dev.memory_bytes;
  if (args.peak_tflops > 0) {
    t.peak_flops = args.peak_tflops * 1e12;
  } else if (auto p = known_peak_flops(dev.name)) {
    t.peak_flops = *p;
  } else {
    throw InputError("--peak-tflops", dev.name,
                     "this GPU's dense bf16 peak is not in braid's table; give it in TFLOP/s");
  }

  BRAID_CUDA(cudaSetDevice(0));
  cudaStream_t stream;
  BRAID_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Gemm gemm(stream);
  t.meta.cublas = gemm.version();
  cudnnHandle_t cudnn = nullptr;
  if (cudnnCreate(&cudnn) != CUDNN_STATUS_SUCCESS) throw GpuError("cudnnCreate failed");
  cudnnSetStream(cudnn, stream);
  {
    std::size_t free = 0, total = 0;
    BRAID_CUDA(cudaMemGetInfo(&free, &total));
    t.fixed_overhead_bytes = static_cast<double>(total - free);  // context, cuBLAS, cuDNN
  }
  say(std::to_string(gpus) + " x " + dev.name + ", driver " + dev.driver + ", CUDA " + dev.runtime +
      ", cuBLAS " + t.meta.cublas + ", cuDNN " + t.meta.cudnn + ", NCCL " + t.meta.nccl);

  // Correctness before any timing: a broken kernel must not produce a fast number.
  say("checking kernels against CPU references");
  check_gemm(gemm, stream);
  check_elementwise(stream);
  const FusedStatus fused = check_attention(gemm, cudnn, stream);
  auto impl = [](const std::string& problem) {
    return problem.empty() ? std::string("cudnn_sdpa") : "unfused (" + problem + ")";
  };
  t.meta.attention_impl =
      "forward " + impl(fused.fwd_problem) + ", backward " + impl(fused.bwd_problem);
  if (!fused.fwd_problem.empty())
    say("attention forward falls back to the unfused path: " + fused.fwd_problem);
  if (!fused.bwd_problem.empty())
    say("attention backward falls back to the unfused path: " + fused.bwd_problem);

  PlanOptions po;
  po.tp = args.tp, po.seq = args.seq, po.mbs = args.mbs, po.quick = args.quick;
  const ProfilePlan plan = make_plan(model, po);
  TimingOptions opt;
  if (args.quick) opt.warmup = 3, opt.repeats = 10;

  say("GEMMs: " + std::to_string(plan.gemm.size()) + " shapes");
  std::int64_t max_a = 0, max_b = 0, max_c = 0;
  for (const GemmShape& g : plan.gemm)
    max_a = std::max(max_a, g.m * g.k), max_b = std::max(max_b, g.k * g.n),
    max_c = std::max(max_c, g.m * g.n);
  {
    DeviceBuffer a(2 * max_a), b(2 * max_b), c(2 * max_c);
    fill_uniform_bf16(a.get(), max_a, 1, 1.0f, stream);
    fill_uniform_bf16(b.get(), max_b, 2, 1.0f, stream);
    for (const GemmShape& g : plan.gemm) {
      // The unit's layout: forward (N,T) against a weight stored [out x in], input gradient
      // (N,N), weight gradient (T,N).
      const char phase = g.label.back();
      const GemmCall call{g.m, g.n, g.k, phase == 'W', phase == 'F'};
      const double s = time_median_s(
          stream, [&] { gemm.run(call, a.get(), b.get(), c.get()); }, opt);
      t.gemm.push_back({g.m, g.n, g.k, s, g.label});
    }
  }

  say("elementwise kernels: " + std::to_string(plan.elementwise.size()) + " shapes");
  for (const ElementwiseShape& e : plan.elementwise) {
    const std::int64_t in_elems =
        e.tokens * e.width * (e.kernel == ElementwiseKernel::SwiGLU ? 2 : 1);
    DeviceBuffer in(2 * in_elems), out(2 * e.tokens * e.width), w(2 * e.width);
    fill_uniform_bf16(in.get(), in_elems, 3, 1.0f, stream);
    fill_uniform_bf16(w.get(), e.width, 4, 1.0f, stream);
    std::function<void()> fn;
    switch (e.kernel) {
      case ElementwiseKernel::RmsNorm:
        fn = [&] { rmsnorm_fwd(in.get(), w.get(), out.get(), e.tokens, e.width, 1e-6f, stream); };
        break;
      case ElementwiseKernel::Rope:
        fn = [&] { rope_fwd(in.get(), e.tokens, e.heads, e.head_dim, e.seq, 1e6f, stream); };
        break;
      case ElementwiseKernel::SwiGLU:
        fn = [&] { swiglu_fwd(in.get(), out.get(), e.tokens, e.width, stream); };
        break;
    }
    t.elementwise.push_back({e.kernel, e.bytes(), time_median_s(stream, fn, opt)});
  }

  say("attention: " + std::to_string(plan.attention.size()) + " shapes");
  std::string unfused_shapes;  // shapes for which cuDNN had no engine
  for (const AttentionPoint& a : plan.attention) {
    const AttentionShape s{a.batch, a.heads, a.kv_heads, a.seq, a.head_dim, a.causal};
    const AttentionTimes at = time_attention(gemm, cudnn, stream, s, opt, fused);
    AttentionPoint p = a;
    p.fwd_s = at.fwd_s, p.bwd_s = at.bwd_s;
    t.attention.push_back(p);
    const bool fwd_fell_back = fused.fwd_problem.empty() && at.fwd_impl != "cudnn_sdpa";
    const bool bwd_fell_back = fused.bwd_problem.empty() && at.bwd_impl != "cudnn_sdpa";
    if (fwd_fell_back || bwd_fell_back)
      unfused_shapes += std::string(" ") + (fwd_fell_back ? "F" : "") + (bwd_fell_back ? "B" : "") +
                        ":b" + std::to_string(a.batch) + "/s" + std::to_string(a.seq) + "/h" +
                        std::to_string(a.heads) + "/d" + std::to_string(a.head_dim);
  }
  if (!unfused_shapes.empty())
    t.meta.attention_impl += "; unfused (no cuDNN engine) for" + unfused_shapes;

  say("HBM and host copies");
  t.hbm_bandwidth_Bps = time_hbm_bandwidth(1024.0 * 1024 * 1024, opt);
  time_host_copies(plan.copy_bytes, opt, &t.d2h, &t.h2d);

  if (gpus >= 2) {
    CommOptions co;
    co.bytes = plan.comm_bytes;
    for (int g : {2, 4, 8})
      if (g <= gpus) co.groups.push_back(g);
    co.repeats = args.quick ? 3 : 5;
    say("NCCL collectives over groups of " + std::to_string(co.groups.size()) + " sizes, " +
        std::to_string(co.bytes.size()) + " byte sizes");
    double comm_overhead = 0;
    for (auto& [op, points] : time_collectives(*nccl, co, &comm_overhead))
      t.comm[args.link][op] = points;
    t.fixed_overhead_bytes += comm_overhead;
    say("P2P copies GPU 0 -> GPU 1");
    t.comm[args.link][CollectiveKind::P2P] = time_p2p(plan.copy_bytes, opt);
  }
  say("contention");
  t.contention = time_contention(nccl.get(), gpus);

  cudnnDestroy(cudnn);
  BRAID_CUDA(cudaStreamDestroy(stream));
  return t;
}

// The model through the library's validating loader (a name under configs/models or a path).
ModelConfig read_model(const std::string& name_or_path) {
  return load_model(resolve_config("models", name_or_path));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "braid-profile: measure GEMMs, attention, elementwise kernels, NCCL collectives and copies "
      "on this machine's GPUs and write a measured braid profile"};
  Args args;
  app.add_option("--model", args.model, "model name (configs/models/NAME.yaml) or YAML path")
      ->required();
  app.add_option("--tp", args.tp, "TP sizes whose per-GPU shapes are measured, e.g. 1,2,4,8")
      ->delimiter(',');
  app.add_option("--seq", args.seq, "sequence lengths, e.g. 2048,4096")->delimiter(',');
  app.add_option("--mbs", args.mbs, "micro-batch sizes, e.g. 1,2")->delimiter(',');
  app.add_option("--out", args.out, "profile YAML to write, e.g. profiles/h200-measured.yaml")
      ->required();
  app.add_option("--name", args.name, "profile name (default: the --out file's stem)");
  app.add_option("--spec", args.spec,
                 "spec-derived profile (name or path) whose unmeasured fields are kept "
                 "(default: profiles/<gpu>.yaml when braid has one for this GPU)");
  app.add_option("--link", args.link, "link class of the GPUs' interconnect")
      ->capture_default_str();
  app.add_option("--peak-tflops", args.peak_tflops,
                 "dense bf16 peak (default: braid's table of known GPUs)");
  app.add_option("--gpus", args.gpus, "use only the first N GPUs (default: all visible)");
  app.add_flag("--quick", args.quick,
               "first --seq and --mbs only, fewer repeats and sizes (under 3 minutes on one GPU)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  std::string command = "braid-profile";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  try {
    detail::check_writable("--out", args.out);
    const ModelConfig model = read_model(args.model);
    PlanOptions po;
    po.tp = args.tp, po.seq = args.seq, po.mbs = args.mbs, po.quick = args.quick;
    make_plan(model, po);  // validate the sizes before touching the GPU
    if (!args.spec.empty() && !fs::exists(args.spec) &&
        !fs::exists(data_dir() / "profiles" / (args.spec + ".yaml")))
      throw InputError("--spec", args.spec, "no such profile file or name under profiles/");
    const MeasuredTables t = measure(args, model, command);
    // The spec-derived profile of this GPU keeps what the run did not measure (links on a
    // one-GPU machine, inter-node links, ...): --spec, else profiles/<gpu>.yaml when braid has one.
    std::string spec = args.spec;
    if (spec.empty()) spec = spec_profile_for(t.meta.gpu);
    std::string base, base_name;
    if (!spec.empty()) {
      fs::path sp(spec);
      if (!fs::exists(sp)) sp = data_dir() / "profiles" / (spec + ".yaml");
      if (!fs::exists(sp)) throw InputError("--spec", spec, "no such profile");
      base = read_text(sp);
      base_name = sp.filename().string();
    }
    const ProfileFit fit = fit_profile(t);
    const std::string name = args.name.empty() ? fs::path(args.out).stem().string() : args.name;
    detail::write_file("--out", args.out, measured_profile_yaml(name, t, fit, base, base_name));
    try {
      load_profile(args.out);  // the measurements are kept either way; say if braid cannot use them
    } catch (const InputError& e) {
      say(std::string("warning: the written profile does not load yet (") + e.what() +
          "); complete the unmeasured fields or rerun with --spec");
    }
    std::printf("wrote %s: %zu GEMMs, %zu attention shapes, %zu elementwise, %zu link classes\n",
                args.out.c_str(), t.gemm.size(), t.attention.size(), t.elementwise.size(),
                t.comm.size());
    for (const auto& [unit, s] : summarize_fit(fit))
      std::printf("  fit %-28s %3d points, mean |err| %5.1f %%, max %5.1f %%\n", unit.c_str(),
                  s.points, 100 * s.mean_abs_error, 100 * s.max_abs_error);
  } catch (const InputError& e) {
    std::cerr << "braid-profile: " << e.what() << "\n";
    return 2;
  } catch (const CheckError& e) {
    std::cerr << "braid-profile: correctness check failed, aborting: " << e.what() << "\n";
    return 1;
  } catch (const GpuError& e) {
    const std::string what = e.what();
    std::cerr << "braid-profile: " << what << "\n";
    // No GPU or no driver is the machine, not a bug: exit 2 like other unusable input.
    return what.rfind("no CUDA GPU", 0) == 0 ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << "braid-profile: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
