// SizeEstimate: how many DAG ops one simulation lowers to and about how much memory lowering,
// simulating and reporting them takes, computed from the cost model's shape and the schedule's
// sizes before anything big is allocated. The CLI uses it to refuse requests far beyond what fits
// (one line, exit 2) instead of running out of memory. An estimate for a guard, not an accounting.
#pragma once

#include <cstdint>
#include <string>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"

namespace braid {

struct SizeEstimate {
  double ops = 0;    // DAG ops (compute, collectives, P2P, copies), an upper bound; a double so
                     // that absurd requests (2^31 microbatches x 2^31 stages) do not overflow
  double edges = 0;  // dependency edges, an upper bound (kEdgesPerOp per op)
  double bytes = 0;  // peak memory of lower + simulate + report, estimated
};

// Peak resident bytes per DAG op of lower + simulate + report, measured on x86-64 with
// `braid simulate` (docs/limits.md: 100-103), with a margin of nearly four for schedules
// with more edges per op.
inline constexpr double kBytesPerOp = 400;
// Ops and dependency edges are indexed by int32: beyond this no --force helps.
inline constexpr double kMaxOps = 400e6;
// Dependency edges per op, an upper bound (tests/reliability_test.cpp checks it on lowered DAGs);
// the edge count is held to int32 as well.
inline constexpr double kEdgesPerOp = 4;
inline constexpr double kMaxEdges = 2147483647.0;
// Virtual stages (pp x chunks per rank) are 16-bit in the DAG.
inline constexpr double kMaxVirtualStages = 32767;
// Default refusal threshold on the estimated memory (a 24 GiB machine with room to spare).
inline constexpr double kDefaultMaxSimulationBytes = 16.0 * (1ull << 30);

// What a sweep or search keeps of each simulated configuration until its end (its row: the
// report's figures, per rank, and the critical path; not the exposed pieces, which rows drop),
// per op of the configuration's estimate, and per row whatever it simulated. Measured with
// `braid sweep --study default --schedules 1f1b --microbatches 1..N --jobs 2`: peak 153 MB for
// N = 1000, 401 MB for N = 2000 (673 MB and 2.52 GB while rows kept their pieces), about 1 byte
// per estimated op; 2 is that with a margin. The rows of one sweep or search must fit
// kDefaultMaxSimulationBytes together (N = 10000 needs about 26 GiB by this count: refused).
inline constexpr double kKeptBytesPerOp = 2;
inline constexpr double kKeptBytesPerRow = 16 * 1024;

// `braid schedule` / `export` build a schedule without simulating it: at most this many
// instructions (pp x chunks per rank x microbatches x F, B, W), a few GiB.
inline constexpr double kMaxScheduleInstructions = 100e6;

// `cost` holds the units of every layer once (any split into virtual stages: a unit's op count
// does not depend on it), and is repeated `cost_repeats` times (uniform costs: a one-chunk model
// repeated once per virtual stage); `virtual_stages` = pp x chunks per rank of the schedule (the
// P2P sends and activation copies grow with it).
SizeEstimate estimate_size(const CostModel& cost, double cost_repeats, double virtual_stages,
                           double microbatches);

// The same estimate from a study's shape alone (layers, tp, sp, recompute), without building a
// cost model: for the explorer's many configurations. An upper bound of the estimate above.
SizeEstimate estimate_study_size(const Study& study, double virtual_stages, double microbatches);

// The estimate of several simulations in memory at once (a parallel sweep's jobs): the sum.
SizeEstimate combined(const SizeEstimate& a, const SizeEstimate& b);

// Throws InputError(where, "size", ...) naming the estimate and the limit when the estimate is
// above kMaxOps or kMaxEdges, or above max_bytes unless `force`; "use fewer ..." names `reduce`
// (default: microbatches, stages or layers); `can_force`: the command has --force (say so).
void check_size(const SizeEstimate& estimate, double max_bytes, bool force,
                const std::string& where,
                const std::string& reduce = "fewer microbatches, stages or layers",
                bool can_force = true);

// Throws InputError(where, "size", ...) when pp x chunks per rank exceeds kMaxVirtualStages.
void check_virtual_stages(double virtual_stages, const std::string& where);

// Throws InputError(where, "size", ...) when pp x chunks_per_rank x microbatches x 3 instructions
// exceed kMaxScheduleInstructions. Sizes that are not positive pass (the builders name them).
void check_schedule_size(int pp, int chunks_per_rank, int microbatches, const std::string& where);

}  // namespace braid
