// The words of a launch script's commands, as bash would pass them (shell_words.hpp).
#include "shell_words.hpp"

#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "braid/error.hpp"

namespace braid::detail {

namespace {

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// A word as read: its text, and whether an unquoted expansion in it may split it into several.
struct Piece {
  std::vector<std::string> words;  // one element unless an unquoted expansion split it
  bool any = false;                // something was read (an empty "" is still a word)
};

class Reader {
 public:
  Reader(const std::string& text, std::string where) : s_(text), where_(std::move(where)) {}

  ShellScript run() {
    ShellScript out;
    std::vector<std::string> statement;
    while (!stopped_) {
      skip_blanks();
      const bool condition = !statement.empty() && (statement[0] == "if" || statement[0] == "elif");
      if (condition && ((peek() == '|' && peek(1) == '|') || (peek() == '&' && peek(1) == '&'))) {
        statement.push_back(std::string(2, peek()));  // || and && inside an if's condition
        pos_ += 2;
        continue;
      }
      if (at_end() || peek() == '\n' || peek() == ';' || peek() == '&' || peek() == '|') {
        finish(statement, out);
        if (at_end()) break;
        ++pos_;
        continue;
      }
      if (peek() == '#') {  // a comment runs to the end of the line
        while (!at_end() && peek() != '\n') ++pos_;
        continue;
      }
      // NAME=( ... ) and NAME+=( ... ): a bash array, its words up to the closing parenthesis.
      if (statement.empty() || is_assignment_prefix(statement)) {
        bool append = false;
        if (std::string name; array_start(name, append)) {
          std::vector<std::string> words = array_words();
          if (active()) {
            std::vector<std::string>& array = arrays_[name];
            if (!append) array.clear();
            array.insert(array.end(), words.begin(), words.end());
          }
          continue;
        }
      }
      Piece p = word();
      if (!p.any) {
        ++pos_;  // a character no word starts with ('(', ')', '<', '>'): skipped
        continue;
      }
      for (std::string& w : p.words) statement.push_back(std::move(w));
      // then, else, fi (and do, done) stand alone: what follows on the line is a new statement.
      if (statement.size() == 1 &&
          (statement[0] == "then" || statement[0] == "else" || statement[0] == "fi" ||
           statement[0] == "do" || statement[0] == "done"))
        finish(statement, out);
    }
    return out;
  }

 private:
  bool at_end() const { return pos_ >= s_.size(); }
  char peek(std::size_t ahead = 0) const {
    return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0';
  }

  void skip_blanks() {
    while (!at_end()) {
      if (peek() == ' ' || peek() == '\t' || peek() == '\r') {
        ++pos_;
      } else if (peek() == '\\' && peek(1) == '\n') {  // a continuation line
        pos_ += 2;
      } else {
        break;
      }
    }
  }

  static bool is_assignment(const std::string& w) {
    const std::size_t eq = w.find('=');
    if (eq == std::string::npos || eq == 0 || w[0] == '-') return false;
    for (std::size_t i = 0; i < eq; ++i)
      if (!is_name_char(w[i]) || (i == 0 && std::isdigit(static_cast<unsigned char>(w[i])) != 0))
        return false;
    return true;
  }
  static bool is_assignment_prefix(const std::vector<std::string>& statement) {
    return statement.size() == 1 && (statement[0] == "export" || statement[0] == "local" ||
                                     statement[0] == "declare" || statement[0] == "readonly");
  }

  // if / elif / else / fi: which statements run. Conditions of [ ] and [[ ]] with =, ==, !=,
  // -z, -n are evaluated; a file test (-f, -d, -e) is taken as true (the script is meant to
  // run where its files are).
  struct Branch {
    bool parent_active = true;
    bool taken = false;
    bool active = false;
  };
  bool active() const { return branches_.empty() || branches_.back().active; }

