// The physical bounds of the numbers studies, models, clusters and profiles give: a value past
// them is a typo (1e308 bytes per parameter, 1e-300 TFLOP/s), and far below the figures that
// overflow a double inside the cost model, so every report figure stays finite (issue 41, finding
// 3). docs/configuration.md (Bounds) lists them; a value outside is one InputError naming the
// file, the key, the bounds and the value. Internal (src/util): config and profile use it.
#pragma once

#include <string>

#include "yaml_reader.hpp"

namespace braid::detail {

struct Bound {
  double lo, hi;     // inclusive; lo 0 admits 0, lo > 0 refuses it
  const char* unit;  // as the key names it: "TFLOP/s", "GB/s", "us"
};

constexpr Bound kTflopsBound{1e-3, 1e5, "TFLOP/s"};   // peak_tflops
constexpr Bound kMemoryGbBound{1e-3, 1e5, "GB"};      // hbm_gb
constexpr Bound kOverheadGibBound{0, 1e5, "GiB"};     // fixed_overhead_gib
constexpr Bound kBandwidthBound{1e-6, 1e7, "GB/s"};   // HBM, link and host bandwidths
constexpr Bound kNicBound{1e-6, 1e8, "Gb/s"};         // nic_gbps
constexpr Bound kTimeUsBound{0, 1e9, "us"};           // latencies and fixed kernel times
constexpr Bound kBytesPerParamBound{0, 64, "bytes"};  // weight, gradient, optimizer bytes
constexpr Bound kBucketBound{0, 1e13, "parameters"};  // bucket_params
constexpr Bound kGflopBound{0, 1e9, "GFLOP"};         // half_gflop
constexpr Bound kRatioBound{1e-3, 1e3, ""};           // mlp_ratio, k_overhead
constexpr Bound kSlowdownBound{1, 1e3, "x"};          // contention slowdowns (1 = none)

// Refuses `v`, read from `key` of `m`, when it lies outside `b`.
void check_bound(const YamlMap& m, const std::string& key, double v, Bound b);
// m.positive_number(key) (lo > 0) or m.nonnegative_number(key) (lo 0), refused outside `b`.
double bounded_number(YamlMap& m, const std::string& key, Bound b);
// The same when the key is given, else `fallback`.
double bounded_number_or(YamlMap& m, const std::string& key, double fallback, Bound b);

}  // namespace braid::detail
