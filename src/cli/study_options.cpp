// The study options shared by every simulation command (study_options.hpp).
#include "study_options.hpp"

#include <string>

#include "braid/error.hpp"

namespace braid::cli {

void add_study_options(CLI::App& cmd, StudyArgs& args) {
  StudyOverrides& o = args.overrides;
  cmd.add_option("--study", args.study,
                 "study YAML: a name under configs/studies or a path (default: "
                 "configs/studies/default.yaml)");
  cmd.add_option_function<std::string>(
      "--model", [&o](const std::string& v) { o.model = v; },
      "model: a name under configs/models (qwen2-7b, ...) or a path; default: the study's");
  cmd.add_option_function<std::string>(
      "--cluster", [&o](const std::string& v) { o.cluster = v; },
      "cluster: a name under configs/clusters (a800x16, ...) or a path; default: the study's");
  cmd.add_option("--profile", args.profile,
                 "GPU profile: a name under profiles/ (a800, h100, ...) or a path; default: the "
                 "cluster's");
  cmd.add_option_function<int>(
      "--tp", [&o](int v) { o.tp = v; }, "tensor-parallel size (GPUs); default: the study's");
  cmd.add_option_function<int>(
      "--pp", [&o](int v) { o.pp = v; }, "pipeline-parallel size (ranks); default: the study's");
  cmd.add_option_function<int>(
      "--vpp", [&o](int v) { o.vpp = v; },
      "chunks (virtual stages) per pipeline rank for loop placement; default: the study's (2)");
  cmd.add_option_function<int>(
      "--seq", [&o](int v) { o.seq = v; },
      "sequence length (tokens per sample); default: the study's");
  cmd.add_option_function<int>(
      "--mbs", [&o](int v) { o.mbs = v; }, "micro-batch size (samples); default: the study's");
  cmd.add_option_function<int>(
      "--microbatches", [&o](int v) { o.microbatches = v; },
      "microbatches per iteration per data-parallel replica; default: the study's");
  cmd.add_option_function<std::string>(
         "--sp", [&o](const std::string& v) { o.sequence_parallel = (v == "on"); },
         "sequence parallelism: on or off; default: the study's")
      ->check(CLI::IsMember({"on", "off"}));
  cmd.add_option_function<std::string>(
         "--recompute",
         [&o](const std::string& v) {
           o.recompute = v == "full"        ? Recompute::Full
                         : v == "selective" ? Recompute::Selective
                                            : Recompute::None;
         },
         "activation recomputation: none, selective or full; default: the study's (none)")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  cmd.add_option_function<int>(
      "--nodes", [&o](int v) { o.nodes = v; },
      "nodes of the cluster (GPUs per node from the cluster file); default: the cluster's");
}

Study resolve_study(const StudyArgs& args) {
  return load_study(resolve_config("studies", args.study), args.overrides);
}

Profile resolve_profile(const StudyArgs& args, const Study& study) {
  if (!args.profile.empty()) return load_profile(args.profile);
  try {
    return load_profile(study.cluster.profile);
  } catch (const InputError& e) {
    // An unknown name in the cluster file: name that file, not the command line.
    if (e.where == "--profile") throw InputError(study.cluster.file, "profile", e.problem);
    throw;
  }
}

}  // namespace braid::cli