  static bool test(const std::vector<std::string>& t) {
    if (t.size() == 3 && (t[1] == "=" || t[1] == "==")) return t[0] == t[2];
    if (t.size() == 3 && t[1] == "!=") return t[0] != t[2];
    if (t.size() == 2 && t[0] == "-z") return t[1].empty();
    if (t.size() == 2 && t[0] == "-n") return !t[1].empty();
    if (t.size() == 1 && t[0] == "-z") return true;  // [[ -z $UNSET ]]: the word vanished
    if (t.size() == 1) return !t[0].empty();
    return true;  // file tests and anything else: taken as true
  }
  static bool condition(const std::vector<std::string>& words) {
    bool result = true;
    std::string op = "&&";
    std::size_t i = 1;  // after if / elif
    while (i < words.size()) {
      bool negate = false;
      if (words[i] == "!") {
        negate = true;
        ++i;
      }
      std::vector<std::string> t;
      const bool bracket = i < words.size() && (words[i] == "[[" || words[i] == "[");
      if (bracket) ++i;
      while (i < words.size() && words[i] != "]]" && words[i] != "]" && words[i] != "||" &&
             words[i] != "&&")
        t.push_back(words[i++]);
      if (i < words.size() && (words[i] == "]]" || words[i] == "]")) ++i;
      bool value = bracket ? test(t) : true;  // a command's status is not known: true
      if (!t.empty() && t[0] == "!" && bracket) value = !test({t.begin() + 1, t.end()});
      if (negate) value = !value;
      result = op == "&&" ? (result && value) : (result || value);
      if (i < words.size()) op = words[i++];
    }
    return result;
  }

  // Handles a control word; true when the statement was one.
  bool control(const std::vector<std::string>& statement) {
    const std::string& w = statement[0];
    if (w == "if") {
      const bool parent = active();
      const bool value = parent && condition(statement);
      branches_.push_back({parent, value, value});
    } else if (w == "elif" && !branches_.empty()) {
      Branch& b = branches_.back();
      b.active = b.parent_active && !b.taken && condition(statement);
      b.taken = b.taken || b.active;
    } else if (w == "else" && !branches_.empty()) {
      Branch& b = branches_.back();
      b.active = b.parent_active && !b.taken;
      b.taken = true;
    } else if (w == "fi" && !branches_.empty()) {
      branches_.pop_back();
    } else {
      return w == "then" || w == "do" || w == "done";
    }
    return true;
  }

  // A statement is either assignments (NAME=value ..., export NAME=value) or a command.
  void finish(std::vector<std::string>& statement, ShellScript& out) {
    if (!statement.empty() && control(statement)) {
      statement.clear();
      return;
    }
    if (!active()) {
      statement.clear();
      return;
    }
    if (!statement.empty() && statement[0] == "exit") {
      stopped_ = true;
      statement.clear();
      return;
    }
    std::size_t first = 0;
    if (!statement.empty() && (statement[0] == "export" || statement[0] == "local" ||
                               statement[0] == "declare" || statement[0] == "readonly"))
      first = 1;
    bool assigned = false;
    while (first < statement.size() && is_assignment(statement[first])) {
      const std::size_t eq = statement[first].find('=');
      vars_[statement[first].substr(0, eq)] = statement[first].substr(eq + 1);
      assigned = true;
      ++first;
    }
    if (first < statement.size() && !(assigned && first == statement.size())) {
      out.commands.emplace_back(statement.begin() + static_cast<std::ptrdiff_t>(first),
                                statement.end());
    }
    statement.clear();
  }

  bool array_start(std::string& name, bool& append) {
    std::size_t i = pos_;
    while (i < s_.size() && is_name_char(s_[i])) ++i;
    if (i == pos_) return false;
    std::size_t j = i;
    append = j < s_.size() && s_[j] == '+';
    if (append) ++j;
    if (j + 1 >= s_.size() || s_[j] != '=' || s_[j + 1] != '(') return false;
    name = s_.substr(pos_, i - pos_);
    pos_ = j + 2;
    return true;
  }

  std::vector<std::string> array_words() {
    std::vector<std::string> words;
    while (true) {
      while (!at_end() && (std::isspace(static_cast<unsigned char>(peek())) != 0 ||
                           (peek() == '\\' && peek(1) == '\n')))
        pos_ += peek() == '\\' ? 2 : 1;
      if (at_end()) throw InputError(where_, "", "an array NAME=( is not closed by )");
      if (peek() == ')') {
        ++pos_;
        return words;
      }
      if (peek() == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
        continue;
      }
      Piece p = word();
      if (!p.any) {
        ++pos_;
        continue;
      }
      for (std::string& w : p.words) words.push_back(std::move(w));
    }
  }

