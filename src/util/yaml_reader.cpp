#include "yaml_reader.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "braid/error.hpp"

namespace braid::detail {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

YAML::Node load_yaml_file(const std::filesystem::path& file) {
  // An ifstream opens a directory and reads nothing: say what it is.
  if (std::error_code ec; std::filesystem::is_directory(file, ec))
    throw InputError(file.string(), "", "is a directory; give a YAML file");
  std::ifstream in(file);
  if (!in) throw InputError(file.string(), "", "cannot open file");
  try {
    YAML::Node root = YAML::Load(in);
    if (!root.IsMap())
      throw InputError(file.string(), "", "expected a YAML mapping at the top level");
    return root;
  } catch (const YAML::Exception& e) {
    throw InputError(file.string(), "line " + std::to_string(e.mark.line + 1),
                     "malformed YAML: " + e.msg);
  }
}

YamlMap::YamlMap(const YAML::Node& node, std::string file, std::string prefix)
    : node_(node), file_(std::move(file)), prefix_(std::move(prefix)) {
  if (!node_.IsMap()) {
    throw InputError(file_, prefix_.empty() ? "(top level)" : prefix_,
                     "expected a mapping of key: value");
  }
  // yaml-cpp keeps every pair and lookups find the first: a repeated key would silently drop
  // the later value.
  std::set<std::string> keys;
  for (const auto& pair : node_) {
    if (!pair.first.IsScalar()) continue;  // a list or mapping as a key: reported where read
    const std::string key = pair.first.Scalar();
    if (!keys.insert(key).second)
      throw InputError(file_, path(key),
                       "appears twice (again on line " +
                           std::to_string(pair.first.Mark().line + 1) + "); keep one");
  }
}

std::string YamlMap::path(const std::string& key) const {
  if (key.empty()) return prefix_;
  return prefix_.empty() ? key : prefix_ + "." + key;
}

void YamlMap::fail(const std::string& key, const std::string& problem) const {
  throw InputError(file_, path(key), problem);
}

YAML::Node YamlMap::lookup(const std::string& key) const {
  // Through a const node: yaml-cpp's non-const operator[] may add the key to the map.
  const YAML::Node& map = node_;
  return map[key];
}

bool YamlMap::has(const std::string& key) {
  asked_.insert(key);
  return static_cast<bool>(lookup(key));
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
  if (!YAML::convert<double>::decode(n, v) || !std::isfinite(v)) {
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
  if (!YAML::convert<long long>::decode(n, v))
    fail(key, "expected an integer, got '" + n.Scalar() + "'");
  return v;
}

std::int64_t YamlMap::integer_or(const std::string& key, std::int64_t fallback) {
  return has(key) ? integer(key) : fallback;
}

int YamlMap::positive_int(const std::string& key) {
  YAML::Node n = scalar(key);
  long long v = 0;
  if (!YAML::convert<long long>::decode(n, v)) {
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
