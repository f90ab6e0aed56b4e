// Sharded sweeps for job arrays: shard i of N evaluates its part of the grid (the split the MPI
// layer uses, computed alone by every shard) and writes the rows bit for bit; merging the N files
// gives the rows of the unsharded sweep, then its ranking and renderings. A shard file is a text
// header (a magic line with the file's checksum, and one JSON line) followed by the rows as
// encode_rows() writes them.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <exception>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../util/format.hpp"
#include "../util/input_file.hpp"
#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "format.hpp"
#include "pipeline.hpp"
#include "study_fields.hpp"

namespace braid {

namespace {

// 2: rows in visit_fields() order; 3: the grid fingerprints the whole study and the profile's
// contents (study_fields.hpp); 4: the magic line ends with the checksum of the rest of the file
// and the header lists each row's checksum, so a flipped byte is refused, naming its row; 5: the
// rows carry cp (Configuration's context-parallel size); 6: the cap's cap_bytes is the peak a rank
// may reach, the fixed overhead included (issue 39), where 5 held it without the overhead; 7: each
// row starts with a byte saying whether it names its cp comm type (the --cp-comm-type axis); 8: and
// a second byte saying whether it names its expert sizes (ep and etp, an MoE model's axes).
constexpr const char* kMagicName = "braid-sweep-shard";
constexpr int kVersion = 8;
// "braid-sweep-shard 8": the first words of a shard file.
std::string magic_words() { return std::string(kMagicName) + " " + std::to_string(kVersion); }

// FNV-1a, 64 bits: a stable fingerprint (not a security measure) of what the shards must share.
std::string fingerprint(const std::string& text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return util::format("%016llx", static_cast<unsigned long long>(h));
}

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};

// A canonical text of whole structs, by their visitors (study_fields.hpp): one "path=value" line
// per member, nested structs as "outer.inner", lists by index, numbers exactly. Where a config
// file was read from is left out (its contents are all in the structs): shards run from another
// directory, or naming the file another way, still merge.
struct CanonicalText {
  std::string text;
  void line(const std::string& path, const std::string& value) {
    text += path + "=" + value + "\n";
  }
  template <typename T>
  void member(const std::string& path, const T& v) {
    if constexpr (std::is_same_v<T, std::string>)
      line(path, v);
    else if constexpr (std::is_same_v<T, bool>)
      line(path, v ? "true" : "false");
    else if constexpr (std::is_enum_v<T>)
      line(path, std::to_string(static_cast<long long>(v)));
    else if constexpr (std::is_integral_v<T>)
      line(path, std::to_string(v));
    else if constexpr (std::is_floating_point_v<T>)
      line(path, util::format("%.17g", v));
    else if constexpr (IsOptional<T>::value) {
      if (v)
        member(path, *v);
      else
        line(path, "none");
    } else if constexpr (IsVector<T>::value) {
      line(path + ".size", std::to_string(v.size()));
      for (std::size_t i = 0; i < v.size(); ++i) member(path + "[" + std::to_string(i) + "]", v[i]);
    } else {
      explore::visit_study_fields(v, [&](const char* name, const auto& m) {
        if (std::string_view(name) != "file") member(path + "." + name, m);
      });
    }
  }
};

// The profile as its file holds it (every table and source the cost model may read); a profile
// made in code (no file) by its name.
std::string profile_text(const Profile& profile) {
  if (profile.file.empty()) return "name " + profile.name;
  return util::read_input_file(profile.file, util::kYamlFile);
}

// Everything the rows depend on: the whole study, the profile's contents, the cap, the explorer
// options that change a row, and the configurations.
std::string grid_text(const Study& base, const Profile& profile,
                      const std::vector<Configuration>& configs, const MemoryCap& cap,
                      const ExploreOptions& options) {
  CanonicalText t;
  t.member("study", base);
  t.line("profile", profile_text(profile));
  t.member("cap", cap);
  explore::visit_study_fields(
      options,
      [&t](const char* name, const auto& v) { t.member(std::string("options.") + name, v); },
      [](const char*, const auto&) {});
  for (const Configuration& c : configs) t.line("configuration", explore::describe(c));
  return t.text;
}

// The cap's fields under the names the fingerprint hashes them by (one list: study_fields.hpp).
nlohmann::ordered_json cap_json(const MemoryCap& c) {
  nlohmann::ordered_json j;
  explore::visit_study_fields(c, [&j](const char* name, const auto& v) { j[name] = v; });
  return j;
}

}  // namespace

std::pair<int, int> parse_shard(const std::string& option, const std::string& text) {
  const std::string expected = "expected i/N with 1 <= i <= N, e.g. 3/8";
  const std::size_t slash = text.find('/');
  auto number = [&](const std::string& part) {
    if (part.empty() || part.size() > 6 ||
        part.find_first_not_of("0123456789") != std::string::npos)
      throw InputError(option, text, expected);
    return std::stoi(part);
  };
  if (slash == std::string::npos) throw InputError(option, text, expected);
  const int i = number(text.substr(0, slash)), n = number(text.substr(slash + 1));
  if (n < 1 || i < 1 || i > n) throw InputError(option, text, expected);
  return {i, n};
}

