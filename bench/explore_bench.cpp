// Explorer speed: a sweep of the default study (qwen2-12.1b on 2 x 8 A800) over tp, pp, seq,
// microbatches, micro-batch size and every schedule — 1,152 combinations, 960 valid — with the
// cache of shared schedules and cost models and re-timed DAGs (the default), with the cache but
// lowering every DAG afresh, and without either, on 1 and 2 threads; and the stages of one
// evaluation (schedule, cost model, lowering, simulation, report, and re-timing the lowered DAG
// instead of lowering it), to show where the time of a sweep goes; and the README's 1,080-row
// sweep with cp 1,2 (BM_SweepCp, CPU time per configuration); and a search of Mixtral 8x7B over
// its expert sizes (BM_SearchMixtral). Run: build/explore_bench
#include <benchmark/benchmark.h>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/explore.hpp"
#include "braid/profile.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "cli_heap.hpp"

namespace {

struct Inputs {
  braid::Study study;
  braid::Profile profile;
  std::vector<braid::Configuration> configs;
};

const Inputs& inputs() {
  static const Inputs in = [] {
    braid_bench::heap_as_the_cli();
    Inputs x;
    x.study = braid::load_study(braid::resolve_config("studies", "default"));
    x.profile = braid::load_profile(x.study.cluster.profile);
    braid::SweepAxes a;
    a.tp = {2, 4, 8};
    a.pp = {2, 4};
    a.vpp = {2};
    a.seq = {2048, 4096, 6144, 8192};
    a.mbs = {1, 2};
    a.microbatches = {32, 64, 128};
    a.sp = {false};
    a.recompute = {braid::Recompute::None};
    a.schedules = braid::schedule_names();
    x.configs = braid::cross_product(a);
    return x;
  }();
  return in;
}

void BM_Sweep(benchmark::State& state) {
  const Inputs& in = inputs();
  braid::ExploreOptions options;
  options.jobs = static_cast<int>(state.range(0));
  options.cache = state.range(1) != 0;
  options.retime = state.range(2) != 0;
  int valid = 0;
  for (auto _ : state) {
    const braid::SweepResult r = braid::sweep(in.study, in.profile, in.configs, options);
    valid = r.valid;
    benchmark::DoNotOptimize(r.rows.data());
  }
  state.counters["valid"] = valid;
  state.counters["configs/s"] =
      benchmark::Counter(static_cast<double>(valid), benchmark::Counter::kIsIterationInvariantRate);
}

// The README's 1,080-row default sweep (tp 2,4,8 x pp 2,4 x seq 2048..8192 x m 32,64,128 x mbs
// 1,2 x six schedules) with the cp axis 1,2: 2,160 configurations, the cp 2 half with half the
// dp. Reported as CPU time per configuration (issue 36's target: under 1 ms), the sweep's default
// options (cache on, no re-timing), one thread.
void BM_SweepCp(benchmark::State& state) {
  static const std::vector<braid::Configuration> configs = [] {
    braid::SweepAxes a;
    a.tp = {2, 4, 8};
    a.cp = {1, 2};
    a.pp = {2, 4};
    a.vpp = {2};
    a.seq = {2048, 3072, 4096, 6144, 8192};
    a.mbs = {1, 2};
    a.microbatches = {32, 64, 128};
    a.sp = {false};
    a.recompute = {braid::Recompute::None};
    a.schedules = {"1f1b", "1f1b-i", "zb-h1", "zb-v", "stp", "dualpipe-v"};
    return braid::cross_product(a);
  }();
  const Inputs& in = inputs();
  braid::ExploreOptions options;
  options.jobs = 1;
  int valid = 0;
  for (auto _ : state) {
    const braid::SweepResult r = braid::sweep(in.study, in.profile, configs, options);
    valid = r.valid;
    benchmark::DoNotOptimize(r.rows.data());
  }
  state.counters["configs"] = static_cast<double>(configs.size());
  state.counters["valid"] = valid;
  // CPU seconds per configuration, shown as its inverse rate: "per_config" in s.
  state.counters["per_config"] = benchmark::Counter(
      static_cast<double>(configs.size()),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// A Mixture-of-Experts search: Mixtral 8x7B on 64 H100 (8 DGX nodes), seq 4096, global batch
// 512, SP on, over tp, pp, ep (every divisor of the 8 experts that fits), etp 1 and 2, mbs 1 and
// 2 and the schedules 1f1b and 1f1b-i: what `braid search --model mixtral-8x7b --cluster dgx-h100
// --nodes 8 --global-batch 512 --seq 4096 --sp on --mbs 1,2 --etp 1,2 --schedules 1f1b,1f1b-i`
// runs, on 2 threads (the target: under 15 s wall on 2 cores; docs/moe.md).
void BM_SearchMixtral(benchmark::State& state) {
  static const braid::Study study = [] {
    braid::StudyOverrides o;
    o.model = "mixtral-8x7b";
    o.cluster = "dgx-h100";
    o.nodes = 8;
    o.seq = 4096;
    return braid::load_study(braid::resolve_config("studies", "job-defaults"), o);
  }();
  static const braid::Profile profile = braid::load_profile(study.cluster.profile);
  braid::SearchSpace space;
  space.gpus = study.cluster.gpus();
  space.global_batch = 512;
  space.mbs = {1, 2};
  space.sp = {true};
  space.etp = {1, 2};
  space.schedules = {"1f1b", "1f1b-i"};
  braid::ExploreOptions options;
  options.jobs = 2;
  int simulated = 0, candidates = 0;
  for (auto _ : state) {
    const braid::SearchResult r = braid::search(study, profile, space, options);
    simulated = r.simulated;
    candidates = r.candidates;
    benchmark::DoNotOptimize(r.best.data());
  }
  state.counters["candidates"] = candidates;
  state.counters["simulated"] = simulated;
}

// The stages of one mid-size evaluation: stp, tp 4, pp 4, seq 4096, m 128.
struct One {
  braid::Study study;
  braid::ScheduleOptions options;
};
const One& one() {
  static const One o = [] {
    braid::Configuration c;
    c.schedule = "stp";
    c.tp = 4;
    c.pp = 4;
    c.vpp = 2;
    c.seq = 4096;
    c.microbatches = 128;
    One x;
    x.study = braid::configure(inputs().study, c);
    x.options.pp = 4;
    x.options.vpp = 2;
    x.options.microbatches = 128;
    return x;
  }();
  return o;
}

void BM_Stage(benchmark::State& state) {
  const One& o = one();
  const braid::Profile& profile = inputs().profile;
  const braid::Schedule schedule = braid::make_schedule("stp", o.options);
  const braid::CostModel cost = braid::build_cost_model(o.study, profile, 8);
  const braid::Dag dag = braid::lower(schedule, cost);
  const braid::Timeline timeline = braid::simulate(dag);
  braid::Dag retimed = dag;
  braid::RetimeMemo memo;
  for (auto _ : state) {
    switch (state.range(0)) {
      case 0:
        benchmark::DoNotOptimize(braid::make_schedule("stp", o.options));
        break;
      case 1:
        benchmark::DoNotOptimize(braid::build_cost_model(o.study, profile, 8));
        break;
      case 2:
        benchmark::DoNotOptimize(braid::lower(schedule, cost));
        break;
      case 3:
        benchmark::DoNotOptimize(braid::simulate(dag));
        break;
      case 4:
        benchmark::DoNotOptimize(braid::make_report("s", schedule, cost, dag, timeline));
        break;
      case 5:
        benchmark::DoNotOptimize(braid::retime(retimed, schedule, cost));
        break;
      case 6:  // as a sweep does it: the schedule's checks and P2P batch plan kept
        benchmark::DoNotOptimize(braid::retime(retimed, schedule, cost, {}, &memo));
        break;
    }
  }
  static const char* const names[] = {"schedule", "cost_model", "lower",      "simulate",
                                      "report",   "retime",     "retime_memo"};
  state.SetLabel(names[state.range(0)]);
}

}  // namespace

BENCHMARK(BM_Sweep)
    ->ArgNames({"jobs", "cache", "retime"})
    ->Args({1, 1, 1})
    ->Args({2, 1, 1})
    ->Args({1, 1, 0})
    ->Args({2, 1, 0})
    ->Args({1, 0, 0})
    ->Args({2, 0, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_SweepCp)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(BM_Stage)->DenseRange(0, 6)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SearchMixtral)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
