// CLI11 validators for option values that CLI11's own let through: NaN passes PositiveNumber and
// NonNegativeNumber (every comparison with NaN is false), an empty string passes as a file name,
// and nothing stops a value equal to the "not given" sentinel (-1 for --mem-cap). Each refuses
// with one line naming what is allowed; main prints it and exits 2.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace braid::cli {

// Physical bounds of the command-line values (docs/configuration.md, Bounds): a memory cap or
// margin beyond any GPU's memory, a budget beyond days, is a typo, and far below the figures
// that overflow a double inside.
constexpr double kMaxMemoryGiB = 1e5;      // --mem-cap, --mem-margin
constexpr double kMaxBudgetS = 1e6;        // --design-budget, design --budget (11.6 days)
constexpr double kMaxActivationsMa = 1e6;  // design --mem-cap-ma, in activation units M_a

// A finite number in [lo, hi] (`unit` in the message: "seconds", "GiB").
CLI::Validator finite_range(double lo, double hi, const std::string& unit);
// A finite number above 0 and at most `hi`.
CLI::Validator finite_positive(double hi, const std::string& unit);
// An integer of 1 or more.
CLI::Validator at_least_one();
// A file name that is not empty.
CLI::Validator file_name();

}  // namespace braid::cli
