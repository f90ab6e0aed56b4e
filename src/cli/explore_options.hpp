// Command-line pieces shared by `sweep` and `search`: comma-separated list values (each item
// checked, one InputError naming the option otherwise), the base study (loaded so that its own
// sizes cannot make it fail before the sweep decides which combinations are valid), explorer
// options (--mem-cap, --mem-margin, --jobs, --tp-across-nodes, --offload, --balance) and a progress
// bar on stderr.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "braid/explore.hpp"
#include "study_options.hpp"

namespace braid::cli {

// "2,4,8" -> {2, 4, 8}: every item a positive integer, duplicates dropped (first kept).
std::vector<int> parse_int_list(const std::string& option, const std::string& text);
std::vector<bool> parse_sp_list(const std::string& option, const std::string& text);  // on,off
std::vector<Recompute> parse_recompute_list(const std::string& option, const std::string& text);
std::vector<CpCommType> parse_cp_comm_type_list(const std::string& option, const std::string& text);
// "all" or names from schedule_names(), and "designed".
std::vector<std::string> parse_schedule_list(const std::string& option, const std::string& text);

// The study file and model/cluster/profile/nodes overrides shared by sweep and search.
struct ExploreStudyArgs {
  std::string study;  // empty: StudyArgs::study's rule (study_file_for)
  std::string model, cluster, profile;
  std::optional<int> nodes;
  std::optional<double> offload;
  std::optional<StageBalance> balance;
  std::optional<std::string> moe_routing;         // --moe-routing (StudyOverrides::moe_routing)
  std::optional<MoeDispatcher> moe_dispatcher;    // --moe-dispatcher (StudyOverrides's)
  std::optional<bool> moe_fp8_dispatch;           // --moe-fp8-dispatch (StudyOverrides's)
  std::optional<bool> moe_shared_expert_overlap;  // --moe-shared-expert-overlap
  // --cp-comm-type's list (more than one: an axis) and --hierarchical-cp-sizes.
  std::string cp_comm_types;
  std::optional<std::vector<int>> hierarchical_cp;
  double mem_cap_gib = -1;
  double mem_margin_gib = -1;
  int jobs = 0;
  bool tp_across_nodes = false;
  double design_budget_s = 60;  // ExploreOptions::design_budget_s
  CLI::Option* jobs_option = nullptr;
};
void add_explore_study_options(CLI::App& cmd, ExploreStudyArgs& args);
// The types of --cp-comm-type as given to sweep or search; empty when not given.
std::vector<CpCommType> cp_comm_types_of(const ExploreStudyArgs& args);

struct ExploreBase {
  Study study;  // the study with tp = pp = vpp = 1, sp off (sizes come from the axes)
  Study own;    // the study's own sizes (for axes not given); valid only if `has_own`
  bool has_own = false;
  Profile profile;
  StudyArgs args;  // the study options as given, for job_defaults_text
};
// `need_own`: some axis defaults to the study's value, so the study must be valid as written;
// `own_any_layout`: its tp and pp are not used (search chooses them), so they need not fit.
ExploreBase load_explore_base(const ExploreStudyArgs& args, bool need_own,
                              bool own_any_layout = false);
ExploreOptions explore_options(const ExploreStudyArgs& args);
// --mem-cap and --mem-margin (explore.hpp, MemoryCap), alike for the commands that simulate and
// those that explore; -1 is "not given".
void add_memory_cap_options(CLI::App& cmd, double& cap_gib, double& margin_gib);
// Refuses a cap that is not a positive GiB count and a margin that is not one of 0 or more or is
// given with the cap (which replaces the whole formula).
void check_memory_cap(double cap_gib, double margin_gib);
// Checks them, then sets `options`' cap and margin.
void set_memory_cap(ExploreOptions& options, double cap_gib, double margin_gib);

// What a sweep (or `braid merge` of its shards) writes: --csv, --svg files and the table or JSON
// on stdout. Paths are checked writable by check_sweep_outputs() before any work.
struct SweepOutputs {
  std::string csv, svg, html;
  bool json = false;
  int top = 0;
  bool show_invalid = false;  // the table lists every invalid row, not a count per reason
};
// --csv, --json, --svg, --html, --top and --show-invalid, alike on sweep and on merge.
void add_sweep_output_options(CLI::App& cmd, SweepOutputs& out);
void check_sweep_outputs(const SweepOutputs& out);
void write_sweep_outputs(const SweepResult& result, const SweepOutputs& out,
                         const std::string& title);
// The chart title of a sweep of `study`.
std::string sweep_title(const Study& study);

// A progress bar with ETA on stderr, drawn only when stderr is a terminal and the work has
// taken more than a second; erased by finish(). Calls come one at a time (ExploreOptions).
struct ProgressBar {
  bool enabled = false;  // stderr is a terminal
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last{};
  bool shown = false;
  ProgressBar();
  void update(int done, int total);
  void finish();
  // The callback for ExploreOptions::progress; empty when not enabled.
  std::function<void(int, int)> callback();
};

}  // namespace braid::cli
