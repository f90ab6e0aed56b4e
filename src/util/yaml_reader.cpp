#include "yaml_reader.hpp"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include <yaml-cpp/depthguard.h>

#include "braid/error.hpp"
#include "input_file.hpp"

namespace braid::detail {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

namespace {

// The place of a mark as the message's field: "line 3, column 7".
std::string place(const YAML::Mark& mark) {
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1);
}

// The end of the quoted scalar that opens at text[open], or npos when its closing quote is missing.
// Inside double quotes a backslash escapes the next character; inside single quotes '' is a quote.
std::size_t closing_quote(const std::string& text, std::size_t open) {
  const char quote = text[open];
  for (std::size_t i = open + 1; i < text.size(); ++i) {
    if (quote == '"' && text[i] == '\\') {
      ++i;
    } else if (text[i] == quote) {
      if (quote == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
        ++i;
        continue;
      }
      return i;
    }
  }
  return std::string::npos;
}

// yaml-cpp accepts a quoted value left open at the end of the file when a line break follows the
// quote: `model: "qwen2-7b` then swallows the rest of the file, and the loader's complaint was a
// missing field. Every quoted scalar is checked for its closing quote; `visited` keeps an alias
// from being walked twice (a billion laughs stays linear).
void check_quotes_closed(const YAML::Node& node, const std::string& text,
                         const std::filesystem::path& file, std::vector<bool>& visited) {
  const YAML::Mark mark = node.Mark();
  if (mark.pos >= 0 && static_cast<std::size_t>(mark.pos) < visited.size()) {
    if (visited[mark.pos]) return;
    visited[mark.pos] = true;
  }
  if (node.IsScalar()) {
    const auto at = static_cast<std::size_t>(mark.pos);
    if (mark.pos >= 0 && at < text.size() && (text[at] == '"' || text[at] == '\'') &&
        closing_quote(text, at) == std::string::npos)
      throw InputError(file.string(), place(mark),
                       std::string("YAML syntax error: the quoted value is not closed (no ") +
                           text[at] + " before the end of the file)");
  } else if (node.IsMap()) {
    for (const auto& pair : node) {
      check_quotes_closed(pair.first, text, file, visited);
      check_quotes_closed(pair.second, text, file, visited);
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) check_quotes_closed(item, text, file, visited);
  }
}

}  // namespace

YAML::Node load_yaml_file(const std::filesystem::path& file) {
  const std::string text = util::read_input_file(file, util::kYamlFile);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp words this one "bad file".
    throw InputError(file.string(), place(e.mark),
                     "nested too deeply, beyond what the YAML parser allows; braid's files nest "
                     "a few levels");
  } catch (const YAML::Exception& e) {
    throw InputError(file.string(), place(e.mark), "YAML syntax error: " + e.msg);
  }
  // Only a file with a quote can hold a quoted scalar.
  if (text.find_first_of("\"'") != std::string::npos) {
    std::vector<bool> visited(text.size() + 1, false);
    check_quotes_closed(root, text, file, visited);
  }
  if (!root.IsMap())
    throw InputError(file.string(), "", "expected a YAML mapping at the top level");
  return root;
}

namespace {

// A plain decimal, short enough that it neither overflows nor underflows: [-]digits[.digits]
// [e[+-]dd] for a double (up to 17 digits), [-]digits without a leading zero for an integer (up
// to 18). yaml-cpp's own decoding reads every number through a std::stringstream (a few us each,
// ~50 per study run) with the base left to the text ("010" is 8); both give these texts the same
// value (its stream reads a double with strtod, as from_chars does), other texts go to it.
bool short_decimal(std::string_view s, bool integer) {
  std::size_t i = !s.empty() && s[0] == '-' ? 1 : 0;
  auto digits = [&] {
    const std::size_t from = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i - from;
  };
  const std::size_t first = i;
  std::size_t count = digits();
  if (count == 0) return false;
  if (integer) return i == s.size() && count <= 18 && (count == 1 || s[first] != '0');
  if (i < s.size() && s[i] == '.') {
    ++i;
    const std::size_t fraction = digits();
    if (fraction == 0) return false;
    count += fraction;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    const std::size_t exponent = digits();
    if (exponent == 0 || exponent > 2) return false;
  }
  return i == s.size() && count <= 17;
}

template <class T>
bool decode_number(const YAML::Node& n, T& v) {
  const std::string& s = n.Scalar();
  if (short_decimal(s, std::is_integral_v<T>))
    return std::from_chars(s.data(), s.data() + s.size(), v).ec == std::errc();
  return YAML::convert<T>::decode(n, v);
}

}  // namespace

