// The study options every simulation command shares: --study and the field overrides
// (--model, --cluster, --tp, --pp, --vpp, --seq, --mbs, --microbatches, --sp, --recompute,
// --nodes, --profile). Parsed into StudyArgs, then resolved into a validated Study + Profile.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "braid/config.hpp"
#include "braid/profile.hpp"

namespace braid::cli {

struct StudyArgs {
  // Path or name under configs/studies; empty: the job defaults or the default study
  // (study_file_for).
  std::string study;
  std::string profile;  // overrides the cluster's profile
  StudyOverrides overrides;
  // Megatron-LM arguments as the base of the overrides (docs/megatron.md): the flags as text, or
  // a launch script; --strict refuses the flags braid does not model instead of warning.
  std::string megatron_args, megatron_args_file;
  bool strict = false;
};

void add_study_options(CLI::App& cmd, StudyArgs& args);
// --moe-routing (training.moe_routing), for the commands that take the study options and for
// sweep and search.
void add_moe_routing_option(CLI::App& cmd, std::optional<std::string>& routing);
// --moe-dispatcher and --moe-fp8-dispatch (the MoE model's moe.dispatcher and
// moe.fp8_dispatch), beside it on the same commands.
void add_moe_dispatch_options(CLI::App& cmd, std::optional<MoeDispatcher>& dispatcher,
                              std::optional<bool>& fp8_dispatch);
// --moe-shared-expert-overlap (training.moe_shared_expert_overlap), for the same commands.
void add_moe_shared_expert_overlap_option(CLI::App& cmd, std::optional<bool>& overlap);
// The study a command starts from: --study when given; else the job defaults
// (configs/studies/job-defaults.yaml) when the command describes a job of its own (a model, a
// cluster, or Megatron-LM arguments with the model's sizes); else the default study.
inline constexpr const char* kDefaultStudy = "configs/studies/default.yaml";
inline constexpr const char* kJobDefaults = "configs/studies/job-defaults.yaml";
std::string study_file_for(const StudyArgs& args, const StudyOverrides& merged);
// Resolved from the job defaults, a study is named after its model and cluster
// ("llama3.1-70b on dgx-h100"), never "job-defaults".
// simulate and compare run a Mixture-of-Experts model (ModelUse::Simulate; docs/moe.md), and so
// do sweep and search, whose axes include ep and etp (ModelUse::Sweep); the other commands that
// explore settings (ModelUse::Explore: design, theory) refuse one with one line; `info` describes
// one (ModelUse::Describe).
enum class ModelUse { Simulate, Explore, Sweep, Describe };
Study resolve_study(const StudyArgs& args, ModelUse use = ModelUse::Explore);
// "" unless `study` started from the job defaults; then one line naming each of its settings the
// command did not give, so no default passes unseen. `varied`: the settings the command sets
// itself (sweep and search axes: "tp", "seq", "schedules", ...), left out.
std::string job_defaults_text(const StudyArgs& args, const Study& study,
                              const std::vector<std::string>& varied = {});
// "32,6,5,5" -> {32, 6, 5, 5}; throws InputError naming --layers-per-stage.
std::vector<int> parse_layers_per_stage(const std::string& text);
Profile resolve_profile(const StudyArgs& args, const Study& study);

}  // namespace braid::cli
