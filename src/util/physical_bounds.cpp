#include "physical_bounds.hpp"

#include "format.hpp"

namespace braid::detail {

void check_bound(const YamlMap& m, const std::string& key, double v, Bound b) {
  if (v < b.lo || v > b.hi)
    m.fail(key, util::format("must be from %g to %g%s%s (docs/configuration.md, Bounds), got %g",
                             b.lo, b.hi, *b.unit != '\0' ? " " : "", b.unit, v));
}

double bounded_number(YamlMap& m, const std::string& key, Bound b) {
  const double v = b.lo > 0 ? m.positive_number(key) : m.nonnegative_number(key);
  check_bound(m, key, v, b);
  return v;
}

double bounded_number_or(YamlMap& m, const std::string& key, double fallback, Bound b) {
  return m.has(key) ? bounded_number(m, key, b) : fallback;
}

}  // namespace braid::detail
