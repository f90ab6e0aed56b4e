// MeasuredTables: what braid-profile measured on one node — GEMM times per (m, n, k), attention
// forward/backward per shape, elementwise kernels per bytes, collectives per link class and
// (ranks, bytes), pinned host copies, contention — with their YAML text form, the lookups the cost
// model uses (log-space interpolation, nearest shape with a FLOP-ratio scaling rule) and the fit of
// the spec model's parameters (profile.hpp) to them. Plain data and pure functions: no CUDA, no
// terminal output; the profiler fills the tables, the profile loader and the cost model read them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "braid/profile.hpp"

namespace YAML {
class Node;  // yaml-cpp's; only parse_measured(const YAML::Node&, ...) needs the definition
}  // namespace YAML

namespace braid {

enum class ElementwiseKernel : std::uint8_t { RmsNorm, Rope, SwiGLU };

const char* name(ElementwiseKernel k);  // "rmsnorm", "rope", "swiglu"
std::optional<ElementwiseKernel> parse_elementwise_kernel(const std::string& s);

// One bf16 GEMM C[m x n] = A[m x k] * B[k x n] timed alone. `label` names the unit GEMM it
// stands for ("qkv.F", "fc2.W", ...), for the per-unit fit error; lookups ignore it.
struct GemmPoint {
  std::int64_t m = 0, n = 0, k = 0;
  double time_s = 0;
  std::string label;
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * k; }
};

// Fused attention on one GPU: `heads` query heads (already divided by TP), `kv_heads` KV heads,
// `batch` sequences of `seq` tokens. Forward and backward (dQ, dK, dV) times.
struct AttentionPoint {
  int batch = 1;
  int seq = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  bool causal = true;
  double fwd_s = 0;
  double bwd_s = 0;
};
// Attention FLOPs as FlashAttention counts them: forward 4*b*s^2*h*d (two GEMMs), halved when
// causal; backward 2.5x the forward (five GEMMs, one of them the recomputed S = QK^T).
double attention_fwd_flops(const AttentionPoint& a);
double attention_bwd_flops(const AttentionPoint& a);

// A memory-bound kernel moving `bytes` (reads + writes) in `time_s`.
struct ElementwisePoint {
  ElementwiseKernel kernel = ElementwiseKernel::RmsNorm;
  double bytes = 0;
  double time_s = 0;
};

// A pinned host<->device copy.
struct CopyPoint {
  double bytes = 0;
  double time_s = 0;
};

// Where and with what the tables were measured.
struct MeasuredMeta {
  std::string gpu;                                // device name as the driver reports it
  int gpus = 0;                                   // visible GPUs used
  std::string driver, cuda, cublas, cudnn, nccl;  // versions
  std::string date;                               // UTC, ISO 8601
  std::string host;
  std::string command;         // the braid-profile command line
  std::string attention_impl;  // "cudnn_sdpa" or "unfused" (cuBLASLt + softmax kernels)
  bool quick = false;
};

// Compute and communication together vs alone (one GEMM stream, one NCCL or copy stream).
struct MeasuredContention {
  std::string partner;  // "all_reduce" (NCCL) or "copy" (one GPU)
  double compute_alone_s = 0, compute_together_s = 0;
  double comm_alone_s = 0, comm_together_s = 0;
  Contention factors() const;  // together / alone, at least 1
};

struct MeasuredTables {
  MeasuredMeta meta;
  double peak_flops = 0;            // the dense bf16 peak the efficiencies are relative to
  double hbm_bytes = 0;             // device memory
  double hbm_bandwidth_Bps = 0;     // measured device-to-device copy bandwidth (read + write)
  double fixed_overhead_bytes = 0;  // device memory taken by context, libraries and NCCL
  std::vector<GemmPoint> gemm;
  std::vector<AttentionPoint> attention;
  std::vector<ElementwisePoint> elementwise;
  // link class ("nvlink", "pcie", ...) -> collective -> points (ranks, nccl-tests bytes, time).
  // A loaded profile's links point at these rows (LinkProfile::measured) rather than copy them.
  std::map<std::string, CollectiveRows> comm;
  std::vector<CopyPoint> d2h, h2d;
  std::optional<MeasuredContention> contention;

  bool empty() const;
};

// YAML text of the tables: a mapping meant to sit under a profile's `measured:` key. Fixed float
// formatting (integers exactly, other numbers %.9g) and stable ordering, so the same tables give
// byte-identical text.
std::string emit_measured(const MeasuredTables& t);
// Parses what emit_measured writes (the mapping itself, not the whole profile), strictly: a
// missing or malformed field, or a key the schema does not know (`peak_flop:`), throws InputError
// naming `where`, the field and the allowed keys.
MeasuredTables parse_measured(const std::string& yaml_text, const std::string& where);
// The same for the `measured:` node of a profile file already parsed (the profile loader's).
MeasuredTables parse_measured(const YAML::Node& section, const std::string& where);

// The `measured:` section of a profile file, or nullopt when it has none. When the section has
// no peak_flops, the profile's `peak_tflops` is used. Throws InputError on malformed YAML.
std::optional<MeasuredTables> load_measured_section(const std::filesystem::path& profile_file);

// --- lookups ---------------------------------------------------------------------------------

