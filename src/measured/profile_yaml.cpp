// measured_profile_yaml: the profile file braid-profile writes — the spec-derived schema with the
// fitted parameters, plus the measured tables — and the known-peak table it takes the peak from.
#include <cmath>

#include <yaml-cpp/yaml.h>

#include "../util/format.hpp"
#include "braid/error.hpp"
#include "braid/measured.hpp"

namespace braid {

std::optional<double> known_peak_flops(const std::string& gpu_name) {
  // Dense BF16 TFLOP/s, shared/reference/hardware-and-models.md §A.1: H100/H800/H200 989
  // [N3][N4][N7][N9], A100/A800 312 [N1][N6], H20 148 [N8]. Longest names first ("H20" is a
  // prefix of "H200").
  static const std::pair<const char*, double> kPeaks[] = {{"H200", 989e12}, {"H100", 989e12},
                                                          {"H800", 989e12}, {"A100", 312e12},
                                                          {"A800", 312e12}, {"H20", 148e12}};
  for (const auto& [key, peak] : kPeaks)
    if (gpu_name.find(key) != std::string::npos) return peak;
  return std::nullopt;
}

namespace {

std::string num(double x, const char* fmt = "%.6g") { return util::format(fmt, x); }

}  // namespace

std::string measured_profile_yaml(const std::string& name, const MeasuredTables& t,
                                  const ProfileFit& fit, const std::string& base_yaml,
                                  const std::string& base_name) {
  YAML::Node doc;
  if (!base_yaml.empty()) {
    try {
      doc = YAML::Load(base_yaml);
    } catch (const YAML::Exception& ex) {
      throw InputError(base_name, "profile", std::string("malformed YAML: ") + ex.what());
    }
    if (!doc.IsMap()) throw InputError(base_name, "profile", "not a mapping");
    doc.remove("measured");
  }
  YAML::Node out;  // rebuilt in a fixed key order
  out["name"] = name;
  out["gpu"] = t.meta.gpu;
  out["source"] = "measured";
  auto keep = [&](const char* key) {
    if (doc[key]) out[key] = doc[key];
  };
  if (t.peak_flops > 0)
    out["peak_tflops"] = num(t.peak_flops / 1e12);
  else
    keep("peak_tflops");
  if (t.hbm_bytes > 0)
    out["hbm_gb"] = num(t.hbm_bytes / 1e9, "%.1f");
  else
    keep("hbm_gb");
  if (t.hbm_bandwidth_Bps > 0)
    out["hbm_bandwidth_gbps"] = num(t.hbm_bandwidth_Bps / 1e9, "%.1f");
  else
    keep("hbm_bandwidth_gbps");
  if (fit.memory_bound_efficiency > 0)
    out["memory_bound_efficiency"] = num(fit.memory_bound_efficiency, "%.4f");
  else
    keep("memory_bound_efficiency");
  if (!t.gemm.empty()) {
    out["gemm"]["max_efficiency"] = num(fit.gemm.max_efficiency, "%.4f");
    out["gemm"]["half_gflop"] = num(fit.gemm.half_flops / 1e9, "%.4g");
  } else {
    keep("gemm");
  }
  if (!t.attention.empty()) {
    out["attention"]["fwd_efficiency"] = num(fit.attention_fwd_efficiency, "%.4f");
    out["attention"]["bwd_efficiency"] = num(fit.attention_bwd_efficiency, "%.4f");
  } else {
    keep("attention");
  }
  YAML::Node links = doc["links"] ? YAML::Clone(doc["links"]) : YAML::Node(YAML::NodeType::Map);
  for (const auto& [link, lf] : fit.links) {
    if (lf.bus_bandwidth_Bps > 0) {
      links[link]["latency_us"] = num(lf.latency_s * 1e6, "%.3g");
      links[link]["bus_bandwidth_gbps"] = num(lf.bus_bandwidth_Bps / 1e9, "%.1f");
    }
    if (lf.p2p_bandwidth_Bps > 0)
      links[link]["p2p_bandwidth_gbps"] = num(lf.p2p_bandwidth_Bps / 1e9, "%.1f");
  }
  if (links.size() > 0) out["links"] = links;
  YAML::Node host = doc["host"] ? YAML::Clone(doc["host"]) : YAML::Node(YAML::NodeType::Map);
  if (fit.host_d2h_Bps > 0) host["d2h_gbps"] = num(fit.host_d2h_Bps / 1e9, "%.1f");
  if (fit.host_h2d_Bps > 0) host["h2d_gbps"] = num(fit.host_h2d_Bps / 1e9, "%.1f");
  if (host.size() > 0) out["host"] = host;
  if (t.contention) {
    const Contention c = t.contention->factors();
    out["contention"]["compute_slowdown"] = num(c.compute_slowdown, "%.3f");
    out["contention"]["comm_slowdown"] = num(c.comm_slowdown, "%.3f");
  } else {
    keep("contention");
  }
  if (t.fixed_overhead_bytes > 0)
    out["fixed_overhead_gib"] = num(t.fixed_overhead_bytes / (1024.0 * 1024 * 1024), "%.2f");
  else
    keep("fixed_overhead_gib");
  // Anything else the base profile has (fields this writer does not know) is kept as it is.
  for (const auto& kv : doc) {
    const std::string key = kv.first.as<std::string>();
    if (!out[key]) out[key] = kv.second;
  }

  YAML::Emitter e;
  e << out;
  std::string head = "# Measured by braid-profile on " + t.meta.host + ", " + t.meta.date + ": " +
                     std::to_string(t.meta.gpus) + " x " + t.meta.gpu + ".\n# " + "driver " +
                     t.meta.driver + ", CUDA " + t.meta.cuda + ", cuBLAS " + t.meta.cublas +
                     ", cuDNN " + t.meta.cudnn + ", NCCL " + t.meta.nccl +
                     ".\n# Command: " + t.meta.command + "\n";
  if (!base_name.empty())
    head += "# Fields the run did not measure are kept from " + base_name + " (spec-derived).\n";
  head += "# The spec-model fields are fitted to the tables under `measured:` (braid calibrate).\n";
  return head + e.c_str() + "\nmeasured:\n" + [&] {
    // Indent the tables' own text by two spaces under `measured:`.
    const std::string body = emit_measured(t);
    std::string indented;
    std::size_t start = 0;
    while (start < body.size()) {
      const std::size_t end = body.find('\n', start);
      const std::string line = body.substr(start, end == std::string::npos ? end : end - start);
      if (!line.empty()) indented += "  " + line + "\n";
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return indented;
  }();
}

}  // namespace braid