YamlMap::YamlMap(const YAML::Node& node, std::string file, std::string prefix)
    : node_(node), file_(std::move(file)), prefix_(std::move(prefix)) {
  if (!node_.IsMap()) {
    throw InputError(file_, prefix_.empty() ? "(top level)" : prefix_,
                     "expected a mapping of key: value");
  }
  // yaml-cpp keeps every pair and lookups find the first: a repeated key would silently drop
  // the later value.
  for (const auto& pair : node_) {
    if (!pair.first.IsScalar()) continue;  // a list or mapping as a key: reported where read
    const std::string& key = pair.first.Scalar();
    if (find(key) != nullptr)
      throw InputError(file_, util::escape_control_bytes(path(key)),
                       "appears twice (again on line " +
                           std::to_string(pair.first.Mark().line + 1) + "); keep one");
    entries_.emplace_back(key, pair.second);
  }
}

const YAML::Node* YamlMap::find(const std::string& key) const {
  for (const auto& [name, value] : entries_)
    if (name == key) return &value;
  return nullptr;
}

std::string YamlMap::path(const std::string& key) const {
  if (key.empty()) return prefix_;
  return prefix_.empty() ? key : prefix_ + "." + key;
}

// Most messages quote a key or a value of the file.
void YamlMap::fail(const std::string& key, const std::string& problem) const {
  throw InputError(file_, util::escape_control_bytes(path(key)),
                   util::escape_control_bytes(problem));
}

YAML::Node YamlMap::lookup(const std::string& key) const {
  if (const YAML::Node* value = find(key)) return *value;
  // yaml-cpp's answer for a missing key (through a const node: its non-const operator[] may add
  // the key to the map).
  const YAML::Node& map = node_;
  return map[key];
}

bool YamlMap::has(const std::string& key) {
  asked_.insert(key);
  return find(key) != nullptr;
}

YAML::Node YamlMap::scalar(const std::string& key) {
  asked_.insert(key);
  YAML::Node n = lookup(key);
  if (!n || n.IsNull()) fail(key, "missing (required)");
  if (!n.IsScalar()) fail(key, "expected a single value, not a list or mapping");
  return n;
}

std::string YamlMap::string(const std::string& key) { return scalar(key).as<std::string>(); }

std::string YamlMap::string_or(const std::string& key, const std::string& fallback) {
  return has(key) ? string(key) : fallback;
}

double YamlMap::number(const std::string& key) {
  YAML::Node n = scalar(key);
  double v = 0;
  if (!decode_number(n, v) || !std::isfinite(v)) {
    fail(key, "expected a number, got '" + n.Scalar() + "'");
  }
  return v;
}

double YamlMap::number_or(const std::string& key, double fallback) {
  return has(key) ? number(key) : fallback;
}

std::int64_t YamlMap::integer(const std::string& key) {
  YAML::Node n = scalar(key);
  long long v = 0;
  if (!decode_number(n, v)) fail(key, "expected an integer, got '" + n.Scalar() + "'");
  return v;
}

std::int64_t YamlMap::integer_or(const std::string& key, std::int64_t fallback) {
  return has(key) ? integer(key) : fallback;
}

int YamlMap::positive_int(const std::string& key) {
  YAML::Node n = scalar(key);
  long long v = 0;
  if (!decode_number(n, v)) {
    fail(key, "expected a positive integer, got '" + n.Scalar() + "'");
  }
  if (v <= 0 || v > 1'000'000'000LL) {
    fail(key, "must be a positive integer (1 or more), got " + std::to_string(v));
  }
  return static_cast<int>(v);
}

