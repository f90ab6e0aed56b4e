// Where named configs live and how a name becomes a file.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "../util/did_you_mean.hpp"
#include "../util/yaml_reader.hpp"
#include "braid/config.hpp"
#include "braid/error.hpp"
#include "paths.hpp"

namespace braid {

namespace fs = std::filesystem;

fs::path data_root() {
  if (const char* home = std::getenv("BRAID_HOME"); home != nullptr && *home != '\0') {
    return fs::path(home);
  }
#ifdef BRAID_SOURCE_DIR
  return fs::path(BRAID_SOURCE_DIR);
#else
  return fs::current_path();
#endif
}

namespace detail {

std::string singular(const std::string& kind) {
  if (kind == "studies") return "study";
  return kind.substr(0, kind.size() - 1);  // models, clusters, profiles
}

// Directory of a config kind: "models", "clusters", "studies" under configs/, "profiles" at the
// root.
fs::path config_dir(const std::string& kind) {
  if (kind == "profiles") return data_root() / "profiles";
  return data_root() / "configs" / kind;
}

std::vector<std::string> known_names(const std::string& kind) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(config_dir(kind), ec)) {
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Resolves a name or a path; on failure throws InputError(where, field, ...) listing the known
// names of that kind.
fs::path resolve_named(const std::string& kind, const std::string& name_or_path,
                       const std::string& where, const std::string& field,
                       const fs::path& relative_to) {
  if (name_or_path.empty()) throw InputError(where, field, "empty name");
  fs::path as_path(name_or_path);
  bool looks_like_path = name_or_path.find('/') != std::string::npos ||
                         as_path.extension() == ".yaml" || as_path.extension() == ".yml";
  if (looks_like_path) {
    // Inside a YAML file a relative path means "next to this file", so that a study and its model
    // travel together and work from any working directory.
    fs::path local = as_path.is_relative() ? relative_to / as_path : as_path;
    // The error_code forms: a name the file system refuses (too long, say) is just not found.
    std::error_code ec;
    if (fs::is_regular_file(local, ec)) return local;
    // A pipe or a device is there, so not "no such file": the reader says what it is instead.
    if (fs::exists(local, ec) && !fs::is_directory(local, ec)) return local;
    if (fs::is_directory(local, ec))
      throw InputError(where, field, "'" + name_or_path + "' is a directory; give a .yaml file");
    // A path relative to the data root ("configs/studies/default.yaml" from anywhere).
    if (as_path.is_relative() && fs::is_regular_file(data_root() / as_path, ec)) {
      return data_root() / as_path;
    }
    const std::string looked =
        relative_to.empty() ? std::string()
                            : " (looked next to " + where + " and in " + data_root().string() + ")";
    throw InputError(where, field, "no such file '" + name_or_path + "'" + looked);
  }
  fs::path named = config_dir(kind) / (name_or_path + ".yaml");
  std::error_code ec;
  if (fs::is_regular_file(named, ec)) return named;
  throw InputError(where, field,
                   "unknown " + singular(kind) + " '" + name_or_path +
                       "'; known: " + join(known_names(kind)) + " (or a path to a .yaml file)" +
                       util::did_you_mean(name_or_path, known_names(kind)));
}

namespace {

// The Hugging Face config a `hf:` reference names: PATH itself, or PATH/config.json for a folder;
// a relative PATH next to `relative_to` first, then in the current directory, then under the data
// root (as resolve_named).
fs::path resolve_hf_path(const std::string& text, const std::string& where,
                         const fs::path& relative_to) {
  if (text.empty())
    throw InputError(where, "model",
                     "hf: needs a path: a Hugging Face config.json or a folder holding one");
  const fs::path given(text);
  std::vector<fs::path> candidates;
  if (given.is_relative()) {
    if (!relative_to.empty()) candidates.push_back(relative_to / given);
    candidates.push_back(given);
    candidates.push_back(data_root() / given);
  } else {
    candidates.push_back(given);
  }
  std::error_code ec;
  for (const fs::path& c : candidates) {
    // A pipe or a device too: the reader says what it is rather than "no such file".
    if (fs::exists(c, ec) && !fs::is_directory(c, ec)) return c;
    if (fs::is_directory(c, ec)) {
      if (fs::is_regular_file(c / "config.json", ec)) return c / "config.json";
      throw InputError(where, "model",
                       "folder '" + text +
                           "' holds no config.json; give hf:FILE or a folder holding config.json");
    }
  }
  throw InputError(where, "model",
                   "no such file or folder '" + text +
                       "' (hf: names a Hugging Face config.json or a folder holding one)");
}

}  // namespace

ModelRef resolve_model_ref(const std::string& ref, const std::string& where,
                           const fs::path& relative_to) {
  if (ref.rfind(kHfModelPrefix, 0) == 0)
    return {resolve_hf_path(ref.substr(kHfModelPrefix.size()), where, relative_to), true};
  if (fs::path(ref).extension() == ".json") return {resolve_hf_path(ref, where, relative_to), true};
  return {resolve_named("models", ref, where, "model", relative_to), false};
}

}  // namespace detail

fs::path resolve_config(const std::string& kind, const std::string& name_or_path) {
  // Named from the command line (--study, --model, ...), so the option is the place to report.
  return detail::resolve_named(kind, name_or_path, "--" + detail::singular(kind),
                               detail::singular(kind));
}

}  // namespace braid
