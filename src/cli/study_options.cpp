// The study options shared by every simulation command (study_options.hpp).
#include "study_options.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "../util/did_you_mean.hpp"
#include "../util/input_file.hpp"
#include "braid/error.hpp"
#include "braid/schedule.hpp"
#include "distributed.hpp"

namespace braid::cli {

void add_moe_routing_option(CLI::App& cmd, std::optional<std::string>& routing) {
  cmd.add_option_function<std::string>(
      "--moe-routing", [&routing](const std::string& v) { routing = v; },
      "MoE models: how the routers spread the tokens over the experts: balanced, skew:S (Zipf, "
      "expert e's share proportional to (e+1)^-S; EP rank 0 holds the hottest), histogram:FILE "
      "(one count or weight per expert) or multinomial:SEED (uniform draws, reproducible); "
      "default: the study's (balanced)");
}

void add_moe_dispatch_options(CLI::App& cmd, std::optional<MoeDispatcher>& dispatcher,
                              std::optional<bool>& fp8_dispatch) {
  cmd.add_option_function<std::string>(
         "--moe-dispatcher",
         [&dispatcher](const std::string& v) { dispatcher = parse_moe_dispatcher(v); },
         "MoE models: how the tokens reach their experts: alltoall (Megatron's all-to-all "
         "dispatcher), deepep (DeepEP's kernels) or allgather (Megatron's all-gather "
         "dispatcher); default: the model's")
      ->check(CLI::IsMember(moe_dispatcher_names()));
  cmd.add_flag_function(
      "--moe-fp8-dispatch", [&fp8_dispatch](std::int64_t) { fp8_dispatch = true; },
      "MoE models with the deepep dispatcher: send the dispatched tokens in FP8 with 1x128 "
      "scales (moe.fp8_dispatch); default: the model's");
}

void add_moe_shared_expert_overlap_option(CLI::App& cmd, std::optional<bool>& overlap) {
  cmd.add_option_function<std::string>(
         "--moe-shared-expert-overlap", [&overlap](const std::string& v) { overlap = v == "on"; },
         "MoE models with shared experts: run them beside the EP all-to-alls (Megatron's "
         "--moe-shared-expert-overlap: fc1 under the dispatch, fc2 under the combine): on or off; "
         "default: the study's (off, as Megatron)")
      ->check(CLI::IsMember({"on", "off"}));
}

void add_study_options(CLI::App& cmd, StudyArgs& args) {
  StudyOverrides& o = args.overrides;
  cmd.add_option("--study", args.study,
                 "study YAML: a name under configs/studies or a path (default: the job defaults, "
                 "configs/studies/job-defaults.yaml, when --model, --cluster or Megatron-LM "
                 "arguments describe the job; else configs/studies/default.yaml)");
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
      "--cp", [&o](int v) { o.cp = v; },
      "context-parallel size: GPUs that split each sequence (ring attention); default: the "
      "study's (1)");
  cmd.add_option_function<int>(
      "--ep", [&o](int v) { o.ep = v; },
      "expert-parallel size of a Mixture-of-Experts model: ranks its experts are spread over "
      "(divides the experts); default: the study's (1)");
  cmd.add_option_function<int>(
      "--etp", [&o](int v) { o.etp = v; },
      "expert tensor-parallel size: GPUs each expert is split over; default: the study's, else "
      "the dense tp (Megatron's)");
  cmd.add_option_function<std::string>(
         "--cp-comm-type",
         [&o](const std::string& v) {
           o.cp_comm_type = parse_cp_comm_type(v).value_or(CpCommType::P2P);
         },
         "how a context-parallel group exchanges KV: p2p (a ring hidden behind the attention "
         "steps), allgather (exposed gather and reduce-scatter) or a2a (Ulysses: exposed "
         "all-to-alls of Q, K, V and the output) or a2a+p2p (all-to-alls inside groups of "
         "--hierarchical-cp-sizes' first size, a ring between them); default: the study's (p2p)")
      ->check(CLI::IsMember(cp_comm_type_names()));
  cmd.add_option_function<std::vector<int>>(
         "--hierarchical-cp-sizes", [&o](const std::vector<int>& v) { o.hierarchical_cp = v; },
         "a2a+p2p: A P, the all-to-all group's size and the ring's (A x P = cp; Megatron's "
         "--hierarchical-context-parallel-sizes); default: the study's")
      ->expected(2);
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
         [&o](const std::string& v) { o.recompute = parse_recompute(v).value_or(Recompute::None); },
         "activation recomputation: none, selective or full; default: the study's (none)")
      ->check(CLI::IsMember(recompute_names()));
  cmd.add_option_function<std::string>(
         "--precision",
         [&o](const std::string& v) { o.precision = parse_precision(v).value_or(Precision::Bf16); },
         "the linear layers' GEMM format: bf16, or a Transformer Engine FP8 recipe: fp8-delayed, "
         "fp8-current, fp8-blockwise, mxfp8 (Blackwell); default: the study's (bf16)")
      ->check(CLI::IsMember(precision_names()));
  add_moe_routing_option(cmd, o.moe_routing);
  add_moe_dispatch_options(cmd, o.moe_dispatcher, o.moe_fp8_dispatch);
  add_moe_shared_expert_overlap_option(cmd, o.moe_shared_expert_overlap);
  cmd.add_option_function<int>(
      "--nodes", [&o](int v) { o.nodes = v; },
      "nodes of the cluster (GPUs per node from the cluster file); default: the cluster's");
  cmd.add_option_function<std::string>(
         "--vision-placement",
         [&o](const std::string& v) {
           o.vision_placement = parse_vision_placement(v).value_or(VisionPlacement::Separate);
         },
         "multimodal models: the ViT on virtual stage(s) of its own (separate) or folded into "
         "the first LM stage (first-stage); default: the study's (separate)")
      ->check(CLI::IsMember(vision_placement_names()));
  cmd.add_option_function<std::string>(
         "--balance",
         [&o](const std::string& v) {
           o.balance = parse_stage_balance(v).value_or(StageBalance::Uniform);
         },
         "layers per virtual stage: uniform, or cost (the split minimising the slowest virtual "
         "stage's forward + backward time); default: the study's (uniform)")
      ->check(CLI::IsMember(stage_balance_names()));
  cmd.add_option_function<std::string>(
      "--layers-per-stage",
      [&o](const std::string& v) { o.layers_per_stage = parse_layers_per_stage(v); },
      "layers per virtual stage by hand, e.g. 32,6,5,5: one entry per virtual stage, each >= 1, "
      "summing to the layers (with a ViT: its layers first, then the LM's)");
  cmd.add_option_function<double>(
      "--offload", [&o](double v) { o.offload = v; },
      "activation offloading for schedules other than stp-offload: share (0..1) of the "
      "microbatches whose chunk-0 activations go to host memory; default: the study's (0 = off)");
  cmd.add_option_function<int>(
         "--wgrad-deferral-limit", [&o](int v) { o.wgrad_deferral_limit = v; },
         "with --defer-embedding-wgrad-compute on, how many microbatches' LM-head weight "
         "gradients wait for the flush (Megatron's wgrad_deferral_limit); default: the study's "
         "(0 = every one)")
      ->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--megatron-args", args.megatron_args,
                 "Megatron-LM pretrain_gpt.py flags (\"--num-layers 32 --hidden-size 4096 ...\"): "
                 "model, parallel, batch and memory settings; other options override them");
  cmd.add_option("--megatron-args-file", args.megatron_args_file,
                 "a Megatron-LM launch script (train.sh): its pretrain_gpt.py flags, with "
                 "variables, arrays and continuation lines read as bash does");
  cmd.add_flag("--strict", args.strict,
               "refuse Megatron-LM flags braid does not model (default: one warning line)");
  auto on_off = [&cmd](const char* flag, std::optional<bool>& field, const char* help) {
    cmd.add_option_function<std::string>(
           flag, [&field](const std::string& v) { field = (v == "on"); }, help)
        ->check(CLI::IsMember({"on", "off"}));
  };
  on_off("--distributed-optimizer", o.distributed_optimizer,
         "shard the optimizer state over data parallelism (reduce-scatter gradients, all-gather "
         "parameters): on or off; default: the study's (off, as Megatron)");
  on_off("--overlap-grad-reduce", o.overlap_grad_reduce,
         "overlap the bucketed data-parallel gradient reduce with the backward: on or off; "
         "default: the study's (off, as Megatron)");
  on_off("--overlap-param-gather", o.overlap_param_gather,
         "overlap the distributed optimizer's parameter all-gather with the next forward: on or "
         "off; default: the study's (off, as Megatron)");
  on_off("--tp-comm-overlap", o.tp_comm_overlap,
         "Transformer Engine's TP-communication overlap (Megatron's --tp-comm-overlap): the "
         "sequence-parallel all-gathers and reduce-scatters pipelined with their GEMMs; needs "
         "--sp on and tp within a node: on or off; default: the study's (off, as Megatron)");
  on_off("--fp8-param-gather", o.fp8_param_gather,
         "Megatron's --fp8-param-gather: the linear weights are FP8 parameters, all-gathered in "
         "1 byte, with no bf16 copy; needs an FP8 --precision and --distributed-optimizer on: on "
         "or off; default: the study's (off, as Megatron)");
  on_off("--p2p-scatter-gather", o.p2p_scatter_gather,
         "send 1/tp of each activation between pipeline stages and all-gather it on NVLink "
         "(Megatron's scatter/gather, no SP): on or off; default: the study's (on)");
  on_off("--p2p-batched", o.p2p_batched,
         "pipeline sends as Megatron's batched isend/irecv (a send starts once the receiver has "
         "posted its receive, the sender's next instruction waits for the batch): on, or off for "
         "the sender waiting on its sends alone; default: the study's (on)");
  on_off("--overlap-p2p-comm", o.overlap_p2p_comm,
         "Megatron's overlap_p2p_comm for 1f1b-i (its interleaved schedule): each forward and "
         "backward sends at once and posts the next one's receive, instead of once per "
         "steady-state pair: on, or off as --no-overlap-p2p-communication; default: the study's "
         "(on, as Megatron)");
  on_off("--defer-embedding-wgrad-compute", o.defer_embedding_wgrad_compute,
         "Megatron's defer_embedding_wgrad_compute: the last stage runs the LM head's "
         "weight-gradient GEMMs after its last backward, in the pipeline flush; needs --pp 2 or "
         "more: on or off; default: the study's (off, as Megatron)");
}

