// PyTorch torch.distributed.pipelining compute-only CSV: export and import.
// One row per rank (row index = rank), one action per cell: `{stage}F{mb}`, `{stage}I{mb}` (input
// gradient, W deferred), `{stage}W{mb}`, `{stage}B{mb}` (full backward), `({a};{b})OVERLAP_F_B`,
// with global stage indices. Import replicates PyTorch's action regex and the rules of its
// _validate_schedule, reports them the way PyTorch words them (plus file, row and column), and is
// stricter where PyTorch is silent (see docs/schedules.md).
#include <algorithm>
#include <cstring>
#include <istream>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "../util/input_file.hpp"
#include "braid/error.hpp"
#include "braid/schedule.hpp"

namespace braid {

namespace {

std::string action(int stage, char type, int mb) {
  return std::to_string(stage) + type + std::to_string(mb);
}

}  // namespace

void write_pytorch_csv(const Schedule& s, std::ostream& out) {
  for (const RankProgram& rank : s.ranks) {
    std::vector<std::string> cells;
    auto stage = [&](const Pass& p) { return s.virtual_stage(rank.rank, p.chunk); };
    auto backward = [&](const Pass& p) { return action(stage(p), p.defer_w ? 'I' : 'B', p.mb); };
    for (const Instruction& in : rank.instructions) {
      switch (in.op) {
        case InstructionKind::F:
          cells.push_back(action(stage(in.a), 'F', in.a.mb));
          break;
        case InstructionKind::B:
          cells.push_back(backward(in.a));
          break;
        case InstructionKind::W:
          cells.push_back(action(stage(in.a), 'W', in.a.mb));
          break;
        case InstructionKind::FB: {
          std::string cell(1, '(');
          cell += action(stage(in.a), 'F', in.a.mb);
          cell += ';';
          cell += backward(in.b);
          cell += ")OVERLAP_F_B";
          cells.push_back(std::move(cell));
          break;
        }
        // PyTorch has no overlap action for F+W or F+F: two consecutive cells.
        case InstructionKind::FW:
          cells.push_back(action(stage(in.a), 'F', in.a.mb));
          cells.push_back(action(stage(in.b), 'W', in.b.mb));
          break;
        case InstructionKind::FF:
          cells.push_back(action(stage(in.a), 'F', in.a.mb));
          cells.push_back(action(stage(in.b), 'F', in.b.mb));
          break;
        case InstructionKind::Offload:  // memory actions are not compute: not exported
        case InstructionKind::Reload:
          break;
      }
    }
    for (size_t i = 0; i < cells.size(); ++i) out << (i ? "," : "") << cells[i];
    out << "\n";
  }
}

namespace {

struct Action {
  int stage = 0;
  char type = 'F';  // F, I, W, B
  int mb = 0;
};

struct Cell {
  int row = 0;     // 0-based rank
  int column = 0;  // 0-based step
  std::string text;
  std::vector<Action> actions;  // 1 action, or the 2 sub-actions of OVERLAP_F_B
};

// Splits one CSV record the way Python's csv.reader does for the files PyTorch writes: commas
// separate cells, double quotes may enclose a cell ("" is a quote inside one).
std::vector<std::string> split_record(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cells.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cells.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.emplace_back();
    } else {
      cells.back() += c;
    }
  }
  return cells;
}

std::string strip(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n\f\v");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n\f\v");
  return s.substr(b, e - b + 1);
}

struct Reader {
  const std::string& file;

  std::string cell_name(int row, int column) const {
    return "row " + std::to_string(row + 1) + " (rank " + std::to_string(row) + "), column " +
           std::to_string(column + 1);
  }
  // A cell's text in quotes as a message shows it: a 30,000-character token by its start and
  // length, not in full.
  static std::string quoted(const std::string& text) {
    constexpr std::size_t kShown = 40;
    if (text.size() <= kShown) return "'" + text + "'";
    return "'" + text.substr(0, kShown) + "...' (" + std::to_string(text.size()) + " characters)";
  }

  // Every message about a cell goes through here, and most quote the cell's text.
  [[noreturn]] void fail(int row, int column, const std::string& problem) const {
    throw InputError(file, cell_name(row, column), util::escape_control_bytes(problem));
  }

