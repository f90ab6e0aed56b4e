// The study options every simulation command shares: --study and the field overrides
// (--model, --cluster, --tp, --pp, --vpp, --seq, --mbs, --microbatches, --sp, --recompute,
// --nodes, --profile). Parsed into StudyArgs, then resolved into a validated Study + Profile.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "braid/config.hpp"
#include "braid/profile.hpp"

namespace braid::cli {

struct StudyArgs {
  std::string study = "configs/studies/default.yaml";  // path or name under configs/studies
  std::string profile;                                 // overrides the cluster's profile
  StudyOverrides overrides;
  // Megatron-LM arguments as the base of the overrides (docs/megatron.md): the flags as text, or
  // a launch script; --strict refuses the flags braid does not model instead of warning.
  std::string megatron_args, megatron_args_file;
  bool strict = false;
};

void add_study_options(CLI::App& cmd, StudyArgs& args);
Study resolve_study(const StudyArgs& args);
// "32,6,5,5" -> {32, 6, 5, 5}; throws InputError naming --layers-per-stage.
std::vector<int> parse_layers_per_stage(const std::string& text);
Profile resolve_profile(const StudyArgs& args, const Study& study);

}  // namespace braid::cli
