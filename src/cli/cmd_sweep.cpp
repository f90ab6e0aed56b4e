// `braid sweep`: the cross product of sizes and schedules of one study, evaluated in parallel;
// a ranked table (invalid rows listed after it with their reasons), CSV, JSON and an SVG chart.
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "braid/error.hpp"
#include "braid/explore.hpp"
#include "braid/schedule.hpp"
#include "commands.hpp"
#include "distributed.hpp"
#include "explore_options.hpp"
#include "option_values.hpp"
#include "output.hpp"

namespace braid::cli {

namespace {

struct SweepArgs {
  ExploreStudyArgs study;
  std::string tp, cp, ep, etp, pp, vpp, seq, mbs, microbatches, sp, recompute, schedules;
  std::string fixed_global_batch;
  SweepOutputs out;
  std::string shard, shard_out;
  CLI::App* cmd = nullptr;
  // Given on the command line (an empty value is then an empty list, an error).
  bool given(const char* option) const { return cmd->get_option(option)->count() > 0; }
};

// --fixed-global-batch's value: samples, a positive integer (as the lists' items are).
int global_batch_value(const std::string& text) {
  const bool digits = !text.empty() && text.size() <= 9 &&
                      text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoi(text) < 1)
    throw InputError("--fixed-global-batch", text,
                     "must be a positive integer: the samples of one iteration");
  return std::stoi(text);
}

void run_sweep(const SweepArgs& a) {
  // Parse every list before any work.
  SweepAxes axes;
  std::optional<std::vector<int>> tp, cp, ep, etp, pp, vpp, seq, mbs, m;
  std::optional<std::vector<bool>> sp;
  std::optional<std::vector<Recompute>> rc;
  std::optional<std::vector<std::string>> schedules;
  auto ints = [&a](const char* opt, const std::string& text) {
    return a.given(opt) ? std::optional(parse_int_list(opt, text)) : std::nullopt;
  };
  tp = ints("--tp", a.tp);
  cp = ints("--cp", a.cp);
  ep = ints("--ep", a.ep);
  etp = ints("--etp", a.etp);
  pp = ints("--pp", a.pp);
  vpp = ints("--vpp", a.vpp);
  seq = ints("--seq", a.seq);
  mbs = ints("--mbs", a.mbs);
  m = ints("--microbatches", a.microbatches);
  const int fixed_batch =
      a.given("--fixed-global-batch") ? global_batch_value(a.fixed_global_batch) : 0;
  if (fixed_batch > 0 && m)
    throw InputError("--fixed-global-batch", a.fixed_global_batch,
                     "derives the microbatches per replica (B / (mbs x dp)) and --microbatches "
                     "gives them; give one of the two");
  if (a.given("--sp")) sp = parse_sp_list("--sp", a.sp);
  if (a.given("--recompute")) rc = parse_recompute_list("--recompute", a.recompute);
  if (a.given("--schedules")) schedules = parse_schedule_list("--schedules", a.schedules);
  const ProcessGroup group = world_group();
  const bool root = group.rank == 0;
  std::pair<int, int> shard{0, 0};
  if (a.given("--shard")) {
    shard = parse_shard("--shard", a.shard);
    if (a.shard_out.empty())
      throw InputError("--shard", a.shard,
                       "needs --shard-out FILE (the shard's rows for "
                       "braid merge)");
    if (group.size > 1)
      throw InputError("--shard", a.shard, "runs as one process; use either mpirun or --shard");
    if (!a.out.csv.empty() || !a.out.svg.empty() || !a.out.html.empty() || a.out.json ||
        a.out.top != 0 || a.out.show_invalid)
      throw InputError("--shard", a.shard,
                       "writes only --shard-out; give --csv, --svg, --html, --json, --top and "
                       "--show-invalid to braid merge");
    check_writable("--shard-out", a.shard_out);
  } else if (!a.shard_out.empty()) {
    throw InputError("--shard-out", a.shard_out, "needs --shard i/N");
  }
  agree(group, [&] {  // only rank 0 writes them
    if (root) check_sweep_outputs(a.out);
  });

  const bool need_own = !tp || !cp || !pp || !vpp || !sp || !schedules;
  const ExploreBase base = load_explore_base(a.study, need_own);
  const Study& own = base.has_own ? base.own : base.study;
  axes.tp = tp.value_or(std::vector<int>{own.parallel.tp});
  axes.cp = cp.value_or(std::vector<int>{own.parallel.cp});
  axes.cp_comm_types = cp_comm_types_of(a.study);
  if (base.study.model.moe) {
    // An MoE model's expert sizes are axes (the study's by default, its etp 0 the row's tp); a
    // dense model has none, whatever --ep and --etp say: its rows are as without them.
    axes.ep = ep.value_or(std::vector<int>{base.study.parallel.ep});
    axes.etp = etp.value_or(std::vector<int>{base.study.parallel.etp});
  }
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
  std::vector<Configuration> configs = cross_product(axes);
  if (fixed_batch > 0) {
    options.fixed_global_batch = fixed_batch;
    configs = at_global_batch(std::move(configs), base.study, fixed_batch);
  }
  check_memory_in_flight(base.study, configs, options);  // before any is built
  if (shard.second > 0) {
    SweepShard part;
    try {
      part = sweep_shard(base.study, base.profile, configs, options, shard.first, shard.second,
                         sweep_title(base.study));
    } catch (...) {
      bar.finish();
      throw;
    }
    bar.finish();
    write_file("--shard-out", a.shard_out, encode_shard(part));
    std::cout << "shard " << part.shard << "/" << part.shards << ": " << part.rows.size() << " of "
              << part.configurations << " configurations written to " << a.shard_out
              << " (join the shards with braid merge)\n";
    return;
  }
  SweepResult result;
  try {
    result = sweep(base.study, base.profile, configs, options);
  } catch (...) {
    bar.finish();
    throw;
  }
  bar.finish();
  if (!root) return;  // every rank holds the result; rank 0 writes it
  std::vector<std::string> varied;
  auto vary = [&varied](bool given, const char* key) {
    if (given) varied.emplace_back(key);
  };
  vary(tp.has_value(), "tp");
  vary(cp.has_value(), "cp");
  vary(ep.has_value(), "ep");
  vary(etp.has_value(), "etp");
  vary(pp.has_value(), "pp");
  vary(vpp.has_value(), "vpp");
  vary(seq.has_value(), "seq");
  vary(mbs.has_value(), "mbs");
  vary(m.has_value() || fixed_batch > 0, "m");  // derived from the global batch
  vary(sp.has_value(), "sp");
  vary(rc.has_value(), "recompute");
  vary(schedules.has_value(), "schedules");
  if (!a.out.json) std::cout << job_defaults_text(base.args, own, varied);
  write_sweep_outputs(result, a.out, sweep_title(base.study));
}

}  // namespace

