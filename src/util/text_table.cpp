#include "text_table.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "format.hpp"

namespace braid::util {

namespace {

// `cell` padded to `width` on the side its alignment leaves free.
void append_cell(std::string& line, const std::string& cell, const Column& column) {
  const std::string fill(column.width > cell.size() ? column.width - cell.size() : 0, ' ');
  line += column.align == Align::Left ? cell + fill : fill + cell;
}

}  // namespace

std::string text_table(const std::vector<std::vector<std::string>>& rows, Align rest) {
  std::vector<Column> columns;
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (columns.size() <= c) columns.push_back({c == 0 ? Align::Left : rest, 0, 0});
      columns[c].width = std::max(columns[c].width, row[c].size());
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (c) line += "  ";
      append_cell(line, row[c], columns[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string fixed_width_table(const std::vector<std::vector<std::string>>& rows,
                              const std::vector<Column>& columns, std::size_t gap) {
  std::string out;
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      const Column column = c < columns.size() ? columns[c] : Column{};
      if (c) out.append(gap + column.extra_gap, ' ');
      append_cell(out, row[c], column);
    }
    out += "\n";
  }
  return out;
}

std::string percent(double rate, int digits) {
  return format("%.*f%%", digits, std::max(rate, 0.0) * 100);
}

}  // namespace braid::util
