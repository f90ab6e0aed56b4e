// Plain-text tables for the terminal renderings (simulate, compare, sweep, search, theory, info,
// design): rows of cells as aligned columns, and the percentage format they share. Internal
// (src/util/, usable by every module); it knows no braid type, only strings and numbers.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace braid::util {

// How the columns after the first are aligned; the first is always left-aligned.
enum class Align { Right, Left };

// Rows of cells -> one line per row, each column as wide as its widest cell, columns two spaces
// apart, trailing spaces dropped.
std::string text_table(const std::vector<std::vector<std::string>>& rows,
                       Align rest = Align::Right);

// One column of a fixed-width table: printf's field ("%-8s" is {Align::Left, 8}), and spaces
// before it beyond the table's gap.
struct Column {
  Align align = Align::Right;
  std::size_t width = 0;
  std::size_t extra_gap = 0;
};

// printf's "%-Ns" and "%Ns" as columns.
constexpr Column left(std::size_t width) { return {Align::Left, width, 0}; }
constexpr Column right(std::size_t width) { return {Align::Right, width, 0}; }

// Rows of cells -> one line per row as printf prints fixed fields: each cell padded to its
// column's width (a longer cell pushes the rest of its row, its column keeps its width), columns
// `gap` spaces apart, nothing trimmed. Cells beyond `columns` are right-aligned, unpadded.
std::string fixed_width_table(const std::vector<std::vector<std::string>>& rows,
                              const std::vector<Column>& columns, std::size_t gap = 1);

// A rate as a percentage with `digits` decimals ("12.34%"). The bubble rates are differences of
// sums: a tiny negative one is rounding, not a gain, and prints as 0.
std::string percent(double rate, int digits = 2);

}  // namespace braid::util
