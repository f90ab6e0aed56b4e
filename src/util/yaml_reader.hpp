// YamlMap: typed, strict reading of one YAML mapping for every loader of a YAML file (configs,
// profiles, measured tables). Every accessor names the file and the dotted field path in the
// InputError it throws; finish() rejects keys that no accessor asked for, so a typo ("hiden") is
// an error, not a silently ignored field. Internal (src/util, any module may use it); not part of
// the public API, and it knows no schema: the loaders say which keys exist.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace braid::detail {

// Parses `file`; throws InputError(file, "", ...) when it is missing or not valid YAML.
YAML::Node load_yaml_file(const std::filesystem::path& file);

class YamlMap {
 public:
  // Throws InputError if `node` is not a mapping. `prefix` is the dotted path of `node` ("" =
  // root).
  YamlMap(const YAML::Node& node, std::string file, std::string prefix);

  bool has(const std::string& key);
  std::string string(const std::string& key);
  std::string string_or(const std::string& key, const std::string& fallback);
  // Strictly positive integer / number.
  int positive_int(const std::string& key);
  int positive_int_or(const std::string& key, int fallback);
  double positive_number(const std::string& key);
  double positive_number_or(const std::string& key, double fallback);
  double nonnegative_number(const std::string& key);
  double nonnegative_number_or(const std::string& key, double fallback);
  // Any finite number / any integer (64 bits).
  double number(const std::string& key);
  double number_or(const std::string& key, double fallback);
  std::int64_t integer(const std::string& key);
  std::int64_t integer_or(const std::string& key, std::int64_t fallback);
  bool boolean(const std::string& key);
  bool boolean_or(const std::string& key, bool fallback);
  // One of `allowed` (case-sensitive); returns its index.
  int choice(const std::string& key, const std::vector<std::string>& allowed);
  int choice_or(const std::string& key, const std::vector<std::string>& allowed, int fallback);
  std::vector<std::string> string_list_or(const std::string& key,
                                          const std::vector<std::string>& fallback);
  // A non-empty list of numbers greater than 0 ([1.5, 2, 4]).
  std::vector<double> positive_number_list(const std::string& key);
  YamlMap map(const std::string& key);
  std::optional<YamlMap> map_if_present(const std::string& key);
  // The raw node (for lists of maps); marks the key as known.
  YAML::Node node(const std::string& key);

  // Throws InputError for the first key no accessor asked for, listing the allowed keys.
  void finish() const;
  // The text of a key of this mapping; throws InputError when the key is a list or a mapping
  // ({[a, b]: 1} is valid YAML but names no field).
  std::string key_name(const YAML::Node& key) const;

  const std::string& file() const { return file_; }
  // Dotted field path of `key`; of this mapping itself when `key` is empty.
  std::string path(const std::string& key) const;
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const;

 private:
  // The value of `key` in this mapping (entries_), or yaml-cpp's answer for a missing one.
  YAML::Node lookup(const std::string& key) const;
  const YAML::Node* find(const std::string& key) const;
  YAML::Node scalar(const std::string& key);  // required scalar

  YAML::Node node_;
  std::string file_;
  std::string prefix_;
  std::set<std::string> asked_;
  // The pairs with a plain key, in order, read once: a yaml-cpp lookup converts every key it
  // passes to a string, for each field asked.
  std::vector<std::pair<std::string, YAML::Node>> entries_;
};

// "a, b, c" for error messages.
std::string join(const std::vector<std::string>& items);

}  // namespace braid::detail