// How a looked-up number was obtained.
enum class LookupKind : std::uint8_t { Exact, Interpolated, Extrapolated, Scaled };
const char* name(LookupKind k);
struct Lookup {
  double time_s = 0;
  LookupKind kind = LookupKind::Exact;
};

// Piecewise log-log interpolation of time over x (bytes, or FLOPs) through points sorted by x:
// exact at the points, log-linear between them. Above the largest x the time grows in proportion
// to x (the last achieved rate holds). Below the smallest x: with `floor_below` the smallest
// point's time (a latency floor: collectives, copies, memory-bound kernels), else the time
// shrinks in proportion (the smallest point's achieved rate: GEMMs and attention).
Lookup interpolate_loglog(const std::vector<std::pair<double, double>>& xy, double x,
                          bool floor_below = true);

// GEMM: an exact (m, n, k) match; else the points sharing two of the three dimensions,
// interpolated in log space over FLOPs; else the nearest shape (Euclidean over log m, log n,
// log k) at its achieved FLOP/s (time scaled by the FLOP ratio). nullopt when there is no point.
std::optional<Lookup> gemm_time(const MeasuredTables& t, std::int64_t m, std::int64_t n,
                                std::int64_t k);
// Attention: points with the same heads, kv_heads, head_dim and mask, interpolated in log space
// over FLOPs (batch*seq^2); else the nearest point with the same mask at its achieved FLOP/s.
std::optional<Lookup> attention_time(const MeasuredTables& t, const AttentionPoint& shape,
                                     bool backward);
std::optional<Lookup> elementwise_time(const MeasuredTables& t, ElementwiseKernel k, double bytes);
// Collective on a link class: points with the same group size interpolated over bytes; else the
// nearest measured group size at the same bus bandwidth (time scaled by the bus factors).
std::optional<Lookup> comm_time(const MeasuredTables& t, const std::string& link, CollectiveKind op,
                                int ranks, double bytes);
// The rule comm_time and the cost model's collective_time_s share, over one collective's rows:
// the rows of `ranks` interpolated log-log over bytes, else those of the nearest listed group
// size (the larger on a tie) with the time scaled by the bus factors (same bus bandwidth).
// Below the first row: its time (floor_below) or its bus bandwidth. nullopt without rows.
std::optional<Lookup> comm_rows_time(const std::vector<MeasuredComm>& rows, CollectiveKind op,
                                     int ranks, double bytes, bool floor_below = true);
std::optional<Lookup> copy_time(const std::vector<CopyPoint>& points, double bytes);

// --- fitting -----------------------------------------------------------------------------------

// One measured number against the fitted spec model.
struct FitPoint {
  std::string unit;  // "gemm:qkv.F", "attention.fwd", "rmsnorm", "nvlink:all_reduce:8", "d2h"
  std::string size;  // "4096x4608x3584", "b1 s4096 h28", "1048576 B"
  double measured_s = 0;
  double model_s = 0;
  double rel_error() const { return measured_s > 0 ? (model_s - measured_s) / measured_s : 0; }
};

struct LinkFit {
  double latency_s = 0;
  double bus_bandwidth_Bps = 0;  // fitted over all collectives of the link
  double p2p_latency_s = 0;
  double p2p_bandwidth_Bps = 0;
};

// The spec model's parameters fitted to measured tables, with every point's error.
struct ProfileFit {
  GemmEfficiency gemm;
  double attention_fwd_efficiency = 0;
  double attention_bwd_efficiency = 0;
  double memory_bound_efficiency = 0;  // relative to the tables' hbm_bandwidth_Bps
  std::map<std::string, LinkFit> links;
  double host_d2h_Bps = 0, host_h2d_Bps = 0;
  double d2h_latency_s = 0, h2d_latency_s = 0;
  std::vector<FitPoint> points;
};

// Relative-error least squares (each point weighs by 1/measured^2, so small and large sizes
// count alike): GEMM t = (flops + half_flops) / (peak * max_efficiency), which is linear in flops;
// attention t = flops / (peak * eff); elementwise t = bytes / (hbm * eff); collectives
// t = latency + bus_factor * bytes / bus_bandwidth; copies t = latency + bytes / bandwidth.
// Uses t.peak_flops and t.hbm_bandwidth_Bps; throws InputError when they are missing.
ProfileFit fit_profile(const MeasuredTables& t);

// Per-unit summary of a fit's errors: unit -> (points, mean |rel error|, max |rel error|).
struct FitSummary {
  int points = 0;
  double mean_abs_error = 0;
  double max_abs_error = 0;
};
std::map<std::string, FitSummary> summarize_fit(const ProfileFit& fit);

// --- the profile file braid-profile writes ---------------------------------------------------

// The dense bf16 peak of a GPU named as the driver reports it ("NVIDIA H200", "NVIDIA
// A800-SXM4-80GB"), from shared/reference/hardware-and-models.md §A.1; nullopt for a GPU not in
// that table.
std::optional<double> known_peak_flops(const std::string& gpu_name);

// A whole profile in the schema of the spec-derived profiles (profiles/h200.yaml): `source:
// measured`, the spec-model fields set from `fit` where the tables measured them, the other fields
// kept from `base_yaml` (a spec-derived profile's text, or empty), and the tables under
// `measured:`. Deterministic text.
std::string measured_profile_yaml(const std::string& name, const MeasuredTables& t,
                                  const ProfileFit& fit, const std::string& base_yaml,
                                  const std::string& base_name);

}  // namespace braid