void register_sweep(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "evaluate the cross product of sizes and schedules of a study: ranked table, invalid "
      "combinations with their reasons, CSV/JSON/SVG");
  cmd->footer(
      "Examples:\n"
      "  braid sweep --tp 4,8 --pp 2,4 --schedules 1f1b-i,stp --csv sweep.csv --svg sweep.svg\n"
      "  braid sweep --study default --microbatches 16,32,64 --sp on,off --recompute "
      "none,selective --top 10\n"
      "  braid sweep --tp 2,4,8 --pp 2,4 --mbs 1,2 --fixed-global-batch 64   (every row at 64 "
      "samples)\n"
      "  braid sweep --tp 4,8 --pp 2,4 --shard 2/8 --shard-out part2.bin   (then: braid merge "
      "part*.bin)\n"
      "See docs/explore.md and, for many machines, docs/distributed.md.");
  args->cmd = cmd;
  add_explore_study_options(*cmd, args->study);
  cmd->add_option("--tp", args->tp, "tensor-parallel sizes, e.g. 2,4,8 (default: the study's)");
  cmd->add_option("--cp", args->cp,
                  "context-parallel sizes, e.g. 1,2,4 (default: the study's); dp = GPUs / (tp x "
                  "cp x pp)");
  cmd->add_option("--ep", args->ep,
                  "expert-parallel sizes of a Mixture-of-Experts model, e.g. 1,2,4 (default: "
                  "the study's; a dense model ignores it)");
  cmd->add_option("--etp", args->etp,
                  "expert tensor-parallel sizes of a Mixture-of-Experts model, e.g. 1,2 "
                  "(default: the study's, else the row's tp; a dense model ignores it)");
  cmd->add_option("--pp", args->pp, "pipeline-parallel sizes (default: the study's)");
  cmd->add_option("--vpp", args->vpp,
                  "chunks per rank for 1f1b-i and combined-1f1b (other schedules fix theirs; "
                  "default: the study's)");
  cmd->add_option("--seq", args->seq, "sequence lengths (default: the study's)");
  cmd->add_option("--mbs", args->mbs, "micro-batch sizes (default: the study's)");
  cmd->add_option("--microbatches", args->microbatches,
                  "microbatches per iteration per data-parallel replica (default: the study's)");
  cmd->add_option("--fixed-global-batch", args->fixed_global_batch,
                  "samples per iteration every row runs: microbatches per replica = B / (mbs x "
                  "dp), a configuration where that does not divide is invalid; instead of "
                  "--microbatches");
  cmd->add_option("--sp", args->sp,
                  "sequence parallelism: on, off or on,off (default: the study's)");
  cmd->add_option("--recompute", args->recompute,
                  "recomputation modes: none, selective, full (default: the study's)");
  cmd->add_option("--schedules", args->schedules,
                  "all, or a list of schedule names (default: the study's schedules)");
  add_sweep_output_options(*cmd, args->out);
  cmd->add_option("--shard", args->shard,
                  "i/N: evaluate only shard i of N of the grid (a deterministic split by cost) "
                  "and write it to --shard-out; braid merge joins the N files");
  cmd->add_option("--shard-out", args->shard_out, "the shard file written by --shard")
      ->check(file_name());
  cmd->callback([args] { run_sweep(*args); });
}

}  // namespace braid::cli