  // One word: unquoted text, '...', "...", and $ expansions; stops at a blank or an operator.
  Piece word() {
    Piece p;
    p.words.emplace_back();
    word_start_ = pos_;
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';' || c == '&' || c == '|' ||
          c == '(' || c == ')' || c == '<' || c == '>')
        break;
      if (c == '\\' && peek(1) == '\n') break;  // a continuation ends the word
      p.any = true;
      if (c == '\'') {
        const std::size_t close = s_.find('\'', pos_ + 1);
        if (close == std::string::npos) throw InputError(where_, "", "a ' quote is not closed");
        p.words.back() += s_.substr(pos_ + 1, close - pos_ - 1);
        pos_ = close + 1;
      } else if (c == '"') {
        ++pos_;
        while (!at_end() && peek() != '"') {
          if (peek() == '\\' && pos_ + 1 < s_.size()) {
            p.words.back() += s_[pos_ + 1];
            pos_ += 2;
          } else if (peek() == '$') {
            // Not split on blanks; "${A[@]}" still gives one word per element, as in bash.
            const std::vector<std::string> parts = expansion();
            for (std::size_t i = 0; i < parts.size(); ++i) {
              if (i > 0) p.words.emplace_back();
              p.words.back() += parts[i];
            }
          } else {
            p.words.back() += s_[pos_++];
          }
        }
        if (at_end()) throw InputError(where_, "", "a \" quote is not closed");
        ++pos_;
      } else if (c == '\\') {
        if (pos_ + 1 < s_.size()) p.words.back() += s_[pos_ + 1];
        pos_ += 2;
      } else if (c == '$') {
        // Unquoted: the value splits on blanks, an array into its elements.
        const std::vector<std::string> parts = expansion();
        std::vector<std::string> split;
        for (const std::string& part : parts) {
          std::string current;
          for (const char ch : part) {
            if (ch == ' ' || ch == '\t' || ch == '\n') {
              if (!current.empty()) split.push_back(current);
              current.clear();
            } else {
              current += ch;
            }
          }
          if (!current.empty()) split.push_back(current);
        }
        if (!split.empty()) {
          p.words.back() += split.front();
          for (std::size_t i = 1; i < split.size(); ++i) p.words.push_back(split[i]);
        }
      } else {
        p.words.back() += s_[pos_++];
      }
    }
    // An unquoted expansion to nothing is no word at all (bash drops it).
    if (p.words.size() == 1 && p.words.front().empty() && p.any && !quoted_at_least_once())
      p.words.clear();
    return p;
  }

  // Whether the word just read held a quote (an empty "" is a word, an empty $X is not).
  bool quoted_at_least_once() const {
    for (std::size_t i = word_start_; i < pos_ && i < s_.size(); ++i)
      if (s_[i] == '"' || s_[i] == '\'') return true;
    return false;
  }

  // $NAME, ${NAME}, ${NAME:-default}, ${NAME[@]}, $((arithmetic)), $(command), $1: each part of
  // an array is one element of the result.
  std::vector<std::string> expansion() {
    ++pos_;  // '$'
    if (peek() == '(' && peek(1) == '(') {
      const std::size_t close = s_.find("))", pos_);
      if (close == std::string::npos) throw InputError(where_, "", "a $(( is not closed by ))");
      const std::string expr = s_.substr(pos_ + 2, close - pos_ - 2);
      pos_ = close + 2;
      return {std::to_string(arithmetic(expr))};
    }
    if (peek() == '(') {  // command substitution: not run; expands to nothing
      int depth = 0;
      while (!at_end()) {
        if (peek() == '(') ++depth;
        if (peek() == ')' && --depth == 0) break;
        ++pos_;
      }
      ++pos_;
      return {};
    }
    if (peek() == '{') {
      const std::size_t close = s_.find('}', pos_);
      if (close == std::string::npos) throw InputError(where_, "", "a ${ is not closed by }");
      std::string inner = s_.substr(pos_ + 1, close - pos_ - 1);
      pos_ = close + 1;
      std::string fallback;
      if (const std::size_t dash = inner.find(":-"); dash != std::string::npos) {
        fallback = inner.substr(dash + 2);
        inner = inner.substr(0, dash);
        // The default is a word of its own: its quotes go ("${1:-"MOCK"}" is MOCK).
        if (fallback.size() >= 2 && (fallback.front() == '"' || fallback.front() == '\'') &&
            fallback.back() == fallback.front())
          fallback = fallback.substr(1, fallback.size() - 2);
      }
      if (inner.size() > 3 && inner.compare(inner.size() - 3, 3, "[@]") == 0) {
        const auto a = arrays_.find(inner.substr(0, inner.size() - 3));
        return a != arrays_.end() ? a->second : std::vector<std::string>{};
      }
      return {value_of(inner, fallback)};
    }
    std::size_t end = pos_;
    if (end < s_.size() && std::isdigit(static_cast<unsigned char>(s_[end])) != 0) {
      ++end;  // $1: a script argument, not given here
    } else {
      while (end < s_.size() && is_name_char(s_[end])) ++end;
    }
    if (end == pos_) return {"$"};
    const std::string name = s_.substr(pos_, end - pos_);
    pos_ = end;
    return {value_of(name, "")};
  }