  // PyTorch's _action_regex, (\d+)(F|I|B|W|UNSHARD|...)(\d*), applied to the whole (stripped)
  // text by a hand-written scanner: std::regex's recursive executor overflowed the stack on a
  // 30,000-character token (a crash, not a message). No type name is a prefix of another that a
  // digit could follow, so the first name that matches is the only one.
  Action parse_single(int row, int column, const std::string& whole,
                      const std::string& text) const {
    static const char* const kTypes[] = {"F",       "I",       "B",           "W",
                                         "UNSHARD", "RESHARD", "REDUCE_GRAD", "SEND_F",
                                         "RECV_F",  "SEND_B",  "RECV_B"};
    auto digits_from = [&](std::size_t i) {
      while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
      return i;
    };
    const std::size_t stage_end = digits_from(0);
    std::string type;
    if (stage_end > 0)
      for (const char* name : kTypes)
        if (text.compare(stage_end, std::strlen(name), name) == 0) {
          type = name;
          break;
        }
    const std::size_t mb_begin = stage_end + type.size();
    if (type.empty() || digits_from(mb_begin) != text.size())
      fail(row, column,
           "cannot parse " + quoted(whole) +
               ": expected {stage}{F|I|W|B}{microbatch} (e.g. 2F0) or ({a};{b})OVERLAP_F_B");
    const std::string stage = text.substr(0, stage_end), mb = text.substr(mb_begin);
    if (type.size() != 1)
      fail(row, column,
           quoted(whole) + " is a " + type +
               " action; a compute-only schedule allows only F, I, W, B and OVERLAP_F_B");
    if (mb.empty())
      fail(row, column,
           quoted(whole) + " has no microbatch index (expected e.g. " + stage + type + "0)");
    Action a;
    try {
      a.stage = std::stoi(stage);
      a.mb = std::stoi(mb);
    } catch (const std::exception&) {
      fail(row, column, quoted(whole) + ": stage or microbatch index out of range");
    }
    a.type = type[0];
    return a;
  }

  Cell parse_cell(int row, int column, const std::string& raw) const {
    Cell cell{row, column, strip(raw), {}};
    const std::string& t = cell.text;
    if (t.empty()) return cell;  // PyTorch: None, an idle step
    if (t.front() == '(' && t.find(')') != std::string::npos) {
      size_t close = t.find(')');
      std::string type = t.substr(close + 1);
      if (type != "OVERLAP_F_B")
        fail(row, column,
             "cannot parse " + quoted(t) + ": a parenthesised cell must be ({a};{b})OVERLAP_F_B");
      std::string inner = t.substr(1, close - 1);
      size_t start = 0;
      while (start <= inner.size()) {
        size_t semi = inner.find(';', start);
        std::string part = strip(
            inner.substr(start, semi == std::string::npos ? std::string::npos : semi - start));
        if (!part.empty()) cell.actions.push_back(parse_single(row, column, t, part));
        if (semi == std::string::npos) break;
        start = semi + 1;
      }
      if (cell.actions.size() != 2)
        fail(row, column, quoted(t) + ": OVERLAP_F_B must hold exactly two actions");
      return cell;
    }
    cell.actions.push_back(parse_single(row, column, t, t));
    return cell;
  }
};

using Rows = std::vector<std::vector<Cell>>;

// The file's records, one row per rank (a blank line is a row without cells), each cell parsed.
Rows read_rows(const Reader& reader, std::istream& in) {
  Rows rows;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const int row = static_cast<int>(rows.size());
    std::vector<Cell> cells;
    if (!line.empty()) {
      auto raw = split_record(line);
      for (size_t c = 0; c < raw.size(); ++c)
        cells.push_back(reader.parse_cell(row, static_cast<int>(c), raw[c]));
    }
    rows.push_back(std::move(cells));
  }
  return rows;
}

void check_rows_have_actions(const std::string& file, const Rows& rows) {
  if (rows.empty())
    throw InputError(file, "file", "is empty; expected one row of actions per rank");
  for (size_t r = 0; r < rows.size(); ++r) {
    bool any = false;
    for (const Cell& cell : rows[r]) any = any || !cell.actions.empty();
    if (!any)
      throw InputError(file, "row " + std::to_string(r + 1) + " (rank " + std::to_string(r) + ")",
                       "has no actions; every row is a rank and needs its stages' actions (a "
                       "blank line counts as a row)");
  }
}

