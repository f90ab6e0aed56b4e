// braid calibrate --profile P [--json]: fits the spec model's parameters (GEMM efficiency curve,
// attention efficiencies, memory-bound efficiency, latency and bus bandwidth per link class, host
// copy bandwidths) to the measured tables of a profile and prints them with the fit error per
// unit and per measured size.
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "braid/error.hpp"
#include "braid/measured.hpp"
#include "braid/profile.hpp"
#include "commands.hpp"

namespace braid::cli {

namespace {

void print_text(const std::string& file, const MeasuredTables& t, const ProfileFit& fit) {
  std::printf("profile %s: measured %s on %s, %d x %s (peak %.0f TFLOP/s)\n", file.c_str(),
              t.meta.date.c_str(), t.meta.host.c_str(), t.meta.gpus, t.meta.gpu.c_str(),
              t.peak_flops / 1e12);
  std::printf("\nfitted spec-model parameters\n");
  if (!t.gemm.empty()) {
    std::printf("  gemm.max_efficiency          %.4f\n", fit.gemm.max_efficiency);
    std::printf("  gemm.half_gflop              %.3f\n", fit.gemm.half_flops / 1e9);
  }
  if (!t.attention.empty()) {
    std::printf("  attention.fwd_efficiency     %.4f\n", fit.attention_fwd_efficiency);
    std::printf("  attention.bwd_efficiency     %.4f\n", fit.attention_bwd_efficiency);
  }
  if (fit.memory_bound_efficiency > 0)
    std::printf("  memory_bound_efficiency      %.4f  (of %.1f GB/s measured copy bandwidth)\n",
                fit.memory_bound_efficiency, t.hbm_bandwidth_Bps / 1e9);
  for (const auto& [link, lf] : fit.links) {
    if (lf.bus_bandwidth_Bps > 0)
      std::printf("  links.%s.latency_us %*s%.2f\n  links.%s.bus_bandwidth_gbps %*s%.1f\n",
                  link.c_str(), static_cast<int>(17 - link.size()), "", lf.latency_s * 1e6,
                  link.c_str(), static_cast<int>(9 - link.size()), "", lf.bus_bandwidth_Bps / 1e9);
    if (lf.p2p_bandwidth_Bps > 0)
      std::printf("  links.%s.p2p_bandwidth_gbps %*s%.1f\n", link.c_str(),
                  static_cast<int>(9 - link.size()), "", lf.p2p_bandwidth_Bps / 1e9);
  }
  if (fit.host_d2h_Bps > 0)
    std::printf("  host.d2h_gbps                %.1f\n", fit.host_d2h_Bps / 1e9);
  if (fit.host_h2d_Bps > 0)
    std::printf("  host.h2d_gbps                %.1f\n", fit.host_h2d_Bps / 1e9);

  std::printf("\nfit error per unit (model - measured) / measured\n");
  std::printf("  %-32s %6s %10s %10s\n", "unit", "points", "mean |err|", "max |err|");
  for (const auto& [unit, s] : summarize_fit(fit))
    std::printf("  %-32s %6d %9.1f%% %9.1f%%\n", unit.c_str(), s.points, 100 * s.mean_abs_error,
                100 * s.max_abs_error);
  std::printf("\nfit error per size\n");
  std::printf("  %-32s %-22s %12s %12s %8s\n", "unit", "size", "measured_us", "model_us", "err");
  for (const FitPoint& p : fit.points)
    std::printf("  %-32s %-22s %12.3f %12.3f %7.1f%%\n", p.unit.c_str(), p.size.c_str(),
                p.measured_s * 1e6, p.model_s * 1e6, 100 * p.rel_error());
}

nlohmann::ordered_json to_json(const std::string& file, const MeasuredTables& t,
                               const ProfileFit& fit) {
  nlohmann::ordered_json j;
  j["profile"] = file;
  j["gpu"] = t.meta.gpu;
  j["measured_at"] = {{"host", t.meta.host}, {"date", t.meta.date}};
  j["peak_flops"] = t.peak_flops;
  nlohmann::ordered_json f;
  f["gemm"] = {{"max_efficiency", fit.gemm.max_efficiency}, {"half_flops", fit.gemm.half_flops}};
  f["attention"] = {{"fwd_efficiency", fit.attention_fwd_efficiency},
                    {"bwd_efficiency", fit.attention_bwd_efficiency}};
  f["memory_bound_efficiency"] = fit.memory_bound_efficiency;
  f["links"] = nlohmann::ordered_json::object();
  for (const auto& [link, lf] : fit.links)
    f["links"][link] = {{"latency_s", lf.latency_s},
                        {"bus_bandwidth_Bps", lf.bus_bandwidth_Bps},
                        {"p2p_latency_s", lf.p2p_latency_s},
                        {"p2p_bandwidth_Bps", lf.p2p_bandwidth_Bps}};
  f["host"] = {{"d2h_Bps", fit.host_d2h_Bps},
               {"h2d_Bps", fit.host_h2d_Bps},
               {"d2h_latency_s", fit.d2h_latency_s},
               {"h2d_latency_s", fit.h2d_latency_s}};
  j["fit"] = f;
  j["units"] = nlohmann::ordered_json::object();
  for (const auto& [unit, s] : summarize_fit(fit))
    j["units"][unit] = {{"points", s.points},
                        {"mean_abs_error", s.mean_abs_error},
                        {"max_abs_error", s.max_abs_error}};
  j["points"] = nlohmann::ordered_json::array();
  for (const FitPoint& p : fit.points)
    j["points"].push_back({{"unit", p.unit},
                           {"size", p.size},
                           {"measured_s", p.measured_s},
                           {"model_s", p.model_s},
                           {"rel_error", p.rel_error()}});
  return j;
}

}  // namespace

void register_calibrate(CLI::App& app) {
  struct Opts {
    std::string profile;
    bool json = false;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "fit the spec model's parameters to a profile's measured tables and print the "
      "fit error per unit and per size");
  cmd->footer(
      "Examples:\n"
      "  braid calibrate --profile profiles/NAME-measured.yaml\n"
      "  braid calibrate --profile profiles/NAME-measured.yaml --json\n"
      "See docs/profiling.md.");
  cmd->add_option("--profile", opts->profile, "profile name (profiles/NAME.yaml) or path")
      ->required();
  cmd->add_flag("--json", opts->json, "print JSON instead of tables");
  cmd->callback([opts] {
    const Profile profile = load_profile(opts->profile);
    if (!profile.measured || profile.measured->empty())
      throw InputError(profile.file, "measured",
                       "the profile has no measured tables; produce one with braid-profile");
    const MeasuredTables& tables = *profile.measured;
    const ProfileFit fit = fit_profile(tables);
    if (opts->json)
      std::cout << to_json(profile.file, tables, fit).dump(2) << "\n";
    else
      print_text(profile.file, tables, fit);
  });
}

}  // namespace braid::cli