int YamlMap::positive_int_or(const std::string& key, int fallback) {
  return has(key) ? positive_int(key) : fallback;
}

double YamlMap::positive_number(const std::string& key) {
  double v = number(key);
  if (v <= 0) fail(key, "must be greater than 0, got " + lookup(key).Scalar());
  return v;
}

double YamlMap::positive_number_or(const std::string& key, double fallback) {
  return has(key) ? positive_number(key) : fallback;
}

double YamlMap::nonnegative_number(const std::string& key) {
  double v = number(key);
  if (v < 0) fail(key, "must be 0 or more, got " + lookup(key).Scalar());
  return v;
}

double YamlMap::nonnegative_number_or(const std::string& key, double fallback) {
  return has(key) ? nonnegative_number(key) : fallback;
}

bool YamlMap::boolean(const std::string& key) {
  YAML::Node n = scalar(key);
  bool v = false;
  if (!YAML::convert<bool>::decode(n, v)) {
    fail(key, "expected true or false, got '" + n.Scalar() + "'");
  }
  return v;
}

bool YamlMap::boolean_or(const std::string& key, bool fallback) {
  return has(key) ? boolean(key) : fallback;
}

int YamlMap::choice(const std::string& key, const std::vector<std::string>& allowed) {
  std::string v = string(key);
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (allowed[i] == v) return static_cast<int>(i);
  }
  fail(key, "unknown value '" + v + "'; allowed: " + join(allowed));
}

int YamlMap::choice_or(const std::string& key, const std::vector<std::string>& allowed,
                       int fallback) {
  return has(key) ? choice(key, allowed) : fallback;
}

std::vector<std::string> YamlMap::string_list_or(const std::string& key,
                                                 const std::vector<std::string>& fallback) {
  if (!has(key)) return fallback;
  YAML::Node n = lookup(key);
  if (!n.IsSequence()) fail(key, "expected a list, e.g. [a, b]");
  std::vector<std::string> out;
  for (const auto& item : n) {
    if (!item.IsScalar()) fail(key, "expected a list of names");
    out.push_back(item.as<std::string>());
  }
  return out;
}

std::vector<double> YamlMap::positive_number_list(const std::string& key) {
  YAML::Node n = lookup(key);
  asked_.insert(key);
  if (!n || n.IsNull()) fail(key, "missing (required list of numbers)");
  if (!n.IsSequence() || n.size() == 0)
    fail(key, "expected a non-empty list of numbers, e.g. [512, 1024]");
  std::vector<double> out;
  for (const auto& item : n) {
    double v = 0;
    if (!item.IsScalar() || !decode_number(item, v) || !std::isfinite(v) || v <= 0)
      fail(key, "expected numbers greater than 0, got '" +
                    (item.IsScalar() ? item.Scalar() : "a list or mapping") + "'");
    out.push_back(v);
  }
  return out;
}

YamlMap YamlMap::map(const std::string& key) {
  asked_.insert(key);
  YAML::Node n = lookup(key);
  if (!n || n.IsNull()) fail(key, "missing (required mapping)");
  return YamlMap(n, file_, path(key));
}

std::optional<YamlMap> YamlMap::map_if_present(const std::string& key) {
  if (!has(key)) return std::nullopt;
  return map(key);
}

YAML::Node YamlMap::node(const std::string& key) {
  asked_.insert(key);
  return lookup(key);
}

std::string YamlMap::key_name(const YAML::Node& key) const {
  if (!key.IsScalar())
    throw InputError(file_, prefix_.empty() ? "(top level)" : prefix_,
                     "a key is a list or a mapping; keys must be plain names");
  return key.Scalar();
}

void YamlMap::finish() const {
  for (const auto& kv : node_) {
    std::string key = key_name(kv.first);
    if (!asked_.count(key)) {
      std::vector<std::string> allowed(asked_.begin(), asked_.end());
      fail(key, "unknown field; allowed here: " + join(allowed));
    }
  }
}

}  // namespace braid::detail
