// Where named configs live (configs/<kind>/, profiles/) and how a name or a path becomes a file.
// Private to src/config: other modules go through resolve_config (config.hpp).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "braid/config.hpp"

namespace braid::detail {

// Named configs (paths.cpp). kind: "models", "clusters", "studies" or "profiles".
std::filesystem::path config_dir(const std::string& kind);
std::vector<std::string> known_names(const std::string& kind);
std::string singular(const std::string& kind);  // "studies" -> "study"
// A name ("qwen2-7b") or a path to a file; throws InputError(where, field, ...) listing the known
// names when neither exists. A relative path is looked up against `relative_to` when it is given
// (the folder of the YAML file that names it), else against the current directory; then against
// the data root ("configs/models/x.yaml" from anywhere).
std::filesystem::path resolve_named(const std::string& kind, const std::string& name_or_path,
                                    const std::string& where, const std::string& field,
                                    const std::filesystem::path& relative_to = {});

// Where a model reference points: a model YAML file, or a Hugging Face config.json (`hf:PATH`,
// PATH a file or a folder holding config.json; or a path ending in .json). Relative paths are
// looked up as in resolve_named. Throws InputError(where, "model", ...) when nothing is there.
struct ModelRef {
  std::filesystem::path file;
  bool hf = false;
};
ModelRef resolve_model_ref(const std::string& ref, const std::string& where,
                           const std::filesystem::path& relative_to = {});
// Loads the model a resolved reference points at (load.cpp).
ModelConfig load_model_at(const ModelRef& ref);

}  // namespace braid::detail
