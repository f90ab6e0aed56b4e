// Designer: searches the space of braided pipeline schedules for the one with the shortest
// simulated iteration under a memory cap. Seeds are the hand-designed schedules and their offload
// variants, building blocks and a list scheduler's family; moves edit per-rank instruction
// programs (shift, braid, unbraid, defer or run a weight gradient, offload); every candidate is
// validated, then lowered and simulated (the simulator is the oracle for time and peak memory).
// It is not a cost model: it only orders what the schedule IR can say. Deterministic for a seed
// and a candidate budget.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "braid/cost_model.hpp"
#include "braid/dag.hpp"
#include "braid/report.hpp"
#include "braid/schedule.hpp"
#include "braid/simulator.hpp"

namespace braid {

// What is being designed for: sizes, the cost model per number of virtual stages (a study's or
// uniform costs) and the engine settings `braid simulate` would use.
struct DesignProblem {
  std::string study;  // name in the reports
  int pp = 1, microbatches = 1;
  int vpp = 2;           // chunks per rank of the loop seeds (1f1b-i)
  double offload = 0.0;  // the study's training.offload, as compare applies it to the seeds
  std::function<CostModel(int virtual_stages)> cost;
  LowerOptions lower;
  SimOptions sim;
};

struct DesignProgress {
  int candidates = 0;  // simulated so far
  int max_candidates = 0;
  double best_time_s = 0;
  bool best_fits = false;
};

struct DesignOptions {
  // Cap on each rank's peak (the simulator's: weights, gradients, optimizer state, activations
  // and the profile's fixed overhead, as the memory cap of sweep and simulate); < 0: none.
  double mem_cap_bytes = -1;
  // Cap on each rank's activation peak in units of M_a (uniform-cost mode); < 0: none.
  double mem_cap_ma = -1;
  // Count a microbatch's activations in the M_a cap until its weight gradient has run, not only
  // until its backward: the zero-bubble authors' memory rule (their F adds one, their W frees it),
  // stricter than braid's uniform cost model, where B frees everything.
  bool hold_until_w = false;
  // Offload seeds and moves; off where copies cost nothing (uniform-cost mode has no host link).
  bool allow_offload = true;
  int max_candidates = 1000;  // simulated candidates, seeds included: the deterministic budget
  double budget_s = 0;        // wall-clock limit as well (0 = none); the run stops at either
  std::uint64_t seed = 1;
  int beam = 6;  // candidates kept and mutated
  // Hand-designed seeds; empty: 1f1b-i, zb-v, stp, stp-offload, dualpipe-v.
  std::vector<std::string> seeds;
  std::function<void(const DesignProgress&)> progress;  // after each candidate; may be empty
};

// The name of a designed schedule, and of `designed` in sweep and search schedule lists.
inline constexpr const char* kDesignedName = "designed";

// One point of the trace: the best time after each improvement.
struct DesignStep {
  int candidate = 0;  // 1-based index of the simulated candidate
  double best_time_s = 0;
  std::string move;  // how the improving candidate was made ("seed stp", "shift r1 12->10", ...)
};

struct DesignResult {
  Schedule schedule;      // named kDesignedName
  Report report;          // `braid simulate` of it
  double peak_bytes = 0;  // largest rank peak compared with the cap (no fixed overhead)
  double peak_ma = 0;
  std::string seed;       // the seed the best descends from
  std::string best_hand;  // best plain hand-designed schedule under the cap ("" if none fits)
  double best_hand_time_s = 0;
  std::vector<Report> hand;  // every seed as simulated
  std::vector<bool> hand_fits;
  std::vector<double> hand_peak_bytes, hand_peak_ma;  // as compared with the cap
  int candidates = 0, invalid = 0, duplicates = 0, over_cap = 0;
  bool budget_exhausted_by_time = false;
  std::vector<DesignStep> trace;
};

// The hand-designed schedules a design starts from unless DesignOptions::seeds says otherwise.
const std::vector<std::string>& default_design_seeds();

// A layout a designed schedule may have: how its virtual stages map to ranks. Moves keep a
// seed's layout; the list scheduler's family and the building blocks are V with two chunks.
struct DesignLayout {
  Placement placement = Placement::V;
  int vpp = 2;
  bool operator==(const DesignLayout&) const = default;
};
// Every layout a design from `seeds` (names; empty: the default seeds) may return at `vpp` chunks
// per rank for the loop seeds, without repeats, V first. The explorer checks static memory on
// them before it designs.
std::vector<DesignLayout> design_layouts(const std::vector<std::string>& seeds, int vpp);

// Runs the search. Throws InputError("--mem-cap", ...) when no candidate fits the cap.
DesignResult design(const DesignProblem& problem, const DesignOptions& options);

// {"study","schedule","iteration_time_s","seed","best_hand",...,"trace":[...],"hand":[...]}; bytes
// stable for a given result.
std::string design_json(const DesignResult& result, const DesignOptions& options);
// Short human summary (the hand-designed schedules, the designed one, by how much it wins).
std::string design_table(const DesignResult& result, const DesignOptions& options);

}  // namespace braid
