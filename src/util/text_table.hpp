// Plain-text tables for the terminal renderings (simulate, compare, sweep, search, theory): rows
// of cells as aligned columns, and the percentage format they share. Internal (src/util/, usable
// by every module); it knows no braid type, only strings and numbers.
#pragma once

#include <string>
#include <vector>

namespace braid::util {

// How the columns after the first are aligned; the first is always left-aligned.
enum class Align { Right, Left };

// Rows of cells -> one line per row, columns two spaces apart, trailing spaces dropped.
std::string text_table(const std::vector<std::vector<std::string>>& rows,
                       Align rest = Align::Right);

// A rate as a percentage with `digits` decimals ("12.34%"). The bubble rates are differences of
// sums: a tiny negative one is rounding, not a gain, and prints as 0.
std::string percent(double rate, int digits = 2);

}  // namespace braid::util
