// Simulator: the discrete-event engine that replays a Dag (DESIGN §4). Every stream of every rank
// runs its ops in order; an op starts when its stream predecessor and all its dependencies are
// done. While compute and communication (TP collective or P2P) overlap on a rank, each progresses
// at the reduced rate of the cost model's contention factors (a fluid model, re-timed whenever
// the running set of the rank changes). Activation memory per rank: alloc at an op's start, free
// at its end; at one instant, ops that end release memory before ops that start allocate. It
// produces a Timeline; it knows nothing of schedule names or metrics (report.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "braid/dag.hpp"

namespace braid {

struct SimOptions {
  bool contention = true;      // false: every op runs at full rate (--no-contention)
  bool record_memory = false;  // keep the per-rank activation memory samples
};

// Activation bytes on `rank` from `time_s` until the next sample of that rank.
struct MemorySample {
  double time_s = 0;
  std::int32_t rank = 0;
  double activation_bytes = 0;
};

struct Timeline {
  std::vector<double> start_s, end_s;  // per op of the Dag
  double iteration_time_s = 0;         // end of the last op
  int ranks = 0;
  std::vector<double> peak_activation_bytes;   // per rank
  std::vector<double> peak_activation_time_s;  // per rank: first time the peak is reached
  std::vector<MemorySample> memory;  // time order, only with record_memory (one sample at 0)
  std::int64_t events = 0;  // heap events processed, or ops timed by the fast path (benchmark)
  bool fast_path = false;   // timed by the topological pass (no contention; see simulate())
};

// Runs the Dag. Throws InputError naming the ops of a dependency cycle if the ops cannot all
// run (the schedule deadlocks). Without contention (options.contention false, or every slowdown
// 1.0) and without record_memory, a topological pass plus a per-rank memory sweep replaces the
// event engine: same start and end times, peaks and peak times, bit for bit (docs/simulator.md,
// "Fast path"). It falls back to the event engine wherever it could not guarantee that (memory
// amounts whose sums could round differently in another order).
Timeline simulate(const Dag& dag, const SimOptions& options = {});

// The event engine alone, whatever the contention (tests compare the fast path against it).
Timeline simulate_events(const Dag& dag, const SimOptions& options = {});

// Each rank's activation peak without timing the Dag, where no timing can change it: every rank
// whose memory moves at all moves it on one stream, which runs its ops in stream order whatever
// their times, so the peak is that order's running sum (allocs at an op's start, frees at its end)
// and simulate() finds the same peaks, bit for bit. Empty when some rank's memory moves on two
// streams (offloading's copies beside the compute), whose interleaving the times decide, or when
// some op is on no stream. For a search that needs only the layouts that fit (explore.hpp).
std::optional<std::vector<double>> untimed_activation_peaks(const Dag& dag);

// The critical predecessor of `op`: among its dependencies and its stream predecessor, the one
// that ended last, whose end let the op start (an op starts when its last input ends); ties
// (equal ends) go to the lowest op index; -1 for an op without predecessors. Walking it back from
// the op that ends last gives the critical path. Computed from the end times rather than recorded
// by the engines: a record would cost 4 bytes per op at the run's peak (docs/simulator.md).
int critical_pred(const Dag& dag, const Timeline& timeline, int op);

}  // namespace braid