std::vector<int> parse_layers_per_stage(const std::string& text) {
  std::vector<int> out;
  std::string item;
  const std::string expected = "expected comma-separated layer counts such as 32,6,5,5";
  if (text.empty() || text.back() == ',') throw InputError("--layers-per-stage", text, expected);
  for (std::size_t pos = 0; pos <= text.size();) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    item = text.substr(pos, comma - pos);
    const bool digits = !item.empty() && item.size() <= 6 &&
                        item.find_first_not_of("0123456789") == std::string::npos;
    if (!digits)
      throw InputError("--layers-per-stage", text, "'" + item + "' is not a count; " + expected);
    out.push_back(std::stoi(item));
    pos = comma + 1;
  }
  return out;
}

namespace {

// The overrides with Megatron-LM arguments, when given, beneath the other options; `warn` prints
// the flags braid does not model (once per command: resolve_study's call).
StudyOverrides with_megatron_args(const StudyArgs& args, bool warn) {
  if (args.megatron_args.empty() && args.megatron_args_file.empty()) {
    if (args.strict) throw InputError("--strict", "", "applies to --megatron-args(-file) only");
    return args.overrides;
  }
  if (!args.megatron_args.empty() && !args.megatron_args_file.empty())
    throw InputError("--megatron-args", "",
                     "give --megatron-args or --megatron-args-file, not both");
  std::string where = "--megatron-args";
  std::string text = args.megatron_args;
  if (!args.megatron_args_file.empty()) {
    where = args.megatron_args_file;
    text = util::read_input_file(args.megatron_args_file, util::kMegatronArgsFile,
                                 "--megatron-args-file");
  }
  const MegatronLaunch launch = parse_megatron_args(text, where);
  if (launch.overrides.model_config && args.overrides.model)
    throw InputError("--model", *args.overrides.model,
                     "the Megatron-LM arguments give the model's sizes too; drop one");
  if (!launch.not_modelled.empty()) {
    const std::string list = CLI::detail::join(launch.not_modelled, ", ");
    if (args.strict) throw InputError(where, "not modelled", list + " (--strict)");
    if (warn && is_root())
      std::cerr << "braid: warning: " << where << ": not modelled, ignored: " << list << "\n";
  }
  StudyOverrides merged = launch.overrides;
  merge_overrides(merged, args.overrides);
  return merged;
}

}  // namespace