SweepShard sweep_shard(const Study& base, const Profile& profile,
                       const std::vector<Configuration>& configs, const ExploreOptions& options,
                       int shard, int shards, const std::string& title) {
  if (configs.empty())
    throw InputError("sweep", "configurations",
                     "the cross product is empty; give every list at least one value");
  if (shards < 1 || shard < 1 || shard > shards)
    throw InputError("--shard", std::to_string(shard) + "/" + std::to_string(shards),
                     "expected i/N with 1 <= i <= N");
  SweepShard out;
  out.shard = shard;
  out.shards = shards;
  out.configurations = static_cast<int>(configs.size());
  out.cap = memory_cap(profile, options);
  out.grid = fingerprint(grid_text(base, profile, configs, out.cap, options));
  out.title = title;
  std::vector<double> costs(configs.size());
  for (std::size_t i = 0; i < configs.size(); ++i)
    costs[i] = estimated_cost(base, configs[i], options);
  const std::vector<int> part = assign_by_cost(costs, shards);
  std::vector<Configuration> mine;
  for (int i = 0; i < out.configurations; ++i)
    if (part[i] == shard - 1) {
      out.indices.push_back(i);
      mine.push_back(configs[i]);
    }
  const int n = static_cast<int>(mine.size());
  out.rows.resize(n);
  ExploreOptions local = options;
  local.group = ProcessGroup{};  // a shard is one process
  const explore::Workbench wb = explore::build_workbench(base, profile, mine, local, out.rows);
  std::vector<int> todo;
  for (int k = 0; k < n; ++k)
    if (wb.ready(k)) todo.push_back(k);
  explore::Ticker ticker{options, static_cast<int>(todo.size())};
  explore::finish_rows(out.rows, wb, todo, out.cap, local, ticker);
  return out;
}

namespace {

// The checksum of one row: of its bytes as encode_rows() writes a list of that row alone.
std::string row_checksum(const Evaluation& row) { return fingerprint(encode_rows({row})); }

// A shard's header line (line 2) and rows are checked against the checksums they were written
// with: a byte flipped on disk or in transit would otherwise merge into a different output.
void check_checksums(const std::string& file, const std::string& recorded, const std::string& body,
                     const std::vector<std::string>& row_sums, const std::vector<Evaluation>& rows,
                     const std::vector<int>& indices) {
  if (fingerprint(body) == recorded) return;
  for (std::size_t r = 0; r < rows.size() && r < row_sums.size(); ++r)
    if (row_checksum(rows[r]) != row_sums[r])
      throw InputError(file,
                       "row " + std::to_string(r + 1) + " of " + std::to_string(rows.size()) +
                           " (configuration " + std::to_string(indices[r] + 1) + ")",
                       "damaged shard file: the row does not match the checksum it was written "
                       "with; run its braid sweep --shard again");
  throw InputError(file, "shard",
                   "damaged shard file: its header (line 2) or the checksum on line 1 was "
                   "changed; run its braid sweep --shard again");
}

// An int of the header: a damaged file may hold a fraction or a number past int there, which
// json's get<int>() would convert with undefined behaviour.
int int_value(const nlohmann::json& v) {
  if (!v.is_number_integer()) throw std::runtime_error("not an integer: " + v.dump());
  if (v.is_number_unsigned() ? v.get<std::uint64_t>() > INT_MAX
                             : v.get<std::int64_t>() < INT_MIN || v.get<std::int64_t>() > INT_MAX)
    throw std::runtime_error("out of range: " + v.dump());
  return static_cast<int>(v.get<std::int64_t>());
}

}  // namespace

std::string encode_shard(const SweepShard& s) {
  nlohmann::ordered_json j;
  j["shard"] = s.shard;
  j["shards"] = s.shards;
  j["configurations"] = s.configurations;
  j["grid"] = s.grid;
  j["title"] = s.title;
  j["cap"] = cap_json(s.cap);
  j["indices"] = s.indices;
  std::vector<std::string> row_sums;
  row_sums.reserve(s.rows.size());
  for (const Evaluation& row : s.rows) row_sums.push_back(row_checksum(row));
  j["row_checksums"] = row_sums;
  const std::string body = j.dump() + "\n" + encode_rows(s.rows);
  return magic_words() + " " + fingerprint(body) + "\n" + body;
}

