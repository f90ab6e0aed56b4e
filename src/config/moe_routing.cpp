// training.moe_routing (config.hpp MoeRouting; docs/moe.md, "Load imbalance and capacity"): the
// one name/parse pair of the MoE routers' token distribution, and each expert's load.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "../util/format.hpp"
#include "../util/input_file.hpp"
#include "braid/config.hpp"
#include "braid/error.hpp"

namespace braid {

namespace fs = std::filesystem;

namespace {

const char* const kRoutingValues =
    "expected balanced, skew:S (S >= 0, Zipf), histogram:FILE (one non-negative count or weight "
    "per expert) or multinomial:SEED (an unsigned integer)";

// `text` as a whole number, or nullopt.
std::optional<double> number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// A histogram file: numbers separated by blanks, commas or line breaks, in an optional YAML flow
// list ([3, 1, 1, 1]) or block list (- 3), # comments.
std::vector<double> read_histogram(const fs::path& path, const std::string& shown,
                                   const std::string& where, const std::string& field) {
  std::string text;
  try {
    text = util::read_input_file(path, util::kYamlFile);
  } catch (const InputError& e) {
    throw InputError(where, field,
                     "histogram file " + shown + ": " + e.problem +
                         "; give a file of one non-negative count or weight per expert");
  }
  std::vector<double> weights;
  std::string token;
  bool comment = false;
  auto flush = [&] {
    if (token.empty() || token == "-") {
      token.clear();
      return;
    }
    const std::optional<double> v = number(token);
    if (!v || *v < 0)
      throw InputError(where, field,
                       "histogram file " + shown + ": '" + util::escape_control_bytes(token) +
                           "' is not a non-negative count; give one count or weight per expert");
    weights.push_back(*v);
    token.clear();
  };
  for (const char c : text) {
    if (c == '\n') comment = false;
    if (comment) continue;
    if (c == '#') {
      flush();
      comment = true;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ',' || c == '[' ||
               c == ']') {
      flush();
    } else {
      token += c;
    }
  }
  flush();
  double sum = 0;
  for (const double w : weights) sum += w;
  if (!(sum > 0))
    throw InputError(where, field,
                     "histogram file " + shown +
                         " has no positive count; give one non-negative count or weight per "
                         "expert, at least one above 0");
  return weights;
}

}  // namespace

std::string name(const MoeRouting& r) {
  switch (r.kind) {
    case MoeRoutingKind::Balanced:
      return "balanced";
    case MoeRoutingKind::Skew:
      return util::format("skew:%g", r.skew);
    case MoeRoutingKind::Histogram:
      return "histogram:" + r.file;
    case MoeRoutingKind::Multinomial:
      return "multinomial:" + std::to_string(r.seed);
  }
  return "balanced";
}

MoeRouting parse_moe_routing(const std::string& text, const std::string& where,
                             const std::string& field, const fs::path& relative_to) {
  const std::string shown = util::escape_control_bytes(text);
  auto bad = [&](const std::string& why) {
    return InputError(where, field, "'" + shown + "' " + why + "; " + kRoutingValues);
  };
  MoeRouting r;
  if (text == "balanced") return r;
  const std::size_t colon = text.find(':');
  if (colon == std::string::npos) throw bad("is not a routing");
  const std::string kind = text.substr(0, colon), arg = text.substr(colon + 1);
  if (kind == "skew") {
    const std::optional<double> s = number(arg);
    if (!s || *s < 0) throw bad("has no skew S >= 0");
    r.kind = MoeRoutingKind::Skew;
    r.skew = *s;
  } else if (kind == "histogram") {
    if (arg.empty()) throw bad("names no file");
    r.kind = MoeRoutingKind::Histogram;
    r.file = arg;
    const fs::path path =
        fs::path(arg).is_relative() && !relative_to.empty() ? relative_to / arg : fs::path(arg);
    r.weights = read_histogram(path, util::escape_control_bytes(arg), where, field);
  } else if (kind == "multinomial") {
    if (arg.empty() || arg.size() > 19 || arg.find_first_not_of("0123456789") != std::string::npos)
      throw bad("has no seed (an unsigned integer, up to 19 digits)");
    r.kind = MoeRoutingKind::Multinomial;
    r.seed = std::stoull(arg);
  } else {
    throw bad("is not a routing");
  }
  return r;
}

std::vector<double> moe_expert_loads(const MoeRouting& r, int experts, int top_k, double choices) {
  const std::size_t n = static_cast<std::size_t>(experts);
  std::vector<double> w(n, 1.0);
  if (r.kind == MoeRoutingKind::Skew) {
    for (std::size_t e = 0; e < n; ++e) w[e] = std::pow(static_cast<double>(e + 1), -r.skew);
  } else if (r.kind == MoeRoutingKind::Histogram) {
    w = r.weights;
    w.resize(n, 0.0);
  } else if (r.kind == MoeRoutingKind::Multinomial) {
    // choices draws, each the raw 64-bit output of std::mt19937_64 (fixed by the C++ standard)
    // taken modulo the experts: the same counts on every standard library, unlike
    // std::uniform_int_distribution.
    std::mt19937_64 gen(r.seed);
    std::fill(w.begin(), w.end(), 0.0);
    const auto draws = static_cast<std::uint64_t>(std::llround(choices));
    for (std::uint64_t i = 0; i < draws; ++i) w[gen() % n] += 1;
  }
  // Loads relative to the balanced share: experts x w / sum(w), 1 exactly when all are equal.
  double sum = 0;
  for (const double v : w) sum += v;
  std::vector<double> load(n, 1.0);
  if (!(sum > 0)) return load;
  for (std::size_t e = 0; e < n; ++e) load[e] = static_cast<double>(experts) * w[e] / sum;
  // A token's k choices are distinct experts: an expert takes at most every token, a load of
  // experts / k. Cap, and spread the excess over the uncapped experts by weight, until none is
  // over (each pass caps one more expert at least).
  const double cap = static_cast<double>(experts) / top_k;
  std::vector<bool> capped(n, false);
  for (std::size_t pass = 0; pass < n; ++pass) {
    double excess = 0, free_weight = 0;
    for (std::size_t e = 0; e < n; ++e) {
      if (!capped[e] && load[e] > cap) {
        excess += load[e] - cap;
        load[e] = cap;
        capped[e] = true;
      }
    }
    if (excess == 0) break;
    for (std::size_t e = 0; e < n; ++e)
      if (!capped[e]) free_weight += w[e];
    if (!(free_weight > 0)) break;
    for (std::size_t e = 0; e < n; ++e)
      if (!capped[e]) load[e] += excess * w[e] / free_weight;
  }
  return load;
}

}  // namespace braid