std::string study_file_for(const StudyArgs& args, const StudyOverrides& merged) {
  if (!args.study.empty()) return args.study;
  return merged.model || merged.model_config || merged.cluster ? kJobDefaults : kDefaultStudy;
}

namespace {

// The one line an exploring command gives for an MoE model (docs/moe.md), naming where the model
// came from.
void refuse_moe(const StudyOverrides& merged, const Study& study) {
  const ModelConfig& m = study.model;
  if (!m.moe) return;
  const std::string where = merged.model          ? "--model"
                            : merged.model_config ? "--megatron-args"
                                                  : study.file;
  throw InputError(where, "model",
                   m.name + " is a Mixture-of-Experts model (" + std::to_string(m.moe->experts) +
                       " experts, top-" + std::to_string(m.moe->top_k) +
                       "): this command does not explore --ep yet (not one of its axes); "
                       "`braid simulate`, `compare`, `sweep` and `search` run it (docs/moe.md)");
}

}  // namespace

Study resolve_study(const StudyArgs& args, ModelUse use) {
  const StudyOverrides overrides = with_megatron_args(args, true);
  const std::string file = study_file_for(args, overrides);
  Study study = load_study(resolve_config("studies", file), overrides);
  if (args.study.empty() && file == kJobDefaults)
    study.name = study.model.name + " on " + study.cluster.name;
  // The study's own list (compare's default, sweep's and search's too): an unknown name is the
  // file's error, not the --schedules option's, and never silently dropped.
  const std::vector<std::string>& known = schedule_names();
  for (const std::string& name : study.schedules)
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw InputError(study.file, "schedules",
                       "unknown schedule '" + name + "'; known: " + CLI::detail::join(known, ", ") +
                           util::did_you_mean(name, known));
  if (use == ModelUse::Explore) refuse_moe(overrides, study);
  return study;
}