// Every stage and every microbatch has at least one action of its own (its F), so an index at
// or above the number of actions names a stage or microbatch that cannot be complete; refusing
// it here also keeps a typo such as 2F99999999 from sizing the tables below.
void check_indices_bounded(const Reader& reader, const Rows& rows) {
  long long actions = 0;
  for (const auto& cells : rows)
    for (const Cell& cell : cells) actions += static_cast<long long>(cell.actions.size());
  for (size_t r = 0; r < rows.size(); ++r)
    for (const Cell& cell : rows[r])
      for (const Action& a : cell.actions)
        if (a.stage >= actions || a.mb >= actions)
          reader.fail(static_cast<int>(r), cell.column,
                      Reader::quoted(cell.text) + ": stage " + std::to_string(a.stage) +
                          " or microbatch " + std::to_string(a.mb) + " is not below the " +
                          std::to_string(actions) +
                          " actions of the file, so it cannot have all its passes");
}

// Per stage: its rank and the microbatches of each action type it runs.
struct StageTable {
  std::vector<int> rank_of;
  std::vector<std::map<char, std::set<int>>> seen;
  int stages() const { return static_cast<int>(rank_of.size()); }
};

// PyTorch _validate_schedule's order rules, rank by rank, step by step.
StageTable check_pytorch_order(const Reader& reader, const Rows& rows) {
  int stages = 0;
  for (const auto& cells : rows)
    for (const Cell& cell : cells)
      for (const Action& a : cell.actions) stages = std::max(stages, a.stage + 1);
  StageTable table{std::vector<int>(static_cast<size_t>(stages), -1),
                   std::vector<std::map<char, std::set<int>>>(static_cast<size_t>(stages))};
  auto rule = [](const char* what, const Action& a, const char* needs) {
    return std::string("Running ") + what + " for stage " + std::to_string(a.stage) +
           ", microbatch " + std::to_string(a.mb) + " without first running " + needs +
           " (PyTorch _validate_schedule)";
  };
  for (int r = 0; r < static_cast<int>(rows.size()); ++r)
    for (const Cell& cell : rows[r])
      for (const Action& a : cell.actions) {
        auto& st = table.seen[a.stage];
        if (st[a.type].count(a.mb))
          reader.fail(r, cell.column,
                      Reader::quoted(cell.text) + " repeats " + std::string(1, a.type) +
                          " of stage " + std::to_string(a.stage) + ", microbatch " +
                          std::to_string(a.mb));
        if (a.type == 'B' && !st['F'].count(a.mb))
          reader.fail(r, cell.column, rule("Full Backward", a, "Forward"));
        if (a.type == 'I' && !st['F'].count(a.mb))
          reader.fail(r, cell.column, rule("Backward Input", a, "Forward"));
        if (a.type == 'W' && !st['I'].count(a.mb))
          reader.fail(r, cell.column, rule("Backward Weight", a, "Backward Input"));
        if ((a.type == 'B' && st['I'].count(a.mb)) || (a.type == 'I' && st['B'].count(a.mb)))
          reader.fail(r, cell.column,
                      Reader::quoted(cell.text) + ": stage " + std::to_string(a.stage) +
                          ", microbatch " + std::to_string(a.mb) +
                          " has both a full backward B and an input backward I");
        st[a.type].insert(a.mb);
        int& rank = table.rank_of[a.stage];
        if (rank < 0) {
          rank = r;
        } else if (rank != r) {
          reader.fail(r, cell.column,
                      "Stage " + std::to_string(a.stage) + " is assigned to both rank " +
                          std::to_string(r) + " and rank " + std::to_string(rank) +
                          " (PyTorch _validate_schedule)");
        }
      }
  return table;
}

// PyTorch _validate_schedule's count rules: every stage runs m forwards and m backwards.
void check_pytorch_counts(const std::string& file, StageTable& table, int m) {
  for (int st = 0; st < table.stages(); ++st) {
    auto& c = table.seen[st];
    const std::string stage = "stage " + std::to_string(st);
    auto count = [&](char t) { return static_cast<int>(c[t].size()); };
    if (count('F') != m)
      throw InputError(file, stage,
                       "Got " + std::to_string(count('F')) + " F microbatches for stage " +
                           std::to_string(st) + ", expected " + std::to_string(m) +
                           " (PyTorch _validate_schedule)");
    if (count('I') != count('W'))
      throw InputError(
          file, stage,
          "Invalid backward microbatches for stage " + std::to_string(st) +
              ": I and W must have equal counts, but got I=" + std::to_string(count('I')) +
              ", W=" + std::to_string(count('W')) + " (PyTorch _validate_schedule)");
    if (count('B') + count('I') != m)
      throw InputError(file, stage,
                       "Invalid backward microbatches for stage " + std::to_string(st) +
                           ": expected " + std::to_string(m) + " total backwards, but got B=" +
                           std::to_string(count('B')) + ", I=" + std::to_string(count('I')) +
                           ", W=" + std::to_string(count('W')) + " (PyTorch _validate_schedule)");
    for (char t : {'F', 'B', 'I', 'W'})
      for (int mb : c[t])
        if (mb >= m)
          throw InputError(
              file, stage,
              "microbatch " + std::to_string(mb) + " is out of range 0.." + std::to_string(m - 1));
  }
}

