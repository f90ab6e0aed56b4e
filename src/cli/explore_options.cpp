// The options shared by `sweep` and `search` (explore_options.hpp).
#include "explore_options.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include "../util/did_you_mean.hpp"
#include "../util/units.hpp"
#include "braid/design.hpp"
#include "braid/error.hpp"
#include "braid/html_report.hpp"
#include "braid/schedule.hpp"
#include "option_values.hpp"
#include "output.hpp"
#include "study_options.hpp"

namespace braid::cli {

namespace {

std::vector<std::string> split(const std::string& option, const std::string& text,
                               const std::string& expected) {
  std::vector<std::string> items;
  std::string item;
  std::stringstream in(text);
  if (text.empty()) throw InputError(option, "''", "empty list; expected " + expected);
  while (std::getline(in, item, ',')) {
    if (item.empty()) throw InputError(option, text, "empty item; expected " + expected);
    items.push_back(item);
  }
  if (text.back() == ',') throw InputError(option, text, "empty item; expected " + expected);
  return items;
}

template <typename T>
void push_unique(std::vector<T>& v, const T& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

}  // namespace

std::vector<int> parse_int_list(const std::string& option, const std::string& text) {
  const std::string expected = "comma-separated positive integers such as 2,4,8";
  std::vector<int> out;
  for (const std::string& item : split(option, text, expected)) {
    const bool digits =
        std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || item.size() > 9 || std::stoi(item) <= 0)
      throw InputError(option, text,
                       "'" + item + "' is not a positive integer; expected " + expected);
    push_unique(out, std::stoi(item));
  }
  return out;
}

std::vector<bool> parse_sp_list(const std::string& option, const std::string& text) {
  std::vector<bool> out;
  for (const std::string& item : split(option, text, "on, off or on,off")) {
    if (item != "on" && item != "off")
      throw InputError(option, text, "'" + item + "' is not on or off; expected on, off or on,off");
    push_unique(out, item == "on");
  }
  return out;
}

std::vector<CpCommType> parse_cp_comm_type_list(const std::string& option,
                                                const std::string& text) {
  std::vector<CpCommType> out;
  const std::string expected = "a comma-separated list of p2p, a2a, allgather, a2a+p2p";
  for (const std::string& item : split(option, text, expected)) {
    if (const std::optional<CpCommType> c = parse_cp_comm_type(item))
      push_unique(out, *c);
    else
      throw InputError(option, text, "'" + item + "' is unknown; expected " + expected);
  }
  return out;
}

std::vector<CpCommType> cp_comm_types_of(const ExploreStudyArgs& args) {
  if (args.cp_comm_types.empty()) return {};
  return parse_cp_comm_type_list("--cp-comm-type", args.cp_comm_types);
}

std::vector<Recompute> parse_recompute_list(const std::string& option, const std::string& text) {
  std::vector<Recompute> out;
  const std::string expected = "a comma-separated list of none, selective, full";
  for (const std::string& item : split(option, text, expected)) {
    if (const std::optional<Recompute> r = parse_recompute(item))
      push_unique(out, *r);
    else
      throw InputError(option, text, "'" + item + "' is unknown; expected " + expected);
  }
  return out;
}

std::vector<std::string> parse_schedule_list(const std::string& option, const std::string& text) {
  const std::vector<std::string>& known = schedule_names();
  std::vector<std::string> accepted = known;  // what a typo is matched against
  accepted.insert(accepted.begin(), "all");
  accepted.emplace_back(kDesignedName);
  std::string names;
  for (const auto& n : known) names += (names.empty() ? "" : ", ") + n;
  if (text == "all") return known;
  std::vector<std::string> out;
  names += ", designed";  // braid design's schedule per configuration (--design-budget)
  for (const std::string& item : split(option, text, "all or a list of " + names)) {
    if (item != kDesignedName && std::find(known.begin(), known.end(), item) == known.end())
      throw InputError(option, text,
                       "unknown schedule '" + item + "'; known: all, " + names +
                           util::did_you_mean(item, accepted));
    push_unique(out, item);
  }
  return out;
}

void add_explore_study_options(CLI::App& cmd, ExploreStudyArgs& args) {
  cmd.add_option("--study", args.study,
                 "study YAML: a name under configs/studies or a path (default: the job defaults, "
                 "configs/studies/job-defaults.yaml, with --model or --cluster; else "
                 "configs/studies/default.yaml)");
  cmd.add_option("--model", args.model, "model: a name under configs/models or a path");
  cmd.add_option("--cluster", args.cluster, "cluster: a name under configs/clusters or a path");
  cmd.add_option("--profile", args.profile, "GPU profile: a name under profiles/ or a path");
  cmd.add_option_function<int>(
      "--nodes", [&args](int v) { args.nodes = v; },
      "nodes of the cluster; default: the cluster's");
  cmd.add_option_function<double>(
      "--offload", [&args](double v) { args.offload = v; },
      "activation offloading for schedules other than stp-offload: share (0..1) of the "
      "microbatches whose chunk-0 activations go to host memory; default: the study's");
  cmd.add_option_function<std::string>(
         "--balance",
         [&args](const std::string& v) {
           args.balance = parse_stage_balance(v).value_or(StageBalance::Uniform);
         },
         "layers per virtual stage: uniform or cost; default: the study's")
      ->check(CLI::IsMember(stage_balance_names()));
  add_moe_routing_option(cmd, args.moe_routing);
  add_moe_dispatch_options(cmd, args.moe_dispatcher, args.moe_fp8_dispatch);
  add_moe_shared_expert_overlap_option(cmd, args.moe_shared_expert_overlap);
  cmd.add_option("--cp-comm-type", args.cp_comm_types,
                 "context-parallel communication types, e.g. p2p,a2a (an axis when more than "
                 "one: each row names its type); default: the study's");
  cmd.add_option_function<std::vector<int>>(
         "--hierarchical-cp-sizes",
         [&args](const std::vector<int>& v) { args.hierarchical_cp = v; },
         "a2a+p2p's sizes A P (A x P = cp) for its rows; default: the study's")
      ->expected(2);
  add_memory_cap_options(cmd, args.mem_cap_gib, args.mem_margin_gib);
  args.jobs_option = cmd.add_option("--jobs", args.jobs,
                                    "worker threads (default: all cores); results do not depend "
                                    "on it");
  cmd.add_flag("--tp-across-nodes", args.tp_across_nodes,
               "allow tp larger than a node (TP collectives over the inter-node link)");
  cmd.add_option("--design-budget", args.design_budget_s,
                 "seconds each configuration's `designed` schedule may take (default 60; "
                 "docs/design-search.md)")
      ->check(finite_positive(kMaxBudgetS, "seconds"));
}

void add_memory_cap_options(CLI::App& cmd, double& cap_gib, double& margin_gib) {
  cmd.add_option("--mem-cap", cap_gib,
                 "GiB a GPU may use in all (its peak: weights, gradients, optimizer state, "
                 "activations and the profile's fixed overhead) before a rank is reported oom; "
                 "default: HBM less --mem-margin")
      ->check(finite_positive(kMaxMemoryGiB, "GiB"));  // so -1, "not given", cannot be given
  cmd.add_option("--mem-margin", margin_gib,
                 "GiB kept free for the allocator (fragmentation); default 5% of HBM "
                 "(docs/configuration.md, Memory cap)")
      ->check(finite_range(0, kMaxMemoryGiB, "GiB"));
}

void check_memory_cap(double cap_gib, double margin_gib) {
  if (cap_gib != -1 && !(cap_gib > 0))
    throw InputError("--mem-cap", std::to_string(cap_gib), "must be a positive GiB count");
  if (margin_gib != -1 && (!(margin_gib >= 0) || margin_gib > 1e6))
    throw InputError("--mem-margin", std::to_string(margin_gib),
                     "must be a GiB count of 0 or more");
  if (margin_gib != -1 && cap_gib != -1)
    throw InputError("--mem-margin", std::to_string(margin_gib),
                     "--mem-cap replaces the whole cap (HBM - allocator margin); give one "
                     "of the two");
}

void set_memory_cap(ExploreOptions& options, double cap_gib, double margin_gib) {
  check_memory_cap(cap_gib, margin_gib);
  options.mem_cap_bytes = cap_gib > 0 ? cap_gib * kGiB : -1;
  options.mem_margin_bytes = margin_gib >= 0 ? margin_gib * kGiB : -1;
}

ExploreBase load_explore_base(const ExploreStudyArgs& args, bool need_own, bool own_any_layout) {
  if (args.jobs_option != nullptr && args.jobs_option->count() > 0 && args.jobs < 1)
    throw InputError("--jobs", std::to_string(args.jobs), "must be 1 or more");
  check_memory_cap(args.mem_cap_gib, args.mem_margin_gib);  // before the study loads
  StudyArgs sa;
  sa.study = args.study;
  sa.profile = args.profile;
  StudyOverrides& o = sa.overrides;
  if (!args.model.empty()) o.model = args.model;
  if (!args.cluster.empty()) o.cluster = args.cluster;
  o.nodes = args.nodes;
  o.offload = args.offload;
  o.balance = args.balance;
  o.moe_routing = args.moe_routing;
  o.moe_dispatcher = args.moe_dispatcher;
  o.moe_fp8_dispatch = args.moe_fp8_dispatch;
  o.moe_shared_expert_overlap = args.moe_shared_expert_overlap;
  // One type stands for the study's (a list is an axis the rows set, SweepAxes): a2a+p2p when
  // listed with its sizes (the rows of the other types drop them, configure()), else the first.
  const std::vector<CpCommType> types = cp_comm_types_of(args);
  const bool hierarchical = args.hierarchical_cp && std::find(types.begin(), types.end(),
                                                              CpCommType::A2AP2P) != types.end();
  if (!types.empty()) o.cp_comm_type = hierarchical ? CpCommType::A2AP2P : types.front();
  o.hierarchical_cp = args.hierarchical_cp;
  ExploreBase base;
  base.args = sa;
  if (need_own) {
    StudyArgs own = sa;
    if (own_any_layout) {  // search chooses them
      own.overrides.tp = own.overrides.pp = 1;
      own.overrides.sizes_from_explorer = true;
    }
    base.own = resolve_study(own, ModelUse::Sweep);
    base.has_own = true;
  }
  // Sizes that always validate: the axes decide the rest, configuration by configuration.
  o.tp = 1;
  o.cp = 1;
  o.pp = 1;
  o.vpp = 1;
  o.sequence_parallel = false;
  o.sizes_from_explorer = true;
  base.study = resolve_study(sa, ModelUse::Sweep);
  base.profile = resolve_profile(sa, base.study);
  return base;
}

ExploreOptions explore_options(const ExploreStudyArgs& args) {
  ExploreOptions options;
  set_memory_cap(options, args.mem_cap_gib, args.mem_margin_gib);
  options.jobs = args.jobs;
  options.tp_across_nodes = args.tp_across_nodes;
  options.design_budget_s = args.design_budget_s;
  return options;
}

void add_sweep_output_options(CLI::App& cmd, SweepOutputs& out) {
  cmd.add_option("--csv", out.csv, "write every row and metric as CSV to this file")
      ->check(file_name());
  cmd.add_flag("--json", out.json, "print JSON (every row, full reports) instead of the table");
  cmd.add_option("--svg", out.svg,
                 "write a chart of throughput against peak memory (Pareto front) to this file")
      ->check(file_name());
  cmd.add_option("--html", out.html,
                 "write an interactive HTML chart of throughput against peak memory (Pareto "
                 "front, hover labels, filters)")
      ->check(file_name());
  cmd.add_option("--top", out.top, "show only the best K rows in the table (default: all)");
  cmd.add_flag("--show-invalid", out.show_invalid,
               "list every invalid row with its reason after the table (default: a count per "
               "reason; --csv and --json always hold every row)");
}

void check_sweep_outputs(const SweepOutputs& out) {
  if (out.top < 0) throw InputError("--top", std::to_string(out.top), "must be 0 (all) or more");
  if (!out.csv.empty()) check_writable("--csv", out.csv);
  if (!out.svg.empty()) check_writable("--svg", out.svg);
  if (!out.html.empty()) check_writable("--html", out.html);
}

namespace {

// The sweep's rows that were simulated, as the HTML report's scatter.
std::string sweep_html(const SweepResult& result, const std::string& title) {
  HtmlSweep sweep;
  sweep.cap_gib = result.mem_cap_gib;  // the peak a rank may reach
  sweep.global_batch_note = global_batch_note(result);
  for (const Evaluation& e : result.rows) {
    if (e.status == RowStatus::Invalid) continue;
    const Configuration& c = e.config;
    sweep.points.push_back({c.schedule, c.tp, c.pp, c.vpp, c.seq, c.mbs, c.microbatches,
                            e.dp * c.mbs * c.microbatches, c.sp, name(c.recompute), name(e.status),
                            e.report.tokens_per_s, e.report.max_peak_memory_gib,
                            e.report.thin_margin});
  }
  return html_report(html_report_data(title, {}, &sweep));
}

}  // namespace

void write_sweep_outputs(const SweepResult& result, const SweepOutputs& out,
                         const std::string& title) {
  OutputFiles files;  // put in place together: a stopped run leaves none of them new
  if (!out.csv.empty()) files.add("--csv", out.csv, sweep_csv(result));
  if (!out.svg.empty()) files.add("--svg", out.svg, sweep_svg(result, title));
  if (!out.html.empty()) files.add("--html", out.html, sweep_html(result, title));
  files.commit();
  std::cout << (out.json ? sweep_json(result) : sweep_table(result, out.top, out.show_invalid));
}

std::string sweep_title(const Study& study) {
  const std::string job = study.model.name + " on " + study.cluster.name;
  return "braid sweep: " + study.name + (study.name == job ? "" : " (" + job + ")");
}

ProgressBar::ProgressBar() : enabled(isatty(STDERR_FILENO) != 0) {}

std::function<void(int, int)> ProgressBar::callback() {
  if (!enabled) return {};
  start = std::chrono::steady_clock::now();
  return [this](int done, int total) { update(done, total); };
}

void ProgressBar::update(int done, int total) {
  using namespace std::chrono;
  const auto now = steady_clock::now();
  const double elapsed = duration<double>(now - start).count();
  if (elapsed < 1.0) return;
  if (shown && done < total && now - last < milliseconds(100)) return;
  last = now;
  shown = true;
  const int width = 30;
  const int filled = total > 0 ? done * width / total : width;
  const double eta = done > 0 ? elapsed * (total - done) / done : 0;
  std::fprintf(stderr, "\r[%s%s] %d/%d %3d%%  ETA %.0f s ", std::string(filled, '#').c_str(),
               std::string(width - filled, ' ').c_str(), done, total,
               total > 0 ? done * 100 / total : 100, eta);
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (!shown) return;
  std::fprintf(stderr, "\r%70s\r", "");
  std::fflush(stderr);
  shown = false;
}

}  // namespace braid::cli
