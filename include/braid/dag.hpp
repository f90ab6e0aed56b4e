// Dag: a Schedule lowered onto a CostModel — every unit op (F/B/W of each unit of each layer, as
// the cost model describes the layer, and of the non-layer units), every collective on its
// group's stream, P2P transfer and offload/reload copy of one iteration, each on one in-order
// stream of one pipeline rank, with the dependencies that DESIGN §2 and §4 fix (data flow,
// Megatron's blocking rules, braided blocks). Flat arrays: ops by index, CSR predecessor lists,
// per (rank, stream) execution order. It holds no times beyond each op's duration alone; the
// simulator turns it into a Timeline.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "braid/config.hpp"
#include "braid/cost_model.hpp"
#include "braid/schedule.hpp"

namespace braid {

// The in-order resources of one rank (DESIGN §4). P2pNext sends to rank (r+1) mod p, P2pPrev to
// rank (r-1+p) mod p; with p = 2 both neighbours are the same rank and every send uses P2pNext
// (one physical link per direction). A unit's collective runs on its group's stream (stream_of):
// Tp, Cp, Ep; Dp carries the data-parallel gradient / parameter sync and the tied-embedding
// all-reduce. Every stream but Compute, D2H and H2D is communication (it contends with compute).
// TpRing is the copy-engine lane of TP-communication overlap's ring exchange (TE's
// CommOverlapP2PBase sends and receives on streams of their own with cudaMemcpyAsync, not on
// NCCL's): its transfers neither queue behind the TP stream's collectives nor hold them up. The
// report counts it as TP (exposure, comm rate).
enum class StreamKind : std::uint8_t {
  Compute = 0,
  Tp,
  P2pNext,
  P2pPrev,
  D2H,
  H2D,
  Dp,
  Cp,
  Ep,
  TpRing
};
inline constexpr int kStreamsPerRank = 10;
const char* name(StreamKind s);
// The stream a collective over group `g` runs on: the tensor-parallel groups' (tp, etp) on Tp,
// cp on Cp, ep on Ep, the data-parallel ones (dp, dp x cp, edp) on Dp. Pipeline sends are P2P
// ops of their own: a unit collective over pp is our bug (InternalError).
StreamKind stream_of(Group g);
// The communication streams whose collectives the report attributes exposed time to, one per
// exposure it reports (tp, cp, ep, dp), in that order.
inline constexpr StreamKind kCollectiveStreams[] = {StreamKind::Tp, StreamKind::Cp, StreamKind::Ep,
                                                    StreamKind::Dp};

enum class OpKind : std::uint8_t {
  Compute,     // a unit's F, B or W on the compute stream
  Collective,  // a unit's collective, on its group's stream (stream_of)
  P2P,         // activation (phase F) or gradient (phase B) send to another rank
  Offload,     // D2H copy of a (chunk, microbatch)'s saved activations
  Reload,      // H2D copy back before its backward
  DpSync,      // data-parallel gradient reduce / parameter all-gather bucket, tied-embedding AR
  Optimizer,   // the optimizer step on the compute stream (Adam, gradient norm, zeroing)
};
const char* name(OpKind k);

// How the op sits in its instruction: plain (F, B, W alone), or the first / second side of a
// braided block (FB: F, then B; FW: F, then W; FF: the first F, then the second). Traces label
// them "a" and "b".
enum class BlockSide : std::uint8_t { Plain, First, Second };

// What an op costs: its time alone (no contention), the memory it allocates at its start and
// frees at its end, and what it moves. Ops share costs (every microbatch's pass through a unit
// costs the same: the unit-level qwen2-26.3b run has 24 distinct costs among 163,848 ops), so a
// Dag keeps each distinct cost once and an op names its own by index.
struct OpCost {
  double duration_s = 0;
  double alloc_bytes = 0;
  double free_bytes = 0;
  double bytes = 0;  // payload of a collective, P2P or copy; 0 for compute
  bool operator==(const OpCost&) const = default;
};

// One op: its cost's index in Dag::costs, then its labels packed into 16 bytes, each as wide as
// its values need (the kMaxDag* limits below; lowering refuses a schedule or model beyond them
// with one line); a send's receiving rank follows from its rank and stream (peer_of). 20 bytes.
// The fields read like the integers and enums they hold; no reference or address of one can be
// taken.
struct DagOp {
  std::int32_t cost = 0;  // Dag::costs[cost]
  // Microbatch of the pass the op belongs to (a DP bucket's index for DpSync ops).
  std::int32_t mb : 21 = 0;
  OpKind kind : 3 = OpKind::Compute;
  UnitKind unit : 4 = UnitKind::PreAttn;
  Phase phase : 2 = Phase::F;  // P2P: F = activation, B = input gradient
  bool vision : 1 = false;     // a ViT layer unit
  // A transfer of the copy engines (Collective::copy_engine): it takes no SMs, so the simulator
  // neither slows the compute beside it nor is slowed by it.
  bool copy_engine : 1 = false;
  std::int32_t instruction : 26 = -1;                       // index in the rank's instruction list
  InstructionKind instruction_op : 3 = InstructionKind::F;  // the instruction it was lowered from
  // Full recomputation: a unit's forward run again (phase F) inside the backward pass, right
  // before its layer's B units ("R0.3 Attn L12").
  bool recompute : 1 = false;
  BlockSide side : 2 = BlockSide::Plain;
  std::int16_t layer = -1;         // global layer index; -1 for non-layer units, P2P, copies
  std::int16_t virtual_stage = 0;  // k
  // The engine reads rank and stream for every event: a whole int16 and the low bits of a byte.
  std::int16_t rank = 0;  // the rank whose stream runs it (a P2P: the sender)
  StreamKind stream : 4 = StreamKind::Compute;
  CollectiveKind collective : 3 = CollectiveKind::None;  // Collective ops only
  std::int16_t chunk : 9 = 0;                            // chunk on the rank (0 .. vpp-1)
  bool operator==(const DagOp&) const = default;
};
// Each bit-field sits inside one unit of its own type (no field straddles), so the 16 bytes hold
// them all.
static_assert(sizeof(DagOp) == 20);

// Signed widths: chunk 9 bits (up to 255), mb 21 (up to 1,048,575), instruction 26 (up to
// 33,554,431), rank, layer and virtual stage 16. Lowering refuses a schedule beyond them.
inline constexpr int kMaxDagChunks = 256;            // chunks per rank (vpp)
inline constexpr int kMaxDagMicrobatches = 1 << 20;  // 1,048,576
inline constexpr int kMaxDagInstructions = 1 << 25;  // per rank: 33,554,432
inline constexpr int kMaxDagVirtualStages = 32767;   // pp x vpp, so pp too (16-bit)
// The largest global layer index a DagOp holds (16-bit); lowering a deeper model is refused.
inline constexpr int kMaxDagLayer = 32767;
// The configuration's bounds stay within them, so only hand-made or imported schedules and the
// largest microbatch counts meet the refusals (per rank at most 3 x vpp x m instructions, which
// the size guard refuses long before 2^25).
static_assert(kMaxPp <= kMaxDagVirtualStages && kMaxVpp <= kMaxDagChunks);
static_assert(kMaxMicrobatches <= kMaxDagMicrobatches);
// Each field holds the largest value its limit allows (and -1 where it is used), and each enum
// field its last enumerator: a field made too narrow, or an enumerator added past what its field
// holds, fails here (the compiler also warns that the field is too small for the enum).
static_assert([] {
  DagOp op;
  op.rank = kMaxDagVirtualStages - 1;
  op.chunk = kMaxDagChunks - 1;
  op.virtual_stage = kMaxDagVirtualStages - 1;
  op.layer = kMaxDagLayer;
  op.mb = kMaxDagMicrobatches - 1;
  op.instruction = kMaxDagInstructions - 1;
  bool holds = op.rank == kMaxDagVirtualStages - 1 && op.chunk == kMaxDagChunks - 1 &&
               op.virtual_stage == kMaxDagVirtualStages - 1 && op.layer == kMaxDagLayer &&
               op.mb == kMaxDagMicrobatches - 1 && op.instruction == kMaxDagInstructions - 1;
  op.mb = -1;
  op.instruction = -1;
  op.layer = -2;  // the tied-embedding all-reduce
  op.kind = OpKind::Optimizer;
  op.stream = StreamKind::TpRing;
  op.unit = UnitKind::Combine;
  op.phase = Phase::W;
  op.collective = CollectiveKind::P2P;
  op.instruction_op = InstructionKind::Reload;
  op.side = BlockSide::Second;
  return holds && op.mb == -1 && op.instruction == -1 && op.layer == -2 &&
         op.kind == OpKind::Optimizer && op.stream == StreamKind::TpRing &&
         op.unit == UnitKind::Combine && op.phase == Phase::W &&
         op.collective == CollectiveKind::P2P && op.instruction_op == InstructionKind::Reload &&
         op.side == BlockSide::Second &&
         static_cast<int>(StreamKind::TpRing) + 1 == kStreamsPerRank;
}());

// Options of the lowering.
enum class P2pMode : std::uint8_t {
  Auto,      // the cost model's (Batched, or Blocking without p2p_batched); uniform cost models:
             // Async (theory mode: P2P never blocks)
  Blocking,  // the next compute op on the sender waits for the send
  Async,     // sends overlap fully
  // Megatron's batch_isend_irecv: the sends after an instruction and the receives of the next
  // one form a batch that the rank's next instruction waits for, and a send starts only once the
  // receiver has posted its receive (the end of the receiver's instruction before the consumer).
  Batched,
};
struct LowerOptions {
  P2pMode p2p = P2pMode::Auto;
  // Leave out the collectives, sends and copies that take no time and move no memory (in
  // uniform-cost mode: every send, and every collective when tar = 0), connecting what they
  // waited for to what waited for them. Every time, memory peak and idle attribution stays the
  // same (docs/simulator.md, "Zero-time ops"); the ops are gone from traces and the critical path.
  bool fold_zero_time = false;
};

struct Dag {
  std::vector<DagOp> ops;
  // The ops' costs, by DagOp::cost. Lowering keeps each distinct cost once (bit for bit), in the
  // order the ops first use them; a Dag made otherwise may repeat one.
  std::vector<OpCost> costs;
  // CSR dependencies (data flow and blocking rules; not stream order): the predecessors of op i
  // are preds[pred_begin[i] .. pred_begin[i+1]), sorted, without duplicates. The successors are
  // not kept: the fast path and the reports read predecessors only (successors() below).
  std::vector<std::int32_t> pred_begin, preds;
  // Stream order: ops of stream s = rank * kStreamsPerRank + StreamKind in execution order are
  // stream_ops[stream_begin[s] .. stream_begin[s+1]). stream_prev per op, -1 for the first. (The
  // op after each is not stored: a stream's ops end in order, so a pass that follows them keeps one
  // position per stream.)
  std::vector<std::int32_t> stream_begin, stream_ops;
  std::vector<std::int32_t> stream_prev;