std::string job_defaults_text(const StudyArgs& args, const Study& study,
                              const std::vector<std::string>& varied) {
  const StudyOverrides o = with_megatron_args(args, false);
  if (study_file_for(args, o) != kJobDefaults) return "";
  const ParallelConfig& p = study.parallel;
  const TrainingConfig& t = study.training;
  std::vector<std::string> items;
  auto add = [&](const char* key, bool given, const std::string& value) {
    if (!given && std::find(varied.begin(), varied.end(), key) == varied.end())
      items.push_back(key + (" " + value));
  };
  auto on_off = [](bool b) { return std::string(b ? "on" : "off"); };
  add("tp", o.tp.has_value(), std::to_string(p.tp));
  add("pp", o.pp.has_value(), std::to_string(p.pp));
  add("vpp", o.vpp.has_value(), std::to_string(p.vpp));
  add("cp", o.cp.has_value(), std::to_string(p.cp));
  add("seq", o.seq.has_value(), std::to_string(t.seq));
  add("mbs", o.mbs.has_value(), std::to_string(t.micro_batch_size));
  add("m", o.microbatches || o.global_batch, std::to_string(t.microbatches));
  add("sp", o.sequence_parallel.has_value(), on_off(p.sequence_parallel));
  add("recompute", o.recompute.has_value(), name(t.recompute));
  add("distributed optimizer", o.distributed_optimizer.has_value(),
      on_off(t.distributed_optimizer));
  add("schedules", false, CLI::detail::join(study.schedules, ","));
  if (items.empty()) return "";
  return "job defaults (" + std::string(kJobDefaults) +
         "), not given: " + CLI::detail::join(items, ", ") + "\n";
}

namespace {

Profile load_study_profile(const StudyArgs& args, const Study& study) {
  if (!args.profile.empty()) return load_profile(args.profile);
  try {
    return load_profile(study.cluster.profile);
  } catch (const InputError& e) {
    // An unknown name in the cluster file: name that file, not the command line.
    if (e.where == "--profile") throw InputError(study.cluster.file, "profile", e.problem);
    throw;
  }
}

}  // namespace

Profile resolve_profile(const StudyArgs& args, const Study& study) {
  Profile profile = load_study_profile(args, study);
  // An FP8 precision on a GPU without it: named after the option that chose it, else the study.
  if (const std::string refusal = precision_refusal(study.training.precision, profile);
      !refusal.empty())
    throw InputError(args.overrides.precision ? "--precision" : study.file, "training.precision",
                     refusal);
  return profile;
}

}  // namespace braid::cli