// braid models the loop and the V placement; which one the CSV's stage-to-rank mapping is.
Placement infer_placement(const std::string& file, const StageTable& table, int p, int vpp) {
  const int stages = table.stages();
  bool loop = true, vee = vpp == 2;
  for (int st = 0; st < stages; ++st) {
    loop = loop && table.rank_of[st] == st % p;
    vee = vee && table.rank_of[st] == (st < p ? st : 2 * p - 1 - st);
  }
  if (!loop && !vee)
    throw InputError(file, "stages",
                     "stage-to-rank mapping is neither the loop placement (stage s on rank s mod " +
                         std::to_string(p) + ") nor the V placement (stages r and " +
                         std::to_string(2 * p - 1) + "-r on rank r); braid models only these");
  return loop ? Placement::Loop : Placement::V;
}

// One row's cells as rank r's instructions (idle steps dropped).
RankProgram rank_program(const Reader& reader, const Schedule& s, int r,
                         const std::vector<Cell>& cells) {
  RankProgram prog;
  prog.rank = r;
  for (const Cell& cell : cells) {
    if (cell.actions.empty()) continue;
    auto pass = [&](const Action& a) { return Pass{s.chunk_of(a.stage), a.mb, a.type == 'I'}; };
    if (cell.actions.size() == 1) {
      const Action& a = cell.actions[0];
      InstructionKind op = a.type == 'F'   ? InstructionKind::F
                           : a.type == 'W' ? InstructionKind::W
                                           : InstructionKind::B;
      prog.instructions.push_back({op, pass(a), {}});
      continue;
    }
    const Action& x = cell.actions[0];
    const Action& y = cell.actions[1];
    auto is_b = [](const Action& a) { return a.type == 'B' || a.type == 'I'; };
    if (x.type == 'F' && is_b(y)) {
      prog.instructions.push_back({InstructionKind::FB, pass(x), pass(y)});
    } else if (is_b(x) && y.type == 'F') {
      prog.instructions.push_back({InstructionKind::FB, pass(y), pass(x)});
    } else if (x.type == 'F' && y.type == 'W') {
      prog.instructions.push_back({InstructionKind::FW, pass(x), pass(y)});
    } else if (x.type == 'W' && y.type == 'F') {
      prog.instructions.push_back({InstructionKind::FW, pass(y), pass(x)});
    } else if (x.type == 'F' && y.type == 'F') {
      prog.instructions.push_back({InstructionKind::FF, pass(x), pass(y)});
    } else {
      reader.fail(r, cell.column,
                  Reader::quoted(cell.text) +
                      ": braid models an overlapped pair only as a forward with "
                      "a backward (B or I), a W or another forward");
    }
  }
  return prog;
}

}  // namespace

Schedule read_pytorch_csv(std::istream& in, const std::string& file, int microbatches) {
  const Reader reader{file};
  const Rows rows = read_rows(reader, in);
  check_rows_have_actions(file, rows);
  check_indices_bounded(reader, rows);
  StageTable table = check_pytorch_order(reader, rows);
  const int stages = table.stages();
  const int m = microbatches > 0 ? microbatches
                                 : (stages > 0 ? static_cast<int>(table.seen[0]['F'].size()) : 0);
  check_pytorch_counts(file, table, m);

  const int p = static_cast<int>(rows.size());
  if (m < 1) throw InputError(file, "stage 0", "has no forward actions");
  if (stages % p != 0)
    throw InputError(file, "stages",
                     std::to_string(stages) + " stages cannot be spread evenly over " +
                         std::to_string(p) + " ranks (rows)");
  Schedule s;
  s.name = file;
  s.pp = p;
  s.vpp = stages / p;
  s.microbatches = m;
  s.placement = infer_placement(file, table, p, s.vpp);
  for (int r = 0; r < p; ++r) s.ranks.push_back(rank_program(reader, s, r, rows[r]));
  ValidationResult check = validate(s);
  if (!check.ok()) throw InputError(file, "schedule", check.error);
  return s;
}

}  // namespace braid