  std::string value_of(const std::string& name, const std::string& fallback) const {
    if (const auto v = vars_.find(name); v != vars_.end() && !v->second.empty()) return v->second;
    if (const auto a = arrays_.find(name); a != arrays_.end() && !a->second.empty())
      return a->second.front();
    return fallback;
  }

  // Integer arithmetic of $((...)): + - * / % and parentheses over numbers and variables.
  long long arithmetic(const std::string& expr) const {
    std::size_t i = 0;
    return sum(expr, i);
  }
  long long sum(const std::string& e, std::size_t& i) const {
    long long v = product(e, i);
    while (true) {
      skip(e, i);
      if (i < e.size() && (e[i] == '+' || e[i] == '-')) {
        const char op = e[i++];
        const long long r = product(e, i);
        v = op == '+' ? v + r : v - r;
      } else {
        return v;
      }
    }
  }
  long long product(const std::string& e, std::size_t& i) const {
    long long v = atom(e, i);
    while (true) {
      skip(e, i);
      if (i < e.size() && (e[i] == '*' || e[i] == '/' || e[i] == '%')) {
        const char op = e[i++];
        const long long r = atom(e, i);
        if (op != '*' && r == 0) throw InputError(where_, "", "division by zero in $((" + e + "))");
        v = op == '*' ? v * r : op == '/' ? v / r : v % r;
      } else {
        return v;
      }
    }
  }
  long long atom(const std::string& e, std::size_t& i) const {
    skip(e, i);
    if (i < e.size() && e[i] == '(') {
      ++i;
      const long long v = sum(e, i);
      skip(e, i);
      if (i < e.size() && e[i] == ')') ++i;
      return v;
    }
    if (i < e.size() && e[i] == '-') {
      ++i;
      return -atom(e, i);
    }
    if (i < e.size() && e[i] == '$') ++i;
    std::size_t end = i;
    if (end < e.size() && e[end] == '{') ++i, ++end;
    while (end < e.size() && is_name_char(e[end])) ++end;
    const std::string token = e.substr(i, end - i);
    i = end;
    if (i < e.size() && e[i] == '}') ++i;
    if (token.empty()) throw InputError(where_, "", "cannot evaluate $((" + e + "))");
    const std::string text =
        std::isdigit(static_cast<unsigned char>(token[0])) != 0 ? token : value_of(token, "0");
    try {
      return std::stoll(text);
    } catch (const std::exception&) {
      throw InputError(where_, "", "cannot evaluate $((" + e + ")): " + token + " is not a number");
    }
  }
  static void skip(const std::string& e, std::size_t& i) {
    while (i < e.size() && std::isspace(static_cast<unsigned char>(e[i])) != 0) ++i;
  }

  const std::string& s_;
  std::string where_;
  std::size_t pos_ = 0;
  std::size_t word_start_ = 0;
  bool stopped_ = false;  // an `exit` ran
  std::vector<Branch> branches_;
  std::map<std::string, std::string> vars_;
  std::map<std::string, std::vector<std::string>> arrays_;
};

}  // namespace

ShellScript shell_commands(const std::string& text, const std::string& where) {
  return Reader(text, where).run();
}

}  // namespace braid::detail