  // Context, for names and reports.
  std::string schedule;
  int pp = 1;
  int vpp = 1;
  int microbatches = 1;
  Placement placement = Placement::Loop;
  Contention contention;           // from the cost model (1, 1 when uniform)
  CopyContention copy_contention;  // D2H against H2D, from the cost model (1, 1 when uniform)
  bool p2p_blocking = true;
  // True when lowering found every memory sum exact from the cost model alone (see
  // memory_sums_exact, which the fold and the simulator's fast path then need not run); false
  // means "not known", not "inexact".
  bool memory_exact = false;

  int size() const { return static_cast<int>(ops.size()); }
  const OpCost& cost(int op) const { return costs[static_cast<std::size_t>(ops[op].cost)]; }
  int stream_id(int rank, StreamKind s) const {
    return rank * kStreamsPerRank + static_cast<int>(s);
  }
  int edges() const { return static_cast<int>(preds.size()); }
};

// Lowers `schedule` onto `cost` (which must have schedule.virtual_stages() chunks). Throws
// InputError when they do not match, or with pass_order_error's message when the schedule breaks
// a pass-order rule (a B without its F, a W without a deferred B, a RELOAD without OFFLOAD). A
// deadlocking order lowers to a DAG with a cycle (check_acyclic names its ops).
Dag lower(const Schedule& schedule, const CostModel& cost, const LowerOptions& options = {});

// Re-timing: `dag`, lowered before from a schedule of the same name and sizes, made equal to
// lower(schedule, cost, options) without building it again: the lowering runs once more and
// writes each op's costs (duration, alloc, free, bytes) into the DAG's op in its place, and
// re-derives the DAG's cost-dependent fields (contention, copy contention, memory_exact). Returns
// false, the DAG then left half re-timed, when the two differ in anything but costs (an op's
// kind, stream, rank, unit, phase..., the op count, a dependency, P2P blocking) or when
// options.fold_zero_time is set (the fold leaves out ops by their costs, so DAGs meant to be
// re-timed are lowered without it); the caller then lowers afresh. Throws what lower() throws.
// `memo`, when given, keeps what depends on the schedule alone (its pass-order check, the P2P
// batch plan) for the next call with the same Schedule object (by address: it must stay alive and
// unchanged while the memo is used); one memo per thread.
struct LoweringPlan;
struct RetimeMemo {
  const Schedule* schedule = nullptr;  // the schedule `plan` belongs to
  std::shared_ptr<LoweringPlan> plan;
};
bool retime(Dag& dag, const Schedule& schedule, const CostModel& cost,
            const LowerOptions& options = {}, RetimeMemo* memo = nullptr);

// The dependencies turned around, CSR: the ops that wait for op i are
// list[begin[i] .. begin[i+1]), ascending. Built by what walks forward from an op (the event
// engine, the trace's P2P flows), 4 bytes per op and per edge while it runs.
struct Successors {
  std::vector<std::int32_t> begin, list;
};
Successors successors(const Dag& dag);

// True when every op's alloc and free is a non-negative multiple of 2^-10 and each rank's amounts
// add up to at most 2^42: then every partial sum of a rank's memory is exact, and comes out the
// same in any order of the same allocs and frees.
bool memory_sums_exact(const Dag& dag);

// The rank a P2P op sends to: P2pNext sends to (rank + 1) mod p, P2pPrev to (rank - 1 + p) mod p;
// -1 for every other op.
int peer_of(const Dag& dag, int op);

// "F1.3 Attn L12", "AR B0.2 PreMLP L5", "send F0.3 r0->r1", "OFFLOAD 0.3", "F0.0 Embedding".
std::string op_name(const Dag& dag, int op);

// A cycle of dependencies + stream order (Boost.Graph depth-first search), as op indices in
// dependency order; empty when the graph is acyclic.
std::vector<int> find_cycle(const Dag& dag);
// Throws InputError("schedule", "<name>", "dependency cycle: a -> b -> ... -> a") if there is one.
void check_acyclic(const Dag& dag);

// The longest path through dependencies + stream order when op i takes weight_s[i] (Boost.Graph
// DAG longest path): with the simulated durations this is the critical path of the iteration,
// ending at the op that ends last. Op indices from the first op to the last.
std::vector<int> longest_path(const Dag& dag, const std::vector<double>& weight_s);

}  // namespace braid
