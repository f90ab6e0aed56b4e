// `braid sweep`: the cross product of sizes and schedules of one study, evaluated in parallel;
// a ranked table (invalid rows listed after it with their reasons), CSV, JSON and an SVG chart.
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "braid/html_report.hpp"
#include "braid/schedule.hpp"
#include "commands.hpp"
#include "distributed.hpp"
#include "explore_options.hpp"
#include "output.hpp"

namespace braid::cli {

namespace {

struct SweepArgs {
  ExploreStudyArgs study;
  std::string tp, pp, vpp, seq, mbs, microbatches, sp, recompute, schedules;
  std::string csv, svg, html;
  bool json = false;
  int top = 0;
  CLI::App* cmd = nullptr;
  // Given on the command line (an empty value is then an empty list, an error).
  bool given(const char* option) const { return cmd->get_option(option)->count() > 0; }
};

const char* recompute_name(Recompute r) {
  return r == Recompute::Full ? "full" : r == Recompute::Selective ? "selective" : "none";
}

// The sweep's rows that were simulated, as the HTML report's scatter.
std::string sweep_html(const SweepResult& result, const std::string& study) {
  HtmlSweep sweep;
  sweep.cap_gib = result.mem_cap_gib + result.fixed_overhead_gib;  // in peak terms
  for (const Evaluation& e : result.rows) {
    if (e.status == RowStatus::Invalid) continue;
    const Configuration& c = e.config;
    sweep.points.push_back({c.schedule, c.tp, c.pp, c.vpp, c.seq, c.mbs, c.microbatches, c.sp,
                            recompute_name(c.recompute), name(e.status), e.report.tokens_per_s,
                            e.report.max_peak_memory_gib});
  }
  return html_report(html_report_data("braid sweep: " + study, {}, &sweep));
}

void run_sweep(const SweepArgs& a) {
  if (a.top < 0) throw InputError("--top", std::to_string(a.top), "must be 0 (all) or more");
  // Parse every list before any work.
  SweepAxes axes;
  std::optional<std::vector<int>> tp, pp, vpp, seq, mbs, m;
  std::optional<std::vector<bool>> sp;
  std::optional<std::vector<Recompute>> rc;
  std::optional<std::vector<std::string>> schedules;
  auto ints = [&a](const char* opt, const std::string& text) {
    return a.given(opt) ? std::optional(parse_int_list(opt, text)) : std::nullopt;
  };
  tp = ints("--tp", a.tp);
  pp = ints("--pp", a.pp);
  vpp = ints("--vpp", a.vpp);
  seq = ints("--seq", a.seq);
  mbs = ints("--mbs", a.mbs);
  m = ints("--microbatches", a.microbatches);
  if (a.given("--sp")) sp = parse_sp_list("--sp", a.sp);
  if (a.given("--recompute")) rc = parse_recompute_list("--recompute", a.recompute);
  if (a.given("--schedules")) schedules = parse_schedule_list("--schedules", a.schedules);
  const ProcessGroup group = world_group();
  const bool root = group.rank == 0;
  agree(group, [&] {  // only rank 0 writes them
    if (root && !a.csv.empty()) check_writable("--csv", a.csv);
    if (root && !a.svg.empty()) check_writable("--svg", a.svg);
    if (root && !a.html.empty()) check_writable("--html", a.html);
  });

  const bool need_own = !tp || !pp || !vpp || !sp || !schedules;
  const ExploreBase base = load_explore_base(a.study, need_own);
  const Study& own = base.has_own ? base.own : base.study;
  axes.tp = tp.value_or(std::vector<int>{own.parallel.tp});
  axes.pp = pp.value_or(std::vector<int>{own.parallel.pp});
  axes.vpp = vpp.value_or(std::vector<int>{own.parallel.vpp});
  axes.seq = seq.value_or(std::vector<int>{base.study.training.seq});
  axes.mbs = mbs.value_or(std::vector<int>{base.study.training.micro_batch_size});
  axes.microbatches = m.value_or(std::vector<int>{base.study.training.microbatches});
  axes.sp = sp.value_or(std::vector<bool>{own.parallel.sequence_parallel});
  axes.recompute = rc.value_or(std::vector<Recompute>{base.study.training.recompute});
  axes.schedules = schedules.value_or(own.schedules.empty() ? schedule_names() : own.schedules);

  ExploreOptions options = explore_options(a.study);
  options.group = group;
  if (options.jobs == 0) options.jobs = default_jobs();
  ProgressBar bar;
  if (!root) bar.enabled = false;
  options.progress = bar.callback();
  SweepResult result;
  try {
    result = sweep(base.study, base.profile, cross_product(axes), options);
  } catch (...) {
    bar.finish();
    throw;
  }
  bar.finish();
  if (!root) return;  // every rank holds the result; rank 0 writes it

  if (!a.csv.empty()) write_file("--csv", a.csv, sweep_csv(result));
  if (!a.svg.empty())
    write_file("--svg", a.svg,
               sweep_svg(result, "braid sweep: " + base.study.name + " (" + base.study.model.name +
                                     " on " + base.study.cluster.name + ")"));
  if (!a.html.empty()) write_file("--html", a.html, sweep_html(result, base.study.name));
  std::cout << (a.json ? sweep_json(result) : sweep_table(result, a.top));
}

}  // namespace

void register_sweep(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "evaluate the cross product of sizes and schedules of a study: ranked table, invalid "
      "combinations with their reasons, CSV/JSON/SVG");
  args->cmd = cmd;
  add_explore_study_options(*cmd, args->study);
  cmd->add_option("--tp", args->tp, "tensor-parallel sizes, e.g. 2,4,8 (default: the study's)");
  cmd->add_option("--pp", args->pp, "pipeline-parallel sizes (default: the study's)");
  cmd->add_option("--vpp", args->vpp,
                  "chunks per rank for 1f1b-i (other schedules fix theirs; default: the study's)");
  cmd->add_option("--seq", args->seq, "sequence lengths (default: the study's)");
  cmd->add_option("--mbs", args->mbs, "micro-batch sizes (default: the study's)");
  cmd->add_option("--microbatches", args->microbatches,
                  "microbatches per iteration per data-parallel replica (default: the study's)");
  cmd->add_option("--sp", args->sp,
                  "sequence parallelism: on, off or on,off (default: the study's)");
  cmd->add_option("--recompute", args->recompute,
                  "recomputation modes: none, selective, full (default: the study's)");
  cmd->add_option("--schedules", args->schedules,
                  "all, or a list of schedule names (default: the study's schedules)");
  cmd->add_option("--csv", args->csv, "write every row and metric as CSV to this file");
  cmd->add_flag("--json", args->json, "print JSON (every row, full reports) instead of the table");
  cmd->add_option("--svg", args->svg,
                  "write a chart of throughput against peak memory (Pareto front) to this file");
  cmd->add_option("--html", args->html,
                  "write an interactive HTML chart of throughput against peak memory (Pareto "
                  "front, hover labels, filters)");
  cmd->add_option("--top", args->top, "show only the best K rows in the table (default: all)");
  cmd->callback([args] { run_sweep(*args); });
}

}  // namespace braid::cli
