// Simulator speed: simulated unit ops per second (single thread) and lowering time, on the
// shape of qwen2-26.3b with pp 8, m 256 and the stp schedule (16 virtual stages of 30 layers in
// all, embedding on the first and the LM head on the last). The unit costs are uniform symbolic
// ones: the engine's work depends on the DAG's shape (ops, edges, overlaps), not on the values.
//   build/simulator_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"

namespace {

constexpr int kPp = 8;
constexpr int kMicrobatches = 256;
constexpr int kLayers = 30;  // qwen2-26.3b's decoder layers (the study's model)

// 16 chunks, layers split uniformly with the remainder on the earlier stages; the first chunk
// carries the embedding, the last the LM head + loss. Contention on, so the fluid re-timing runs.
braid::CostModel shaped_cost_model(int virtual_stages) {
  braid::UniformCosts unit{4, 8, 8, 2, 4};
  braid::CostModel cost = braid::uniform_cost_model(unit, virtual_stages);
  cost.uniform = false;
  cost.contention = braid::Contention{1.1, 1.3};
  const braid::LayerCost layer = cost.chunks[0].layers[0];
  int next = 0;
  for (int k = 0; k < virtual_stages; ++k) {
    const int n = kLayers / virtual_stages + (k < kLayers % virtual_stages ? 1 : 0);
    cost.chunks[k].layers.clear();
    for (int l = 0; l < n; ++l) {
      braid::LayerCost copy = layer;
      for (braid::UnitCost& u : copy) u.layer = next;
      cost.chunks[k].layers.push_back(copy);
      ++next;
    }
  }
  braid::UnitCost embedding;
  embedding.kind = braid::UnitKind::Embedding;
  embedding[braid::Phase::F].time_s = 0.5;
  embedding[braid::Phase::B].time_s = 0.5;
  cost.chunks.front().prologue.push_back(embedding);
  braid::UnitCost head;
  head.kind = braid::UnitKind::Head;
  head[braid::Phase::F].time_s = 3;
  head[braid::Phase::B].time_s = 3;
  head[braid::Phase::W].time_s = 3;
  cost.chunks.back().epilogue.push_back(head);
  return cost;
}

struct Fixture {
  braid::Schedule schedule;
  braid::CostModel cost;
  braid::Dag dag;
  Fixture() {
    braid::ScheduleOptions options;
    options.pp = kPp;
    options.microbatches = kMicrobatches;
    schedule = braid::make_schedule("stp", options);
    cost = shaped_cost_model(schedule.virtual_stages());
    dag = braid::lower(schedule, cost);
  }
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

void BM_Simulate(benchmark::State& state) {
  const Fixture& f = fixture();
  braid::SimOptions options;
  options.contention = state.range(0) != 0;
  for (auto _ : state) {
    braid::Timeline t = braid::simulate(f.dag, options);
    benchmark::DoNotOptimize(t.iteration_time_s);
  }
  state.counters["ops"] = static_cast<double>(f.dag.size());
  state.counters["edges"] = static_cast<double>(f.dag.edges());
  state.counters["ops_per_s"] = benchmark::Counter(
      static_cast<double>(f.dag.size()) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Simulate)->Arg(1)->Arg(0)->ArgName("contention")->Unit(benchmark::kMillisecond);

void BM_Lower(benchmark::State& state) {
  const Fixture& f = fixture();
  for (auto _ : state) {
    braid::Dag dag = braid::lower(f.schedule, f.cost);
    benchmark::DoNotOptimize(dag.ops.data());
  }
  state.counters["ops_per_s"] = benchmark::Counter(
      static_cast<double>(f.dag.size()) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Lower)->Unit(benchmark::kMillisecond);

}  // namespace
