#include "option_values.hpp"

#include <cmath>

#include "../util/format.hpp"

namespace braid::cli {

namespace {

// The number `text` holds, NaN when it is not one (CLI11 has converted the value already; this
// reads it again to see NaN and infinity, which its checks miss).
double number_in(const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    return used == text.size() ? v : std::nan("");
  } catch (const std::exception&) {
    return std::nan("");
  }
}

std::string shown(double v) { return util::format("%g", v); }

}  // namespace

CLI::Validator finite_range(double lo, double hi, const std::string& unit) {
  const std::string allowed = "allowed: " + unit + " from " + shown(lo) + " to " + shown(hi);
  return {[lo, hi, allowed](std::string& text) {
            const double v = number_in(text);
            return std::isfinite(v) && v >= lo && v <= hi ? std::string() : text + "; " + allowed;
          },
          ""};
}

CLI::Validator finite_positive(double hi, const std::string& unit) {
  const std::string allowed = "allowed: " + unit + " above 0, at most " + shown(hi);
  return {[hi, allowed](std::string& text) {
            const double v = number_in(text);
            return std::isfinite(v) && v > 0 && v <= hi ? std::string() : text + "; " + allowed;
          },
          ""};
}

CLI::Validator at_least_one() {
  return {[](std::string& text) {
            const double v = number_in(text);
            return std::isfinite(v) && v >= 1 ? std::string() : text + "; allowed: 1 or more";
          },
          ""};
}

CLI::Validator file_name() {
  return {[](std::string& text) {
            return text.empty() ? std::string("empty; give a file name") : std::string();
          },
          ""};
}

}  // namespace braid::cli
