// CSV text from one list of columns: a writer names each column once, with its cell, so the
// header and the values cannot drift apart (a column in one and not the other). Internal
// (src/util/, usable by every module); it knows no braid type, only strings.
#pragma once

#include <string>
#include <vector>

namespace braid::util {

// A cell quoted when it holds a comma, a quote or a newline (RFC 4180).
inline std::string csv_quoted(const std::string& cell) {
  if (cell.find_first_of(",\"\n") == std::string::npos) return cell;
  std::string out = "\"";
  for (char ch : cell) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

// The CSV of `rows`: `columns(row, column)` calls column(name, cell) for every column of a row,
// in order. The header is the names of `sample`'s columns (any row: only the names are read), so
// it is written even when there are no rows. Cells are written as given (quote them with
// csv_quoted where they may need it).
template <typename Row, typename Columns>
std::string csv_text(const Row& sample, const std::vector<Row>& rows, Columns&& columns) {
  std::string out;
  auto line = [&](const Row& row, bool header) {
    bool first = true;
    columns(row, [&](const char* name, const std::string& cell) {
      if (!first) out += ',';
      first = false;
      out += header ? std::string(name) : cell;
    });
    out += '\n';
  };
  line(sample, true);
  for (const Row& row : rows) line(row, false);
  return out;
}

}  // namespace braid::util
