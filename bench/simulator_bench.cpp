// Simulator speed: simulated unit ops per second (single thread) and lowering time on
// qwen2-26.3b (configs/studies/qwen2-26.3b-a800x32 with pp 8, 8 nodes, m 256) and the stp
// schedule: 16 virtual stages, 30 layers, embedding + LM head, sequence parallelism, contention.
// BM_Llama405B: the whole chain on a 2048-GPU Llama-3.1-405B job.
//   build/simulator_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/profile.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"
#include "cli_heap.hpp"

namespace {

// A schedule of the qwen2-26.3b study (`o` overrides it) with its cost model and its DAG.
struct Fixture {
  braid::Schedule schedule;
  braid::CostModel cost;
  braid::Dag dag;
  Fixture(const braid::StudyOverrides& o, const std::string& name,
          const braid::LowerOptions& lower = {}) {
    braid_bench::heap_as_the_cli();
    const braid::Study study =
        braid::load_study(braid::resolve_config("studies", "qwen2-26.3b-a800x32"), o);
    const braid::Profile profile =
        braid::load_profile(braid::resolve_config("profiles", study.cluster.profile));
    braid::ScheduleOptions options;
    options.pp = study.parallel.pp;
    options.vpp = study.parallel.vpp;
    options.microbatches = study.training.microbatches;
    schedule = braid::make_schedule(name, options);
    cost = braid::build_cost_model(study, profile, schedule.virtual_stages());
    dag = braid::lower(schedule, cost, lower);
  }
};

// stp on 8 nodes, pp 8, m 256: the benchmarks' common case.
braid::StudyOverrides stp_case() {
  braid::StudyOverrides o;
  o.pp = 8;
  o.nodes = 8;
  o.microbatches = 256;
  return o;
}

const Fixture& fixture() {
  static const Fixture f(stp_case(), "stp");
  return f;
}

void rate(benchmark::State& state, const braid::Dag& dag) {
  state.counters["ops"] = static_cast<double>(dag.size());
  state.counters["edges"] = static_cast<double>(dag.edges());
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(dag.size()) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

template <class T>
double bytes(const std::vector<T>& v) {
  return static_cast<double>(v.size() * sizeof(T));
}

// What the Dag and its Timeline hold per op (the arrays that grow with the iteration; reserved
// capacity that is never written costs no memory and is not counted).
double bytes_per_op(const braid::Dag& d, const braid::Timeline& t) {
  const double total = bytes(d.ops) + bytes(d.pred_begin) + bytes(d.preds) + bytes(d.stream_begin) +
                       bytes(d.stream_ops) + bytes(d.stream_prev) + bytes(t.start_s) +
                       bytes(t.end_s);
  return total / d.size();
}

// simulate(): the profile's contention factors are 1.0, so this is the topological fast path
// (contention on or off alike).
void BM_Simulate(benchmark::State& state) {
  const Fixture& f = fixture();
  braid::SimOptions options;
  options.contention = state.range(0) != 0;
  braid::Timeline t;
  for (auto _ : state) {
    t = braid::simulate(f.dag, options);
    benchmark::DoNotOptimize(t.iteration_time_s);
  }
  rate(state, f.dag);
  state.counters["fast_path"] = t.fast_path ? 1 : 0;
  state.counters["bytes_per_op"] = bytes_per_op(f.dag, t);
}
BENCHMARK(BM_Simulate)->Arg(1)->Arg(0)->ArgName("contention")->Unit(benchmark::kMillisecond);

// simulate() on the CLI's unit-level qwen2 run (qwen2-26.3b on h100x64, tp 8, pp 8, m 256,
// 1f1b-i, zero-time ops folded away as the CLI does: slowdowns 1.0, so the fast path, with memory
// on the compute stream alone).
void BM_SimulateQwen2H100(benchmark::State& state) {
  static const braid::Dag dag = [] {
    braid::StudyOverrides o;
    o.cluster = "h100x64";
    o.tp = 8;
    o.pp = 8;
    o.microbatches = 256;
    braid::LowerOptions lower;
    lower.fold_zero_time = true;
    return Fixture(o, "1f1b-i", lower).dag;
  }();
  braid::Timeline t;
  for (auto _ : state) {
    t = braid::simulate(dag);
    benchmark::DoNotOptimize(t.iteration_time_s);
  }
  rate(state, dag);
  state.counters["fast_path"] = t.fast_path ? 1 : 0;
}
BENCHMARK(BM_SimulateQwen2H100)->Unit(benchmark::kMillisecond);

// The discrete-event engine on the same DAG (what runs when something contends): heap events
// (op completions, re-timings) per second.
void BM_SimulateEvents(benchmark::State& state) {
  const Fixture& f = fixture();
  std::int64_t events = 0;
  for (auto _ : state) {
    braid::Timeline t = braid::simulate_events(f.dag);
    events = t.events;
    benchmark::DoNotOptimize(t.iteration_time_s);
  }
  rate(state, f.dag);
  state.counters["events"] = static_cast<double>(events);
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SimulateEvents)->Unit(benchmark::kMillisecond);

// Schedule + cost model -> Dag.
void BM_Lower(benchmark::State& state) {
  const Fixture& f = fixture();
  for (auto _ : state) {
    braid::Dag dag = braid::lower(f.schedule, f.cost);
    benchmark::DoNotOptimize(dag.ops.data());
  }
  rate(state, f.dag);
}
BENCHMARK(BM_Lower)->Unit(benchmark::kMillisecond);

// The report on a simulated timeline (idle attribution + critical path).
void BM_Report(benchmark::State& state) {
  const Fixture& f = fixture();
  const braid::Timeline t = braid::simulate(f.dag);
  for (auto _ : state) {
    braid::Report r = braid::make_report("bench", f.schedule, f.cost, f.dag, t);
    benchmark::DoNotOptimize(r.iteration_time_s);
  }
  rate(state, f.dag);
}
BENCHMARK(BM_Report)->Unit(benchmark::kMillisecond);

// One job as `braid simulate` runs it after reading the files: schedule, cost model, lowering,
// simulation (the profile's contention: the event engine) and report.
void simulate_job(benchmark::State& state, const braid::StudyOverrides& o, const char* schedule) {
  braid_bench::heap_as_the_cli();
  const braid::Study study = braid::load_study(braid::resolve_config("studies", "job-defaults"), o);
  const braid::Profile profile =
      braid::load_profile(braid::resolve_config("profiles", study.cluster.profile));
  braid::ScheduleOptions options;
  options.pp = study.parallel.pp;
  options.vpp = study.parallel.vpp;
  options.microbatches = study.training.microbatches;
  braid::LowerOptions lower;
  lower.fold_zero_time = true;  // as the CLI lowers
  int ops = 0;
  for (auto _ : state) {
    const braid::Schedule s = braid::make_schedule(schedule, options);
    const braid::CostModel cost = braid::build_cost_model(study, profile, s.virtual_stages());
    const braid::Dag dag = braid::lower(s, cost, lower);
    const braid::Timeline t = braid::simulate(dag);
    const braid::Report r = braid::make_report("bench", s, cost, dag, t);
    ops = dag.size();
    benchmark::DoNotOptimize(r.iteration_time_s);
  }
  state.counters["ops"] = ops;
  state.counters["gpus"] = study.cluster.gpus();
}

// A 2048-GPU Llama-3.1-405B-shaped job: the job defaults (dgx-h100, SP on, bf16, distributed
// optimizer) with llama3.1-405b on 256 nodes, tp 8, pp 8, vpp 8, cp 2 (p2p), micro-batch 1, 128
// microbatches per replica (dp 16), 1f1b-i. The target (README, speed): under 1 s of CPU.
void BM_Llama405B(benchmark::State& state) {
  braid::StudyOverrides o;
  o.model = "llama3.1-405b";
  o.cluster = "dgx-h100";
  o.nodes = 256;
  o.tp = 8;
  o.pp = 8;
  o.vpp = 8;
  o.cp = 2;
  o.mbs = 1;
  o.microbatches = 128;
  simulate_job(state, o, "1f1b-i");
}
BENCHMARK(BM_Llama405B)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

// DeepSeek-V3 in its published setting (technical report, section 3.2): 2048 GPUs, tp 1, pp 16,
// ep 64, dp 128, DualPipeV, 120 microbatches of one 4,096-token sequence per replica (the
// 15,360-sequence batch over dp 128). The target (README, speed): under 2 s of CPU.
void BM_DeepSeekV3(benchmark::State& state) {
  braid::StudyOverrides o;
  o.model = "deepseek-v3";
  o.cluster = "dgx-h100";
  o.nodes = 256;
  o.tp = 1;
  o.pp = 16;
  o.ep = 64;
  o.mbs = 1;
  o.seq = 4096;
  o.microbatches = 120;
  simulate_job(state, o, "dualpipe-v");
}
BENCHMARK(BM_DeepSeekV3)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

}  // namespace