SweepShard decode_shard(const std::string& bytes, const std::string& file) {
  const std::string magic = magic_words() + " ";
  constexpr std::size_t kChecksumDigits = 16;
  const std::size_t body_at = magic.size() + kChecksumDigits + 1;
  const std::string any_version = std::string(kMagicName) + " ";
  if (bytes.compare(0, magic.size(), magic) != 0 &&
      bytes.compare(0, any_version.size(), any_version) == 0) {
    const std::size_t end = bytes.find_first_of(" \n", any_version.size());
    const std::string version =
        bytes.substr(any_version.size(), std::min<std::size_t>(end, 32) - any_version.size());
    throw InputError(file, "shard",
                     "shard format " + util::escape_control_bytes(version) +
                         " from another braid; this one "
                         "reads format " +
                         std::to_string(kVersion) +
                         ": run its braid sweep --shard again with this braid");
  }
  if (bytes.compare(0, magic.size(), magic) != 0 || bytes.size() < body_at ||
      bytes[body_at - 1] != '\n')
    throw InputError(file, "shard",
                     "not a shard file of this braid (written by braid sweep "
                     "--shard i/N --shard-out FILE)");
  const std::string recorded = bytes.substr(magic.size(), kChecksumDigits);
  const std::string body = bytes.substr(body_at);
  const std::size_t eol = bytes.find('\n', body_at);
  if (eol == std::string::npos) throw InputError(file, "shard", "truncated header");
  SweepShard s;
  std::vector<std::string> row_sums;
  try {
    const auto j = nlohmann::json::parse(bytes.substr(body_at, eol - body_at));
    s.shard = int_value(j.at("shard"));
    s.shards = int_value(j.at("shards"));
    s.configurations = int_value(j.at("configurations"));
    s.grid = j.at("grid").get<std::string>();
    s.title = j.at("title").get<std::string>();
    const auto& c = j.at("cap");
    s.cap.hbm_bytes = c.at("hbm_bytes").get<double>();
    s.cap.fixed_overhead_bytes = c.at("fixed_overhead_bytes").get<double>();
    s.cap.allocator_margin_bytes = c.at("margin_bytes").get<double>();
    s.cap.cap_bytes = c.at("cap_bytes").get<double>();
    s.cap.given = c.at("given").get<bool>();
    for (const auto& index : j.at("indices")) s.indices.push_back(int_value(index));
    row_sums = j.at("row_checksums").get<std::vector<std::string>>();
    s.rows = decode_rows(bytes.substr(eol + 1));
  } catch (const std::exception& e) {
    if (fingerprint(body) != recorded)
      throw InputError(file, "shard",
                       "damaged shard file: it does not match the checksum on line 1; run its "
                       "braid sweep --shard again");
    throw InputError(file, "shard", std::string("damaged shard file (") + e.what() + ")");
  }
  if (s.rows.size() == s.indices.size())
    check_checksums(file, recorded, body, row_sums, s.rows, s.indices);
  if (s.rows.size() != s.indices.size())
    throw InputError(file, "shard", "damaged shard file (rows and indices differ in number)");
  for (int i : s.indices)
    if (i < 0 || i >= s.configurations)
      throw InputError(file, "shard", "damaged shard file (an index outside the grid)");
  return s;
}

SweepResult merge_shards(const std::vector<SweepShard>& shards,
                         const std::vector<std::string>& files) {
  if (shards.empty()) throw InputError("merge", "files", "give the shard files to merge");
  const SweepShard& first = shards.front();
  std::vector<int> seen(first.shards + 1, -1);
  for (std::size_t k = 0; k < shards.size(); ++k) {
    const SweepShard& s = shards[k];
    // Before the shard number indexes `seen`: 5/3 is no shard of any sweep.
    if (s.shards < 1 || s.shard < 1 || s.shard > s.shards)
      throw InputError(files[k], "shard",
                       "shard " + std::to_string(s.shard) + "/" + std::to_string(s.shards) +
                           " is out of range: expected i/N with 1 <= i <= N");
    if (s.grid != first.grid || s.shards != first.shards ||
        s.configurations != first.configurations)
      throw InputError(files[k], "shard",
                       "from another sweep than " + files[0] +
                           " (grid, study, profile, cap, options or shard count differ); merge "
                           "the shards of one sweep");
    if (seen[s.shard] >= 0)
      throw InputError(files[k], "shard",
                       "shard " + std::to_string(s.shard) + "/" + std::to_string(s.shards) +
                           " given twice (also " + files[seen[s.shard]] + ")");
    seen[s.shard] = static_cast<int>(k);
  }
  for (int i = 1; i <= first.shards; ++i)
    if (seen[i] < 0)
      throw InputError("merge", "files",
                       "shard " + std::to_string(i) + "/" + std::to_string(first.shards) +
                           " is missing; run braid sweep --shard " + std::to_string(i) + "/" +
                           std::to_string(first.shards) + " with the same options");
  std::vector<Evaluation> rows(first.configurations);
  std::vector<bool> filled(first.configurations, false);
  for (std::size_t k = 0; k < shards.size(); ++k)
    for (std::size_t r = 0; r < shards[k].indices.size(); ++r) {
      const int i = shards[k].indices[r];
      if (filled[i])
        throw InputError(files[k], "shard", "damaged shard file (a configuration twice)");
      filled[i] = true;
      rows[i] = shards[k].rows[r];
    }
  if (std::find(filled.begin(), filled.end(), false) != filled.end())
    throw InputError("merge", "files", "the shards do not cover the grid (damaged shard file)");
  return sweep_from_rows(std::move(rows), first.cap);
}

}  // namespace braid
