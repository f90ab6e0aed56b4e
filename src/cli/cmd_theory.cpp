// `braid theory`: Table 1 of the STP paper (DESIGN §6) made executable. For each schedule, the
// closed forms of the PP bubble, TP bubble and peak activation next to what the real lowering and
// engine find in uniform-cost mode, and the difference; or, with --scan, the simulated TP bubble
// along m or p with its least-squares slope (and --svg, a chart of it).
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "../util/pipeline_sizes.hpp"
#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "braid/schedule.hpp"
#include "braid/size_limit.hpp"
#include "braid/theory.hpp"
#include "commands.hpp"
#include "option_values.hpp"
#include "output.hpp"
#include "simulation.hpp"
#include "study_options.hpp"

namespace braid::cli {

namespace {

struct TheoryArgs {
  std::vector<std::string> schedules;
  int pp = 4;
  int microbatches = 16;
  int vpp = 2;
  std::string unit_costs;
  std::string scan;
  int step = 0;
  std::string svg;
  bool json = false;
  std::string study;  // theory on a real study instead of uniform costs
  bool explain = false;
  std::vector<std::string> schedule_csv;
  std::string p2p_runtime = name(P2pRuntime::PostedAhead);  // of the --schedule-csv files
  CLI::Option* runtime_option = nullptr;
  CLI::Option* vpp_option = nullptr;
  CLI::Option* step_option = nullptr;
  CLI::Option* pp_option = nullptr;
  CLI::Option* microbatches_option = nullptr;
};

// One simulation's size: uniform costs, one chunk per virtual stage.
SizeEstimate point_size(const UniformCosts& costs, int pp, int vpp, int microbatches) {
  const double stages = static_cast<double>(pp) * std::max(vpp, 2);
  check_virtual_stages(stages, "--vpp");
  return estimate_size(uniform_cost_model(costs, 1), stages, stages, microbatches);
}

// The size guard of theory mode, before anything is built: every simulation alone (the table's
// one size, or each point of the scan) within the memory limit, and the whole scan (its points
// run one after another) within the hard limit of ops, so it ends in minutes.
void check_theory_size(const TheoryArgs& a, const UniformCosts& costs, const ScanSpec* scan) {
  check_at_most(a.pp, kMaxPp, "--pp", "");
  check_at_most(a.microbatches, kMaxMicrobatches, "--microbatches", "");
  check_at_most(a.vpp, kMaxVpp, "--vpp", "");
  if (scan == nullptr) {
    check_size(point_size(costs, a.pp, a.vpp, a.microbatches), kDefaultMaxSimulationBytes, false,
               "--microbatches", "a smaller --pp or --microbatches", false);
    return;
  }
  const bool over_m = scan->axis == ScanAxis::Microbatches;
  check_at_most(scan->to, over_m ? kMaxMicrobatches : kMaxPp, "--scan", "end of the scan");
  const int step = scan->step > 0 ? scan->step : over_m ? a.pp : 1;
  SizeEstimate whole;
  for (int x = scan->from; x <= scan->to; x += step) {
    const SizeEstimate point =
        point_size(costs, over_m ? a.pp : x, a.vpp, over_m ? x : a.microbatches);
    check_size(point, kDefaultMaxSimulationBytes, false, "--scan",
               "a smaller end of the scan or fixed --pp/--microbatches", false);
    for (std::size_t s = 0; s < a.schedules.size(); ++s) whole = combined(whole, point);
  }
  // The points run one after another: their ops add up (time), their memory does not.
  if (whole.ops > kMaxOps)
    throw InputError("--scan", "size",
                     "the scan's simulations total an estimated " +
                         std::to_string(static_cast<long long>(whole.ops)) +
                         " ops, above the limit of " +
                         std::to_string(static_cast<long long>(kMaxOps)) +
                         "; use a shorter scan, a larger --step or fewer schedules");
}

// --study: the study's own costs; a scan of each rank's exposed TP time and/or the breakdown of
// the exposed time at the study's sizes.
void run_on_study(const TheoryArgs& a) {
  if (!a.unit_costs.empty())
    throw InputError("--study", a.study, "give either --study or --unit-costs, not both");
  if (a.scan.empty() && !a.explain)
    throw InputError("--study", a.study,
                     "with --study give --scan m=A..B (or p=A..B), --explain, "
                     "or both");
  if (!a.svg.empty())
    throw InputError("--svg", a.svg, "draws the uniform-cost scan only (without --study)");
  if (!a.scan.empty() && !a.schedule_csv.empty())
    throw InputError("--scan", a.scan,
                     "a --schedule-csv fixes p and m; scan named schedules, or --explain the file");
  if (a.scan.empty() && a.step_option->count())
    throw InputError("--step", std::to_string(a.step), "needs --scan m=A..B or p=A..B");
  StudyArgs sa;
  sa.study = a.study;
  if (a.pp_option->count()) sa.overrides.pp = a.pp;
  if (a.microbatches_option->count()) sa.overrides.microbatches = a.microbatches;
  if (a.vpp_option->count()) sa.overrides.vpp = a.vpp;
  Study study = resolve_study(sa);
  const Profile profile = resolve_profile(sa, study);
  ScheduleOptions base;
  base.pp = study.parallel.pp;
  base.vpp = study.parallel.vpp;
  base.microbatches = study.training.microbatches;
  base.offload = study.training.offload;
  std::vector<Schedule> files;
  for (const std::string& f : a.schedule_csv) {
    Schedule s = read_schedule_csv(f, a.p2p_runtime);
    if (s.pp != study.parallel.pp || s.microbatches != study.training.microbatches)
      throw InputError("--schedule-csv", f,
                       "has pp " + std::to_string(s.pp) + " and " + std::to_string(s.microbatches) +
                           " microbatches; give --pp " + std::to_string(s.pp) + " --microbatches " +
                           std::to_string(s.microbatches) + " (the study has " +
                           std::to_string(study.parallel.pp) + " and " +
                           std::to_string(study.training.microbatches) + ")");
    files.push_back(std::move(s));
  }
  for (const std::string& name : a.schedules) {
    ScheduleOptions o = base;
    o.vpp = chunks_per_rank(name, o.vpp);
    if (a.explain) files.push_back(make_schedule(name, o));
  }
  std::string out;
  if (!a.scan.empty()) {
    ScanSpec spec = parse_scan(a.scan);
    if (a.step_option->count()) {
      if (a.step < 1) throw InputError("--step", std::to_string(a.step), "must be >= 1");
      spec.step = a.step;
    }
    StudyScan scan = run_study_scan(study, profile, a.schedules, base, spec);
    scan.setting = study_setting(study);
    for (const StudyScanSeries& s : scan.series)
      if (s.points.empty())
        throw InputError("--scan", a.scan,
                         s.schedule + " cannot run at any size of the scan (first: " +
                             (s.skipped.empty() ? std::string("none") : s.skipped.front().second) +
                             ")");
    out += a.json ? study_scan_json(scan) : study_scan_table(scan);
  }
  if (a.explain) {
    std::vector<StudyExplain> explains;
    for (const Schedule& s : files) explains.push_back(explain_study(study, profile, s));
    if (a.json) {
      out += explain_json(explains);
    } else {
      out += (out.empty() ? "" : "\n") + std::string("setting: ") + study_setting(study) + "\n";
      for (const StudyExplain& e : explains) out += "\n" + explain_table(e);
    }
  }
  std::cout << out;
}

void run(const TheoryArgs& a) {
  if (a.schedules.empty() && a.schedule_csv.empty())
    throw InputError("--schedule", "missing", "give schedule names and/or --schedule-csv FILE");
  check_p2p_runtime_applies(a.runtime_option, !a.schedule_csv.empty());
  if (!a.study.empty()) return run_on_study(a);
  if (a.unit_costs.empty())
    throw InputError("--unit-costs", "missing",
                     "give --unit-costs tf,tb,tw,tar[,ma] (uniform costs) or --study S (its "
                     "own costs)");
  if (a.explain) throw InputError("--explain", "given", "needs --study (a real cost model)");
  const UniformCosts costs = parse_unit_costs(a.unit_costs);
  for (const std::string& name : a.schedules) {
    const int fixed = fixed_vpp(name);  // throws InputError for an unknown name
    if (a.vpp_option->count() && fixed != 0 && fixed != a.vpp)
      throw InputError("--vpp", std::to_string(a.vpp),
                       name + " runs " + std::to_string(fixed) +
                           " chunks per rank; --vpp applies " + "to 1f1b-i only");
  }
  if (a.pp < 1) throw InputError("--pp", std::to_string(a.pp), "must be >= 1");
  if (a.microbatches < 1)
    throw InputError("--microbatches", std::to_string(a.microbatches), "must be >= 1");
  if (a.vpp < 2) throw InputError("--vpp", std::to_string(a.vpp), "must be >= 2 (1f1b-i)");
  if (a.scan.empty() && (a.step_option->count() || !a.svg.empty()))
    throw InputError(a.svg.empty() ? "--step" : "--svg", "", "needs --scan m=A..B or p=A..B");
  if (!a.svg.empty()) check_writable("--svg", a.svg);
  if (a.scan.empty()) check_theory_size(a, costs, nullptr);

  ScheduleOptions options;
  util::copy_pipeline_sizes(options, a);
  if (!a.scan.empty() && !a.schedule_csv.empty())
    throw InputError("--scan", a.scan, "a --schedule-csv fixes p and m; scan named schedules");
  if (a.scan.empty()) {
    std::vector<TheoryRow> rows;
    for (const std::string& f : a.schedule_csv)
      rows.push_back(run_theory(read_schedule_csv(f, a.p2p_runtime), costs));
    for (const std::string& name : a.schedules) {
      ScheduleOptions o = options;
      o.vpp = chunks_per_rank(name, o.vpp);
      rows.push_back(run_theory(name, o, costs));
    }
    std::cout << (a.json ? theory_json(rows) : theory_table(rows));
    return;
  }
  ScanSpec spec = parse_scan(a.scan);
  if (a.step_option->count()) {
    if (a.step < 1) throw InputError("--step", std::to_string(a.step), "must be >= 1");
    spec.step = a.step;
  }
  check_theory_size(a, costs, &spec);
  const ScanResult result = run_scan(a.schedules, options, costs, spec);
  for (const ScanSeries& s : result.series)
    if (s.points.empty())
      throw InputError("--scan", a.scan,
                       s.schedule + " cannot run at any size of the scan (see its minimum m)");
  if (!a.svg.empty()) write_file("--svg", a.svg, scan_svg(result));
  std::cout << (a.json ? scan_json(result) : scan_table(result));
}

}  // namespace

void register_theory(CLI::App& app) {
  auto args = std::make_shared<TheoryArgs>();
  CLI::App* cmd = app.add_subcommand(
      "theory",
      "closed forms of the PP bubble, TP bubble and peak activation (STP paper Table 1) against "
      "the simulator in uniform-cost mode; --scan for the TP bubble along m or p");
  cmd->add_option(
         "--schedule,--schedules", args->schedules,
         "schedule name(s), comma-separated: gpipe, 1f1b, zb-h1, 1f1b-i, zb-v, stp (closed "
         "forms) or any other generator name (simulated only)")
      ->delimiter(',');
  args->pp_option =
      cmd->add_option("--pp", args->pp,
                      "pipeline stages p (the fixed p of an m scan; with --study: the study's)")
          ->default_val(4);
  args->microbatches_option =
      cmd->add_option("--microbatches", args->microbatches,
                      "microbatches m (the fixed m of a p scan; with --study: the study's)")
          ->default_val(16);
  args->vpp_option =
      cmd->add_option("--vpp", args->vpp, "chunks per rank of 1f1b-i (default 2)")->default_val(2);
  cmd->add_option(
      "--unit-costs", args->unit_costs,
      "tf,tb,tw,tar[,ma]: per chunk forward, input-gradient, weight-gradient time, "
      "TP collective time of a forward (and of a backward), activations (default ma 1)");
  cmd->add_option("--study", args->study,
                  "run on a study's own costs (a name under configs/studies or a path) instead of "
                  "uniform costs; with --scan and/or --explain");
  cmd->add_flag("--explain", args->explain,
                "with --study: each rank's exposed TP time by unit kind, phase and collective");
  cmd->add_option("--schedule-csv", args->schedule_csv,
                  "a PyTorch compute-only schedule CSV beside the named schedules (repeatable; "
                  "no closed form)");
  args->runtime_option = add_p2p_runtime_option(*cmd, args->p2p_runtime);
  cmd->footer(
      "Examples:\n"
      "  braid theory --schedules 1f1b-i,zb-v,stp --pp 4 --microbatches 16 --unit-costs "
      "1,1,1,0.25\n"
      "  braid theory --schedules stp,zb-v --pp 4 --unit-costs 1,1,1,0.25 --scan m=8..64 --svg "
      "scan.svg\n"
      "  braid theory --study default --schedules stp,1f1b-i --scan m=16..64 --explain\n"
      "See docs/theory.md.");
  cmd->add_flag("--json", args->json, "print JSON instead of a table");
  cmd->add_option("--scan", args->scan,
                  "m=A..B (p fixed by --pp) or p=A..B (m fixed by --microbatches): the simulated "
                  "TP bubble along the scan and its least-squares slope");
  args->step_option =
      cmd->add_option("--step", args->step, "scan step (default: p for an m scan, 1 for a p scan)");
  cmd->add_option("--svg", args->svg, "with --scan: write a chart of the scan (SVG) to FILE")
      ->check(file_name());
  cmd->callback([args] { run(*args); });
}

}  // namespace braid::cli
