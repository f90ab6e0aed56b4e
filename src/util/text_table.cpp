#include "text_table.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace braid::util {

std::string text_table(const std::vector<std::vector<std::string>>& rows, Align rest) {
  std::vector<std::size_t> width;
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (c) line += "  ";
      const std::string fill(width[c] - row[c].size(), ' ');
      line += c == 0 || rest == Align::Left ? row[c] + fill : fill + row[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string percent(double rate, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%%", digits, std::max(rate, 0.0) * 100);
  return buf;
}

}  // namespace braid::util
