// Lowering of a Schedule onto a CostModel (DESIGN §2, §4): per rank and instruction, the unit ops
// in the order the cost model's layers list them (braided blocks pair each layer's two halves),
// with their collectives on their groups' streams, the P2P sends between ranks and the
// offload/reload copies, then the cross-stage dependencies once every rank is lowered. The
// schedule's pass-order rules are validate()'s (lower() checks them with pass_order_error before it
// starts); what lives here are the blocking rules, as edges:
//   - plain F, split B and plain W: each collective is synchronous — the next compute op emitted
//     on the rank waits for it (Megatron issues them on the compute stream);
//   - full backward (B then W per unit): the B collective runs on its stream under the unit's W;
//     only its consumer (the next B unit) waits for it; a collective the compute stream itself
//     waits for there (Collective::from_compute: SP's output-gradient gather, the CP exchanges
//     outside the ring) starts after the rank's previous compute op and, after its unit, holds
//     the next one;
//   - braided blocks (FB, FW, FF): every collective is asynchronous; only its data consumer waits,
//     so a collective at the end of a block overlaps whatever follows;
//   - blocking P2P: the next compute op on the sender waits for its sends (sent at the end of the
//     instruction, as Megatron batches them);
//   - batched P2P (Megatron's batch_isend_irecv, the default for real costs): the sends after an
//     instruction and the receives of the next instruction form one batch that the next
//     instruction waits for; under Megatron's schedules a send starts only once its receiver has
//     posted the receive, at the end of the receiver's step before the consumer (rendezvous; the
//     steps and early receives come from p2p_batches.hpp);
//   - full recomputation: a layer's forward rerun precedes its B units inside the backward pass.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../util/pipeline_sizes.hpp"
#include "braid/dag.hpp"
#include "braid/error.hpp"
#include "builder.hpp"
#include "lower_step.hpp"
#include "p2p_batches.hpp"

namespace braid {

// What re-timing keeps of a schedule between calls (RetimeMemo): its P2P batch plan, which does
// not depend on costs.
struct LoweringPlan {
  bool batches_known = false;
  detail::Stepping stepping = detail::Stepping::Single;  // what `batches` was planned for
  detail::BatchPlan batches;
};

namespace {

// The schedule as InputError names it: its name, or "schedule" for an unnamed one.
std::string schedule_label(const Schedule& s) { return s.name.empty() ? "schedule" : s.name; }

constexpr int kNone = -1;

// The data-flow state of one pass (one (virtual stage, microbatch) forward, backward or W) while
// its ops are emitted: where the activation (or gradient) currently is, and its first/last op.
struct PassState {
  int stage = 0;
  int chunk = 0;
  int mb = 0;
  Phase phase = Phase::F;
  InstructionKind instruction_op = InstructionKind::F;
  BlockSide side = BlockSide::Plain;
  int cursor = kNone;      // op producing the current activation / gradient
  int first = kNone;       // first op of the pass (consumes the pass input)
  int pos = 0;             // flowing units emitted so far (index into the stage's flow order)
  int prefetched = kNone;  // Before collective of the next unit, already issued
  // A unit beside an all-to-all (UnitCost::beside_all_to_all): `compute`, the last flowing
  // unit's compute op, where it starts; `beside`, its last op, which the next flowing unit's
  // compute waits for.
  int compute = kNone;
  int beside = kNone;
};

enum class CollectiveMode { Sync, Async };

// What a skipped zero-time send waited for, per stream of its rank the latest op (it ends after
// the earlier ones of its stream).
struct SendInputs {
  int compute = kNone;
  int tp = kNone;
};

class Lowerer final : public detail::StepEmitter {
 public:
  // `retiming`: re-time `dag`, lowered before from the same schedule (see retime()), instead of
  // appending to it; `memo`: the schedule's plan kept from an earlier re-timing, or filled now.
  Lowerer(const Schedule& schedule, const CostModel& cost, const LowerOptions& options, Dag& dag,
          bool retiming = false, LoweringPlan* memo = nullptr)
      : s_(schedule),
        cost_(cost),
        dag_(dag),
        build_(dag, schedule.pp, retiming ? 0 : estimated_ops(schedule, cost, options)),
        plan_(memo ? memo->batches : own_plan_),
        plan_known_(memo && memo->batches_known),
        memo_(memo),
        retiming_(retiming) {
    if (retiming_) found_.assign(dag.preds.size(), 0);
    dag_.schedule = schedule.name;
    util::copy_pipeline_sizes(dag_, schedule);
    dag_.placement = schedule.placement;
    dag_.contention = cost.uniform ? Contention{1.0, 1.0} : cost.contention;
    dag_.copy_contention = cost.uniform ? CopyContention{} : cost.copy_contention;
    batched_ = options.p2p == P2pMode::Batched ||
               (options.p2p == P2pMode::Auto && !cost.uniform && cost.p2p_batched);
    dag_.p2p_blocking = batched_ || options.p2p == P2pMode::Blocking ||
                        (options.p2p == P2pMode::Auto && !cost.uniform);
    fold_ = options.fold_zero_time;
    dag_.memory_exact = memory_exact_by_costs(schedule, cost);
    skip_zero_ = fold_ && zero_time_ops_movable(schedule, cost, dag_.memory_exact);
    skip_sends_ = skip_zero_ && skips_sends(cost, options);
    stamping_ = !retiming_;
    stages_ = schedule.virtual_stages();
    flush_w_stage_.assign(stages_, 0);
    m_ = schedule.microbatches;
    const std::size_t passes = static_cast<std::size_t>(stages_) * m_;
    f_first_.assign(passes, kNone);
    f_last_.assign(passes, kNone);
    b_first_.assign(passes, kNone);
    b_last_.assign(passes, kNone);
    send_f_.assign(passes, kNone);
    send_b_.assign(passes, kNone);
    if (skip_sends_) {
      skipped_f_.resize(passes);
      skipped_b_.resize(passes);
      skipped_on_.resize(static_cast<std::size_t>(schedule.pp) * 2);
    }
    offload_.assign(passes, kNone);
    reload_.assign(passes, kNone);
    if (batched_) {
      last_compute_after_.resize(schedule.pp);
      plan_runtime();
      closed_f_.resize(passes);
      closed_b_.resize(passes);
      recv_after_f_.resize(passes);
      recv_after_b_.resize(passes);
      recv_post_f_.assign(passes, kNone);
      recv_post_b_.assign(passes, kNone);
      recv_wait_f_.assign(passes, kNone);
      recv_wait_b_.assign(passes, kNone);
    }
    pending_sync_.resize(schedule.pp);
    last_compute_.assign(schedule.pp, kNone);
    flow_.resize(stages_);
    for (int k = 0; k < stages_ && k < static_cast<int>(cost.chunks.size()); ++k) {
      const ChunkCost& c = cost.chunks[k];
      for_each_unit(c, [&](const UnitCost& u) {
        flow_[k].push_back(&u);
        flush_w_stage_[k] |= u.w_in_flush ? 1 : 0;
      });
      step_.last_w.emplace_back(flow_[k].size(), kNone);
      step_.first_f.emplace_back(flow_[k].size(), kNone);
    }
  }

  // True when every partial sum of a rank's memory is exact (memory_sums_exact) by the cost model
  // alone: every unit's alloc and free and every chunk's activations (offload and reload move
  // them) is a multiple of 2^-10, and on each rank all of them for its chunks, times the
  // microbatches, stay under 2^42 (the bound memory_sums_exact checks, rank by rank).
  static bool memory_exact_by_costs(const Schedule& schedule, const CostModel& cost) {
    constexpr double kMaxSum = 4398046511104.0;  // 2^42
    double total = 0;
    auto add = [&](double v) {
      if (v == 0) return true;
      if (!(v > 0 && v <= kMaxSum) || v * 1024 != std::floor(v * 1024)) return false;
      total += v;
      return true;
    };
    auto add_unit = [&](const UnitCost& u) {
      for (const PhaseCost* c : {&u[Phase::F], &u[Phase::B], &u[Phase::W], &u.recompute})
        if (!add(c->alloc_bytes) || !add(c->free_bytes)) return false;
      return true;
    };
    // Each chunk sits on one rank (its ops are that rank's): then every chunk is counted below.
    if (cost.chunks.size() != static_cast<std::size_t>(schedule.pp) * schedule.vpp) return false;
    for (int r = 0; r < schedule.pp; ++r) {
      total = 0;
      for (int chunk = 0; chunk < schedule.vpp; ++chunk) {
        const int k = schedule.virtual_stage(r, chunk);
        if (k < 0 || k >= static_cast<int>(cost.chunks.size())) return false;
        const ChunkCost& c = cost.chunks[k];
        if (!add(c.activation_bytes)) return false;
        total += c.activation_bytes;  // twice: an offload frees them, a reload allocates them again
        bool exact = true;
        for_each_unit(c, [&](const UnitCost& u) { exact = exact && add_unit(u); });
        if (!exact) return false;
      }
      if (!(total * std::max(schedule.microbatches, 1) <= kMaxSum)) return false;
    }
    return true;
  }

  // Leaving a zero-time op out lets the ops that waited for it start one zero-time round earlier
  // at the same instant. That moves no memory peak when no op that frees memory can take zero
  // time (no offload, no unit that frees memory in no time) and every memory sum is exact, so the
  // order of the allocs of one instant does not matter. The builder's fold checks the same on the
  // lowered DAG.
  static bool zero_time_ops_movable(const Schedule& schedule, const CostModel& cost, bool exact) {
    if (!exact) return false;
    for (const RankProgram& program : schedule.ranks)
      for (const Instruction& in : program.instructions)
        if (is_copy(in.op)) return false;
    return !any_phase(cost,
                      [](const PhaseCost& c) { return c.free_bytes != 0 && !(c.time_s > 0); });
  }

  // Sends of uniform mode under asynchronous P2P (the default there) take no time and nothing on
  // their rank waits for them; with no collective left for the fold, skip_send leaves them out.
  static bool skips_sends(const CostModel& cost, const LowerOptions& options) {
    const bool async =
        options.p2p == P2pMode::Async || (options.p2p == P2pMode::Auto && cost.uniform);
    return cost.uniform && async && no_collective_folded(cost);
  }

  // True when the lowering creates no collective that the fold would leave out: none takes no
  // time, or every one does and follows its unit (skips_collective leaves them all out, since no
  // collective stream ever runs anything).
  static bool no_collective_folded(const CostModel& cost) {
    const auto has = [&](auto which) {
      return any_phase(cost, [&](const PhaseCost& c) {
        return std::any_of(c.collectives.begin(), c.collectives.end(), which);
      });
    };
    const auto untimed = [](const Collective& c) { return !(c.time_s > 0); };
    if (!has(untimed)) return true;
    return !has([](const Collective& c) { return c.time_s > 0; }) &&
           !has([](const Collective& c) { return c.position != CollectivePosition::After; });
  }

  // True when `holds` is true of some phase cost (F, B, W or the recomputed forward) of some unit.
  template <class Holds>
  static bool any_phase(const CostModel& cost, Holds holds) {
    bool found = false;
    for (const ChunkCost& c : cost.chunks)
      for_each_unit(c, [&](const UnitCost& u) {
        found = found || holds(u[Phase::F]) || holds(u[Phase::B]) || holds(u[Phase::W]) ||
                holds(u.recompute);
      });
    return found;
  }

  // Reserved up front so that the op and edge arrays are written once, never moved (a doubling
  // would copy them, and hold both copies at once): per stage and microbatch each unit's compute
  // op (one per step of a collective inside it) and collectives in F, B and W and, under full
  // recomputation, each layer unit's rerun, but those the costs alone show the lowering leaves out
  // (a zero-time collective after its unit, a zero-time W unit when no collective takes time, the
  // sends of skips_sends); the stage's two sends and two copies; then the step tail (per chunk a
  // reduce and a gather per gradient bucket, per rank the optimizer step and the tied embeddings'
  // All-Reduce).
  static std::size_t estimated_ops(const Schedule& schedule, const CostModel& cost,
                                   const LowerOptions& options) {
    const bool skip = options.fold_zero_time &&
                      zero_time_ops_movable(schedule, cost, memory_exact_by_costs(schedule, cost));
    const bool no_sync = !any_phase(cost, [](const PhaseCost& c) {
      return std::any_of(c.collectives.begin(), c.collectives.end(),
                         [](const Collective& k) { return k.time_s > 0; });
    });
    const bool w_skips = skip && cost.uniform && no_sync && skips_sends(cost, options);
    const auto phase_ops = [&](const PhaseCost& c, bool w) -> std::size_t {
      const bool compute = !(w && w_skips && c.time_s == 0 && c.alloc_bytes == 0 &&
                             c.free_bytes == 0 && c.collectives.empty());
      std::size_t ops = compute ? static_cast<std::size_t>(c.compute_ops()) : 0;
      for (const Collective& k : c.collectives) {
        if (k.position == CollectivePosition::Inside)
          ops += static_cast<std::size_t>(inside_transfers(k));
        else
          ops += !(skip && k.time_s == 0 && k.position == CollectivePosition::After);
      }
      return ops;
    };
    const auto unit_ops = [&](const UnitCost& u) {
      return phase_ops(u[Phase::F], false) + phase_ops(u[Phase::B], false) +
             phase_ops(u[Phase::W], true);
    };
    const bool rerun = cost.recompute == Recompute::Full;  // emit_recompute
    const auto layer_unit_ops = [&](const UnitCost& u) {
      return unit_ops(u) + (rerun ? phase_ops(u.recompute, false) : 0);
    };
    // With skip no schedule has copies (zero_time_ops_movable).
    const std::size_t copies_and_sends = !skip ? 4 : skips_sends(cost, options) ? 0 : 2;
    std::size_t per_mb = 0, tail = 2 * static_cast<std::size_t>(std::max(schedule.pp, 0));
    for (const ChunkCost& c : cost.chunks) {
      per_mb += copies_and_sends;
      for (const UnitCost& u : c.prologue) per_mb += unit_ops(u);
      for (const UnitCost& u : c.layer_units) per_mb += layer_unit_ops(u);
      for (const UnitCost& u : c.epilogue) per_mb += unit_ops(u);
      tail += 2 * c.grad_buckets.size();
    }
    return per_mb * static_cast<std::size_t>(std::max(schedule.microbatches, 0)) + tail;
  }

  void run() {
    check_shape();
    for (const RankProgram& program : s_.ranks) {
      rank_ = program.rank;
      for (std::size_t i = 0; i < program.instructions.size(); ++i) {
        instruction_ = static_cast<int>(i);
        lower_instruction(program.instructions[i]);
      }
      lower_flush();
    }
    connect_stages();
    step_.last_compute = last_compute_;
    detail::lower_step_tail(s_, cost_, step_, *this);
    if (retiming_)
      finish_retime();
    else
      build_.finish(fold_);
  }

  // detail::StepEmitter: the step tail's ops and edges.
  int emit(const DagOp& op, const OpCost& cost) override {
    rank_ = op.rank;
    instruction_ = kNone;
    return new_op(op, cost);
  }
  void edge(int from, int to) override {
    if (recording_) record_edge(from, to);
    link(from, to);
  }

  // Re-timing found the DAG built differently from what this schedule and cost model lower to.
  struct Mismatch {};

 private:
  // ---- checks ---------------------------------------------------------------------------------
  // The schedule's rules were checked by pass_order_error; a failed assertion here is our bug.
  // `what` is a literal: no string is built unless the check fails (it runs once per pass).
  void expect(bool holds, const char* what) const {
    if (!holds)
      throw InternalError("lowering schedule " + s_.name + ", rank " + std::to_string(rank_) +
                          ", instruction " + std::to_string(instruction_) + ": " + what);
  }

  void check_shape() const {
    if (static_cast<int>(cost_.chunks.size()) != stages_)
      throw InputError("schedule", schedule_label(s_),
                       "has " + std::to_string(stages_) +
                           " virtual stages but the cost model has " +
                           std::to_string(cost_.chunks.size()) + " chunks");
  }

  std::size_t pass_index(const Pass& p, int* stage_out) const {
    expect(p.chunk >= 0 && p.chunk < s_.vpp && p.mb >= 0 && p.mb < m_,
           "pass out of range after validation");
    const int stage = s_.virtual_stage(rank_, p.chunk);
    *stage_out = stage;
    return static_cast<std::size_t>(stage) * m_ + p.mb;
  }

  // ---- op emission ----------------------------------------------------------------------------
  // `op` is copied once, into the DAG, with the rank, instruction and cost set there.
  int new_op(const DagOp& op, const OpCost& cost) {
    const int id =
        retiming_ ? overwrite_op(op, cost) : build_.add_op(op, cost, rank_, instruction_);
    if (recording_) record_op(id);
    placed(id, op.stream);
    return id;
  }
  void placed(int id, StreamKind stream) {
    if (stream == StreamKind::Compute) {
      // The blocking rules: a compute op waits for the synchronous collectives and blocking sends
      // issued before it on its rank.
      // Not recorded in a stamp: replaying the op waits for what is pending then.
      for (int dep : pending_sync_[rank_]) link(dep, id);
      pending_sync_[rank_].clear();
      last_compute_[rank_] = id;
    }
  }

  void link(int from, int to) {
    if (retiming_)
      check_dependency(from, to);
    else
      build_.add_dependency(from, to);
  }
  // A synchronous collective or blocking send that the rank's next compute op waits for.
  void hold(int op) {
    pending_sync_[rank_].push_back(op);
    if (recording_) record(StampEvent::Kind::Hold, kNone, op);
  }
  // `to` waits for the rank's last compute op, whichever it is when `to` is emitted.
  void edge_from_last_compute(int to) {
    if (recording_) record(StampEvent::Kind::LastCompute, kNone, to);
    link(last_compute_[rank_], to);
  }

  // ---- re-timing (retime()) -------------------------------------------------------------------
  // The ops come in the order the DAG was built in: the next one must be the DAG's next op in
  // everything but its cost, which it replaces (the DAG's cost table was started afresh).
  int overwrite_op(const DagOp& op, const OpCost& cost) {
    if (retimed_ >= dag_.size()) throw Mismatch{};
    DagOp& old = dag_.ops[retimed_];
    if (!same_structure(old, op)) throw Mismatch{};
    // Ops that shared a cost before share one again (the same unit and phase in another
    // microbatch): the new index of the op's old cost is tried first, a compare for a hash lookup.
    const auto was = static_cast<std::size_t>(old.cost);
    if (was >= new_cost_of_.size()) new_cost_of_.resize(was + 1, -1);
    old.cost = build_.cost_index(cost, new_cost_of_[was]);
    new_cost_of_[was] = old.cost;
    return retimed_++;
  }
  // Field by field, not by copies: the emitted op was just written field by field, and wide
  // copies of it would stall on reading those writes back.
  [[nodiscard]] bool same_structure(const DagOp& a, const DagOp& b) const {
    static_assert(sizeof(DagOp) == 20, "a DagOp field was added: compare it here");
    return a.rank == rank_ && a.instruction == instruction_ && a.mb == b.mb && a.layer == b.layer &&
           a.chunk == b.chunk && a.virtual_stage == b.virtual_stage && a.kind == b.kind &&
           a.stream == b.stream && a.phase == b.phase && a.unit == b.unit &&
           a.collective == b.collective && a.instruction_op == b.instruction_op &&
           a.side == b.side && a.vision == b.vision && a.recompute == b.recompute;
  }
  // Every dependency must be in the DAG's (sorted) list already; each one found is marked.
  // Out of line, so that edge() stays small enough to be inlined where the ops are emitted.
  [[gnu::noinline]] void check_dependency(int from, int to) {
    if (from < 0) return;
    if (from >= retimed_ || to < 0 || to >= retimed_) throw Mismatch{};
    const auto b = dag_.preds.begin() + dag_.pred_begin[to];
    const auto e = dag_.preds.begin() + dag_.pred_begin[to + 1];
    const auto it = std::lower_bound(b, e, from);
    if (it == e || *it != from) throw Mismatch{};
    found_[static_cast<std::size_t>(it - dag_.preds.begin())] = 1;
  }
  // ... and every op and dependency of the DAG must have come again. Stream order follows from
  // the ops' ranks and streams, which matched one by one.
  void finish_retime() const {
    if (retimed_ != dag_.size() || std::find(found_.begin(), found_.end(), 0) != found_.end())
      throw Mismatch{};
  }
  // How many ops the lowering has emitted so far.
  [[nodiscard]] std::size_t emitted() const {
    return retiming_ ? static_cast<std::size_t>(retimed_) : dag_.ops.size();
  }

  [[noreturn, gnu::cold, gnu::noinline]] static void refuse_layer(int layer) {
    throw InputError("model", "layers",
                     "layer " + std::to_string(layer) + " is above the limit of " +
                         std::to_string(kMaxDagLayer) + " layers; use a shallower model");
  }
  [[nodiscard]] static DagOp base_op(const PassState& pass, const UnitCost& unit, Phase phase) {
    DagOp op;
    op.mb = pass.mb;
    op.chunk = static_cast<std::int16_t>(pass.chunk);
    op.virtual_stage = static_cast<std::int16_t>(pass.stage);
    if (unit.layer > kMaxDagLayer) refuse_layer(unit.layer);
    op.layer = static_cast<std::int16_t>(unit.layer);
    op.vision = unit.vision;
    op.unit = unit.kind;
    op.phase = phase;
    op.instruction_op = pass.instruction_op;
    op.side = pass.side;
    return op;
  }

  int emit_collective(const PassState& pass, const UnitCost& unit, Phase phase, const Collective& c,
                      bool recompute = false, int steps = 1) {
    DagOp op = base_op(pass, unit, phase);
    op.recompute = recompute;
    op.kind = OpKind::Collective;
    // Transformer Engine's userbuffers transfers (a copy-engine ring, a pipelined reduce-scatter,
    // a bulk one beside the W) run on streams of their own, not behind the TP collectives: the
    // rank's tp_ring lane. Both stay out of the simulator's contention: the copies take no SMs, the
    // reduce-scatter's SM share is charged on the pieces beside it (Collective::compute_slowdown).
    const bool userbuffers =
        c.copy_engine || c.order == InsideOrder::Pipeline || (c.bulk && bulk_beside_w_);
    op.stream = userbuffers ? StreamKind::TpRing : stream_of(c.group);
    op.collective = c.kind;
    op.copy_engine = userbuffers;
    return new_op(op, {.duration_s = c.time_s / steps, .bytes = c.bytes / steps});
  }

  // One unit in one phase: [Before collectives] compute [After collectives], each collective on
  // its group's stream; a compute with collectives Inside runs in steps beside their transfers
  // (CollectivePosition). F and B move the pass cursor (the activation / gradient flows through
  // the unit); W does not. With async collectives the next unit's Before collectives (sequence
  // parallelism's All-Gather) are issued as soon as this unit's output exists, so they can run
  // under the partner's compute instead of queueing behind the partner's collectives right
  // before their own unit.
  void emit_unit(PassState& pass, const UnitCost& unit, Phase phase, CollectiveMode mode) {
    emit_cost(pass, unit, phase, unit[phase], mode, false);
  }

  // Full recomputation: the layer's forward again, its units in order with their collectives, on
  // the compute stream right before the layer's B units (DagOp::recompute). It is part of the
  // backward pass: it starts once the gradient of the layer's output exists (Megatron's
  // checkpoint backward reruns the forward when autograd reaches it) and the layer's first B unit
  // waits for its end. Its collectives are synchronous as in a plain forward, asynchronous inside
  // braided blocks.
  void emit_recompute(PassState& b, std::span<const UnitCost> layer, CollectiveMode mode) {
    if (cost_.recompute != Recompute::Full) return;
    const CollectiveMode rerun =
        b.instruction_op == InstructionKind::B ? CollectiveMode::Sync : mode;
    for (const UnitCost& unit : layer) emit_cost(b, unit, Phase::F, unit.recompute, rerun, true);
  }

  // The chain of Before collectives of a unit's phase from `input`; returns its last op (`input`
  // when there is none).
  int emit_before(PassState& pass, const UnitCost& unit, Phase phase, const PhaseCost& cost,
                  CollectiveMode mode, bool recompute, int input) {
    const bool flows = phase != Phase::W;
    for (const Collective& c : cost.collectives) {
      if (c.position != CollectivePosition::Before) continue;
      const int op = emit_collective(pass, unit, phase, c, recompute);
      edge(input, op);
      if (from_compute(pass, c)) edge_from_last_compute(op);
      if (mode == CollectiveMode::Sync) hold(op);
      if (flows && pass.first == kNone) pass.first = op;
      input = op;
    }
    return input;
  }

  // The compute of a unit's phase after `input`, in one op, or in pieces beside the transfers of
  // its Inside collectives; returns its last op.
  int emit_compute(PassState& pass, const UnitCost& unit, Phase phase, const PhaseCost& cost,
                   bool recompute, int input) {
    DagOp op = base_op(pass, unit, phase);
    op.recompute = recompute;
    op.kind = OpKind::Compute;
    op.stream = StreamKind::Compute;
    const int steps = cost.compute_steps();
    if (steps == 1) {
      const int compute = new_op(op, {.duration_s = cost.time_s,
                                      .alloc_bytes = cost.alloc_bytes,
                                      .free_bytes = cost.free_bytes});
      if (!recompute) note_unit(pass.stage, unit, phase, compute);
      edge(input, compute);
      return compute;
    }
    // Piece 0 and transfer 0 start together; transfer j follows transfer j - 1 and piece j - 1;
    // piece j + 1 waits for transfer j. The compute before the pieces' segment runs as one op
    // ahead of them (the transfers start after it: it produces what they send), the compute
    // after it as one op behind them. The activations are saved by the first op and freed by the
    // last.
    const Collective& inside =
        *std::find_if(cost.collectives.begin(), cost.collectives.end(),
                      [](const Collective& c) { return c.position == CollectivePosition::Inside; });
    const bool whole = inside.segment_begin == 0 && inside.segment_end == 1;
    const double head_s = cost.time_s * inside.segment_begin;
    const double tail_s = cost.time_s * (1 - inside.segment_end);
    const double piece_s =
        inside.compute_slowdown *
        (whole ? cost.time_s / steps
               : cost.time_s * (inside.segment_end - inside.segment_begin) / steps);
    const bool head = inside.segment_begin > 0, tail = inside.segment_end < 1;
    const auto step_op = [&](double duration_s, bool first, bool last) {
      const int id = new_op(op, {.duration_s = duration_s,
                                 .alloc_bytes = first ? cost.alloc_bytes : 0,
                                 .free_bytes = last ? cost.free_bytes : 0});
      if (!recompute) note_unit(pass.stage, unit, phase, id);
      return id;
    };
    if (head) {
      const int lead = step_op(head_s, true, false);
      edge(input, lead);
      input = lead;
    }
    int piece = kNone;
    transfers_.clear();
    if (inside.order == InsideOrder::Pipeline) {
      // Transfer j sends what piece j wrote, after transfer j - 1; the pieces run back to back;
      // the op after them (the unit's output) waits for the last transfer.
      for (int j = 0; j < steps; ++j) {
        const int before = piece;
        piece = step_op(piece_s, j == 0 && !head, false);
        edge(j == 0 ? input : before, piece);
        for (std::size_t k = 0, n = 0; k < cost.collectives.size(); ++k) {
          const Collective& c = cost.collectives[k];
          if (c.position != CollectivePosition::Inside) continue;
          const int t = emit_collective(pass, unit, phase, c, recompute, steps);
          edge(piece, t);
          if (j == 0) {
            transfers_.push_back(t);
          } else {
            edge(transfers_[n], t);
            transfers_[n] = t;
          }
          ++n;
        }
      }
      const int rest = step_op(tail_s, false, true);
      edge(piece, rest);
      for (const int t : transfers_) edge(t, rest);
      return rest;
    }
    for (int j = 0; j < steps; ++j) {
      const int before = piece;
      piece = step_op(piece_s, j == 0 && !head, j + 1 == steps && !tail);
      if (j == 0) edge(input, piece);
      for (const int t : transfers_) edge(t, piece);
      if (j + 1 == steps) break;
      for (std::size_t k = 0, n = 0; k < cost.collectives.size(); ++k) {
        const Collective& c = cost.collectives[k];
        if (c.position != CollectivePosition::Inside) continue;
        const int t = emit_collective(pass, unit, phase, c, recompute, steps - 1);
        edge(j == 0 ? input : transfers_[n], t);
        edge(before, t);
        if (j == 0)
          transfers_.push_back(t);
        else
          transfers_[n] = t;
        ++n;
      }
    }
    if (!tail) return piece;
    const int rest = step_op(tail_s, false, true);
    edge(piece, rest);
    return rest;
  }

  // emit_unit with an explicit cost; `recompute` ops chain on the pass cursor but leave the
  // pass's unit position and prefetched collectives to the B units around them.
  // A unit beside an all-to-all (UnitCost::beside_all_to_all) starts from the last flowing
  // unit's compute instead of the cursor, and leaves the cursor where it was; the flowing unit
  // after it waits for its end. The collectives are issued in the order Megatron-Core issues them
  // (token_dispatcher.py MoEAlltoAllTokenDispatcher): the side unit's before ones right after the
  // compute of the unit before it, ahead of that unit's all-to-all after it, which the compute
  // stream does not wait for (dispatch_preprocess: pre_forward_comm before token_dispatch); the
  // next unit's before ones (its all-to-all) ahead of the side unit's compute (combine_preprocess
  // and token_combine before linear_fc2_forward), the compute stream waiting only at that unit.
  // A recomputed forward runs its units in order.
  void emit_cost(PassState& pass, const UnitCost& unit, Phase phase, const PhaseCost& cost,
                 CollectiveMode mode, bool recompute) {
    if (phase == Phase::W && skips_w(cost)) return;
    const bool flows = phase != Phase::W;
    const bool beside = flows && !recompute && unit.beside_all_to_all;
    const std::vector<const UnitCost*>& flow = flow_[pass.stage];
    const int n = static_cast<int>(flow.size());
    const UnitCost* next = nullptr;  // the flowing unit after this one
    if (flows && !recompute && pass.pos + 1 < n)
      next = flow[phase == Phase::F ? pass.pos + 1 : n - 1 - (pass.pos + 1)];
    const bool before_beside = next != nullptr && next->beside_all_to_all;
    // The collectives before `u`'s compute, when it has some and none waits for the compute
    // stream: issued from `from` without holding the compute stream, the op `u` then starts from.
    const auto issue_before = [&](const UnitCost& u, int from) {
      const Collectives& cs = u[phase].collectives;
      const auto before = [](const Collective& c) {
        return c.position == CollectivePosition::Before;
      };
      if (std::any_of(cs.begin(), cs.end(), before) &&
          std::none_of(cs.begin(), cs.end(),
                       [&](const Collective& c) { return before(c) && from_compute(pass, c); }))
        pass.prefetched = emit_before(pass, u, phase, u[phase], CollectiveMode::Async, false, from);
    };
    int input = flows ? (beside && pass.compute != kNone ? pass.compute : pass.cursor) : kNone;
    bool prefetched = false;
    if (flows && !recompute && pass.prefetched != kNone) {
      prefetched = true;
      input = pass.prefetched;
      pass.prefetched = kNone;
    } else {
      input = emit_before(pass, unit, phase, cost, mode, recompute, input);
    }
    if (beside && next != nullptr && !next->beside_all_to_all) issue_before(*next, pass.cursor);
    const int compute = emit_compute(pass, unit, phase, cost, recompute, input);
    // A rerun may have run since the prefetch.
    if (prefetched && !beside) edge(pass.cursor, compute);
    if (flows && !beside && pass.beside != kNone) {
      edge(pass.beside, compute);
      pass.beside = kNone;
    }
    if (flows && pass.first == kNone) pass.first = compute;
    if (before_beside) issue_before(*next, compute);
    int output = compute;
    for (const Collective& c : cost.collectives) {
      if (c.position != CollectivePosition::After || skips_collective(c)) continue;
      const int op = emit_collective(pass, unit, phase, c, recompute);
      edge(output, op);
      if ((mode == CollectiveMode::Sync && !before_beside) || from_compute(pass, c)) hold(op);
      output = op;
    }
    if (!flows) return;
    if (beside) {
      pass.beside = output;
      ++pass.pos;
      return;
    }
    pass.cursor = output;
    pass.compute = compute;
    if (recompute) return;
    ++pass.pos;
    if (mode == CollectiveMode::Async && next != nullptr && !before_beside)
      issue_before(*next, output);
  }

  // Zero-time ops left out while lowering (LowerOptions::fold_zero_time; docs/simulator.md,
  // "Zero-time ops"). A W unit of uniform mode (no step tail waits for it) that takes no time,
  // moves no memory and has no collective: nothing waits for it but the next op on the compute
  // stream, and it waits for nothing but the previous one (when no synchronous collective or send
  // is pending), so it starts and ends as that one ends and splits no idle gap.
  [[nodiscard]] bool skips_w(const PhaseCost& cost) const {
    return skip_zero_ && cost_.uniform && cost.time_s == 0 && cost.alloc_bytes == 0 &&
           cost.free_bytes == 0 && cost.collectives.empty() && pending_sync_[rank_].empty();
  }
  // A collective after its unit that takes no time on a rank whose stream for its group has run
  // nothing yet (so none that takes time precedes it there): it would end as its unit ends, so
  // what waits for it waits for the unit instead.
  [[nodiscard]] bool skips_collective(const Collective& c) const {
    return skip_zero_ && c.time_s == 0 && c.position == CollectivePosition::After &&
           build_.last_on_stream(rank_, stream_of(c.group)) == kNone;
  }

  // Collective::from_compute outside braided blocks (a plain B instruction).
  [[nodiscard]] static bool from_compute(const PassState& pass, const Collective& c) {
    return c.from_compute && pass.instruction_op == InstructionKind::B;
  }

  // The step tail's inputs: a unit's first F and last W op on its virtual stage.
  void note_unit(int stage, const UnitCost& unit, Phase phase, int op) {
    if (cost_.uniform) return;  // no step tail (lower_step_tail)
    const int index = unit_index(stage, unit);
    if (index < 0) return;
    if (recording_) record(StampEvent::Kind::Unit, index, op);
    note_unit_at(stage, index, phase, op);
  }
  void note_unit_at(int stage, int index, Phase phase, int op) {
    if (phase == Phase::W) step_.last_w[stage][index] = op;
    int& f = step_.first_f[stage][index];
    if (phase == Phase::F && f == kNone) f = op;
  }

  // A unit's index in its stage's flow order (prologue, layer units, epilogue), -1 when it is none
  // of the stage's units: found by its address in the chunk's arrays (no hash lookup per op).
  [[nodiscard]] int unit_index(int stage, const UnitCost& unit) const {
    const ChunkCost& c = cost_.chunks[stage];
    const auto at = reinterpret_cast<std::uintptr_t>(&unit);
    // Its offset in units from `first` when among the n units there, else -1.
    const auto offset = [at](const void* first, std::size_t n) {
      const auto b = reinterpret_cast<std::uintptr_t>(first);
      return at >= b && at - b < n * sizeof(UnitCost)
                 ? static_cast<int>((at - b) / sizeof(UnitCost))
                 : -1;
    };
    const int prologue = static_cast<int>(c.prologue.size());
    if (const int i = offset(c.layer_units.data(), c.layer_units.size()); i >= 0)
      return prologue + i;
    if (const int i = offset(c.prologue.data(), c.prologue.size()); i >= 0) return i;
    if (const int i = offset(c.epilogue.data(), c.epilogue.size()); i >= 0)
      return prologue + static_cast<int>(c.layer_units.size()) + i;
    return -1;
  }

  // A B unit, then its W unless deferred (full backward: the B collective runs under the W).
  // A bulk collective of the B (Collective::bulk) runs on the userbuffers lane when the W runs
  // right after it, and that W's GEMM runs its compute_slowdown slower; a W split off or left for
  // the flush leaves it the plain collective (TE refuses bulk overlap with a delayed wgrad).
  void emit_backward_unit(PassState& b, const UnitCost& unit, bool with_w, CollectiveMode mode) {
    const bool w_follows = with_w && !skips_w(unit[Phase::W]) && !cost_.flushes_w(unit, b.mb);
    const Collectives& cs = unit[Phase::B].collectives;
    const auto bulk =
        std::find_if(cs.begin(), cs.end(), [](const Collective& c) { return c.bulk; });
    bulk_beside_w_ = w_follows && bulk != cs.end();
    emit_unit(b, unit, Phase::B, mode);
    if (bulk_beside_w_) {
      bulk_beside_w_ = false;
      PhaseCost slowed = unit[Phase::W];
      slowed.time_s *= bulk->compute_slowdown;
      PassState w = b;
      emit_cost(w, unit, Phase::W, slowed, mode, false);
      return;
    }
    if (with_w && !skips_w(unit[Phase::W])) {
      PassState w = b;
      emit_w(w, unit, mode);
    }
  }

  // A unit's W, or, when it waits for the pipeline flush (CostModel::flushes_w), its place in the
  // rank's flush.
  void emit_w(PassState& w, const UnitCost& unit, CollectiveMode mode) {
    if (cost_.flushes_w(unit, w.mb)) {
      flush_.push_back(FlushedW{w, &unit});
      return;
    }
    emit_unit(w, unit, Phase::W, mode);
  }

  // Megatron's defer_embedding_wgrad_compute: the W ops the rank's passes left for the flush, in
  // the order they were left, after its last instruction and before the step tail
  // (schedules.py, finish_embedding_wgrad_compute -> drain_embedding_wgrad_compute, called before
  // finalize_model_grads).
  void lower_flush() {
    for (FlushedW& f : flush_) {
      f.pass.phase = Phase::W;
      emit_unit(f.pass, *f.unit, Phase::W, CollectiveMode::Sync);
    }
    flush_.clear();
  }

  // ---- passes ---------------------------------------------------------------------------------
  PassState open_pass(const Pass& p, Phase phase, InstructionKind op, BlockSide side) {
    PassState pass;
    pass_index(p, &pass.stage);
    pass.chunk = p.chunk;
    pass.mb = p.mb;
    pass.phase = phase;
    pass.instruction_op = op;
    pass.side = side;
    return pass;
  }

  [[nodiscard]] std::size_t idx_of(const PassState& pass) const {
    return static_cast<std::size_t>(pass.stage) * m_ + pass.mb;
  }

  // Records the pass's boundary ops for the cross-stage edges and queues its output (activation
  // forward, input gradient backward) for sending at the end of the instruction.
  void close_pass(PassState& pass, std::vector<PassState>& sends) {
    const std::size_t idx = idx_of(pass);
    if (pass.phase == Phase::F) {
      f_first_[idx] = pass.first;
      f_last_[idx] = pass.cursor;
    } else if (pass.phase == Phase::B) {
      b_first_[idx] = pass.first;
      b_last_[idx] = pass.cursor;
    }
    sends.push_back(pass);
    if (recording_) record_close(pass);
  }

  // Sends of the instruction's finished passes when the neighbouring stage sits on another rank
  // (none for the V's turn on the same rank).
  // Batched P2P: the sends that the batch plan puts after this instruction instead (those of its
  // step when it ends one, none otherwise).
  void flush_sends(const std::vector<PassState>& sends) {
    if (batched_) {
      for (const PassState& pass : sends)
        (pass.phase == Phase::F ? closed_f_ : closed_b_)[idx_of(pass)] = pass;
      if (!is_copy(s_.ranks[rank_].instructions[instruction_].op)) prev_sends_[rank_].clear();
      for (const detail::SendRef& ref : plan_.flushed(rank_, instruction_)) {
        const std::size_t idx = static_cast<std::size_t>(ref.stage) * m_ + ref.mb;
        emit_pass_send((ref.phase == Phase::F ? closed_f_ : closed_b_)[idx]);
      }
      return;
    }
    for (const PassState& pass : sends) emit_pass_send(pass);
  }

  void emit_pass_send(const PassState& pass) {
    if (pass.phase == Phase::F && pass.stage + 1 < stages_ && s_.rank_of(pass.stage + 1) != rank_)
      emit_send(pass, s_.rank_of(pass.stage + 1), cost_.chunks[pass.stage].output_bytes);
    if (pass.phase == Phase::B && pass.stage > 0 && s_.rank_of(pass.stage - 1) != rank_)
      emit_send(pass, s_.rank_of(pass.stage - 1), cost_.chunks[pass.stage - 1].output_bytes);
  }

  void emit_send(const PassState& pass, int peer, double bytes) {
    const StreamKind stream =
        peer == (rank_ + 1) % s_.pp ? StreamKind::P2pNext : StreamKind::P2pPrev;
    if (skip_sends_) {
      skip_send(pass, stream);
      return;
    }
    DagOp op;
    op.kind = OpKind::P2P;
    op.stream = stream;
    op.phase = pass.phase;
    op.mb = pass.mb;
    op.chunk = static_cast<std::int16_t>(pass.chunk);
    op.virtual_stage = static_cast<std::int16_t>(pass.stage);
    op.instruction_op = pass.instruction_op;
    op.side = pass.side;
    const int id = new_op(op, {.duration_s = cost_.p2p_time_s(rank_, peer, bytes), .bytes = bytes});
    edge(pass.cursor, id);
    edge(send_after_, id);
    (pass.phase == Phase::F ? send_f_ : send_b_)[idx_of(pass)] = id;
    if (const int until = held_until(); until >= 0)
      held_[rank_].push_back(HeldSend{until, id});
    else if (dag_.p2p_blocking)
      hold(id);
    if (batched_) prev_sends_[rank_].push_back(id);
  }

  // A send of uniform mode under asynchronous P2P (skip_sends_) takes no time and nothing on its
  // rank waits for it, so fold_zero_time would leave it out: what waited for it (the receiving
  // pass) waits for what it waited for instead — its data and the instruction's last compute op,
  // and, through the send before it on its stream, what that one waited for — keeping per stream
  // only the latest op, as the fold's handles do.
  void skip_send(const PassState& pass, StreamKind stream) {
    SendInputs& inputs =
        skipped_on_[static_cast<std::size_t>(rank_) * 2 + (stream == StreamKind::P2pNext ? 0 : 1)];
    for (const int id : {pass.cursor, send_after_}) {
      if (id == kNone) continue;
      const StreamKind on = dag_.ops[id].stream;
      expect(on == StreamKind::Compute || on == StreamKind::Tp,
             "a skipped send waits for an op off the compute and TP streams");
      int& latest = on == StreamKind::Compute ? inputs.compute : inputs.tp;
      latest = std::max(latest, id);
    }
    (pass.phase == Phase::F ? skipped_f_ : skipped_b_)[idx_of(pass)] = inputs;
  }

  // The runtime that runs the order, as the schedule records it (Schedule::p2p_runtime, set by its
  // generator, read from its file or given on import). Megatron (schedules.py:
  // forward_backward_pipelining_without_interleaving, and _with_interleaving) posts each receive
  // in the batch right before its consumer, so a send waits for that. The other runtimes post
  // receives ahead of where their order needs them: the zero-bubble runtime where its planned
  // timeline puts the send (zerobubble/scheduler/communication.py, insert_recv_nodes), the STP
  // trainer and DualPipe by hand (RecvForward commands placed before earlier instructions, sends
  // held back with send=False), and braid the same for designed and imported orders: no send
  // waits for its receiver there.
  void plan_runtime() {
    rendezvous_ = s_.p2p_runtime == P2pRuntime::Megatron;
    // With one chunk per rank Megatron runs the schedule without interleaving (get_forward_
    // backward_func picks forward_backward_pipelining_with_interleaving only with a virtual size),
    // and overlap_p2p_comm is off there (arguments.py turns it off without a virtual size).
    const bool interleaved = rendezvous_ && s_.vpp > 1;
    const detail::Stepping stepping = !interleaved             ? detail::Stepping::Single
                                      : cost_.overlap_p2p_comm ? detail::Stepping::Overlapped
                                                               : detail::Stepping::Paired;
    if (!plan_known_ || memo_->stepping != stepping) {
      plan_ = rendezvous_ ? detail::plan_batches(s_, stepping) : detail::single_steps(s_);
      if (memo_) {
        memo_->batches_known = true;
        memo_->stepping = stepping;
      }
    }
    // forward_backward_pipelining_without_interleaving batches a send with the next receive only
    // across phases (send_forward_recv_backward, send_backward_recv_forward); its warm-up and
    // cool-down call send_forward then recv_forward (send_backward then recv_backward) one after
    // the other, so there the receive is posted once the sends have completed.
    sequential_ = rendezvous_ && !interleaved;
    prev_sends_.resize(s_.pp);
    held_.resize(s_.pp);
    prev_op_.assign(s_.pp, InstructionKind::W);
  }

  // Overlapped P2P: the instruction until whose first compute op the sends being emitted may run
  // (-1: the next compute op, as every held send; p2p_batches.hpp).
  [[nodiscard]] int held_until() const {
    return batched_ && !plan_.held_until.empty() ? plan_.held_until[rank_][instruction_] : -1;
  }
  // The sends held until the instruction about to be lowered join the ones its first compute op
  // waits for.
  void release_held() {
    std::vector<HeldSend>& held = held_[rank_];
    std::erase_if(held, [this](const HeldSend& h) {
      if (h.until != instruction_) return false;
      hold(h.op);
      return true;
    });
  }

  // Batched P2P: the receives a step needs are posted, in the batch with the sends of the rank's
  // previous step, once that step's compute is done (no compute before it: at the start).
  // An instruction joined to the step before it (see p2p_batches.hpp) shares that step's batch.
  void open_batch() {
    if (batched_ && !plan_.held_until.empty()) release_held();
    batch_begin_ = emitted();
    if (batched_ && !plan_.step_start[rank_][instruction_]) return;
    batch_post_ = last_compute_[rank_];
  }

  // Where the instruction's inputs from other ranks were posted (at the start of its step), and its
  // first compute op, which waits for them (the host waits for the batch before launching it).
  void note_receives(const Instruction& in) {
    if (!batched_) return;
    last_compute_after_[rank_].push_back(last_compute_[rank_]);
    int wait = kNone;
    for (std::size_t i = batch_begin_; i < emitted() && wait == kNone; ++i)
      if (dag_.ops[i].stream == StreamKind::Compute) wait = static_cast<int>(i);
    if (is_copy(in.op)) return;
    const bool after_sends = sequential_ && in.op == prev_op_[rank_];
    const auto receive = [&](const Pass& p, Phase phase) {
      int stage = 0;
      const std::size_t idx = pass_index(p, &stage);
      (phase == Phase::F ? recv_post_f_ : recv_post_b_)[idx] = batch_post_;
      (phase == Phase::F ? recv_wait_f_ : recv_wait_b_)[idx] = wait;
      if (after_sends)
        (phase == Phase::F ? recv_after_f_ : recv_after_b_)[idx] = prev_sends_[rank_];
    };
    prev_op_[rank_] = in.op;
    switch (in.op) {
      case InstructionKind::F:
      case InstructionKind::FW:
        receive(in.a, Phase::F);
        break;
      case InstructionKind::B:
        receive(in.a, Phase::B);
        break;
      case InstructionKind::FB:
        receive(in.a, Phase::F);
        receive(in.b, Phase::B);
        break;
      case InstructionKind::FF:
        receive(in.a, Phase::F);
        receive(in.b, Phase::F);
        break;
      case InstructionKind::W:
      case InstructionKind::Offload:
      case InstructionKind::Reload:
        break;
    }
  }

  // The receives that the batch plan posts early: after the receiver's instruction post_after.
  void hoist_receives() {
    for (const detail::HoistedReceive& h : plan_.hoisted) {
      const int to = h.send.phase == Phase::F ? h.send.stage + 1 : h.send.stage - 1;
      const std::size_t idx = static_cast<std::size_t>(to) * m_ + h.send.mb;
      const int post = h.post_after < 0 ? kNone : last_compute_after_[s_.rank_of(to)][h.post_after];
      (h.send.phase == Phase::F ? recv_post_f_ : recv_post_b_)[idx] = post;
    }
  }

  // Batched P2P across ranks: `send`, the input of pass `to`, starts once the receiver has posted
  // its receive, and the receiver's consuming instruction waits for it.
  void connect_batch(int send, std::size_t to, const std::vector<int>& post,
                     const std::vector<int>& wait, const std::vector<std::vector<int>>& after) {
    if (send == kNone) return;
    if (rendezvous_) edge(post[to], send);
    for (int earlier : after[to]) edge(earlier, send);
    edge(send, wait[to]);
  }

  // Whole passes, unbraided.
  void forward_units(PassState& f, int from_layer, CollectiveMode mode) {
    const ChunkCost& chunk = cost_.chunks[f.stage];
    for (int l = from_layer; l < chunk.layer_count(); ++l)
      for (const UnitCost& unit : chunk.layer(l)) emit_unit(f, unit, Phase::F, mode);
    for (const UnitCost& unit : chunk.epilogue) emit_unit(f, unit, Phase::F, mode);
  }
  void forward_prologue(PassState& f, CollectiveMode mode) {
    for (const UnitCost& unit : cost_.chunks[f.stage].prologue) emit_unit(f, unit, Phase::F, mode);
  }
  // Backward of layers [0, to_layer) in reverse, then the prologue.
  void backward_units(PassState& b, int to_layer, bool with_w, CollectiveMode mode) {
    const ChunkCost& chunk = cost_.chunks[b.stage];
    for (int l = to_layer - 1; l >= 0; --l) {
      emit_recompute(b, chunk.layer(l), mode);
      backward_in_reverse(b, chunk.layer(l), with_w, mode);
    }
    // Reverse iterators, not std::views::reverse: clang 14 (the sanitizer and fuzz build) cannot
    // compile libstdc++ 12's ranges.
    for (auto it = chunk.prologue.rbegin(); it != chunk.prologue.rend(); ++it)
      emit_backward_unit(b, *it, with_w, mode);
  }
  void backward_epilogue(PassState& b, bool with_w, CollectiveMode mode) {
    const ChunkCost& chunk = cost_.chunks[b.stage];
    for (auto it = chunk.epilogue.rbegin(); it != chunk.epilogue.rend(); ++it)
      emit_backward_unit(b, *it, with_w, mode);
  }
  void w_units(PassState& w, int to_layer, CollectiveMode mode) {
    const ChunkCost& chunk = cost_.chunks[w.stage];
    for (int l = to_layer - 1; l >= 0; --l) w_in_reverse(w, chunk.layer(l), mode);
    for (auto it = chunk.prologue.rbegin(); it != chunk.prologue.rend(); ++it) emit_w(w, *it, mode);
  }
  void w_epilogue(PassState& w, CollectiveMode mode) {
    const ChunkCost& chunk = cost_.chunks[w.stage];
    for (auto it = chunk.epilogue.rbegin(); it != chunk.epilogue.rend(); ++it) emit_w(w, *it, mode);
  }

  [[nodiscard]] int layers_of(const PassState& p) const {
    return cost_.chunks[p.stage].layer_count();
  }

  // A run of units (a layer, or half of one) in the order each pass walks it: F in order, B
  // (with its W unless deferred) and W in reverse.
  void forward_in_order(PassState& f, std::span<const UnitCost> units, CollectiveMode mode) {
    for (const UnitCost& unit : units) emit_unit(f, unit, Phase::F, mode);
  }
  void backward_in_reverse(PassState& b, std::span<const UnitCost> units, bool with_w,
                           CollectiveMode mode) {
    for (auto it = units.rbegin(); it != units.rend(); ++it)
      emit_backward_unit(b, *it, with_w, mode);
  }
  void w_in_reverse(PassState& w, std::span<const UnitCost> units, CollectiveMode mode) {
    for (auto it = units.rbegin(); it != units.rend(); ++it) emit_w(w, *it, mode);
  }

  // ---- pass stamping --------------------------------------------------------------------------
  // Every instruction of one shape (its kind, rank, chunks and deferred W) lowers to the same ops,
  // but for their microbatch and instruction index, with the same dependencies among them: the
  // passes start from nothing (no cursor), and what they wait for outside the instruction is the
  // synchronous collectives and sends pending on the rank, and its last compute op, both read
  // afresh when a copy is made. So the first such instruction's ops and events are recorded,
  // compiled once into an op block (compile()), and the later ones copy that block whole, handing
  // in only what they wait for from before themselves (replay()). Where zero-time ops are left out
  // while lowering, what is left out depends on whether a synchronous op is pending (skips_w) and
  // each collective stream has run anything (skips_collective) when the instruction starts: both
  // are part of the shape then. Off when re-timing (which checks a DAG against the lowering op by
  // op).
  struct StampEvent {
    enum class Kind : std::uint8_t { Op, Edge, LastCompute, Hold, Unit };
    Kind kind = Kind::Op;
    std::int32_t from = kNone;  // Op: its record; Edge: the input's offset; Unit: the unit's index
    std::int32_t to = kNone;    // the op's offset in the instruction's ops
  };
  struct Stamp {
    bool tried = false;  // recorded once (a later instruction of the shape replays it if valid)
    bool valid = false;  // every event is one replay can repeat
    dag_build::OpBlock block;            // the ops as first emitted, by offset
    std::vector<StampEvent> events;      // while recording; compile() turns them into the rest
    std::vector<PassState> closed;       // the passes closed, their ops as offsets
    int first_compute = kNone;           // waits for the syncs pending on the rank at the start
    int last_compute = kNone;            // the rank's last compute op after the instruction
    std::vector<int> from_last_compute;  // wait for the rank's last compute op at the start
    std::vector<int> held;               // pending on the rank after the instruction
    // The step tail's inputs: a unit's last W op (slot, op). Its first F was noted by the recording
    // (later ones change nothing).
    std::vector<std::pair<int*, int>> last_w;
  };

  // Whether one of the instruction's passes leaves a W for the flush (CostModel::flushes_w):
  // a W, or a B that runs its W, on a stage holding a unit whose W waits for the flush.
  [[nodiscard]] bool leaves_w_for_flush(const Instruction& in) const {
    PassPart parts[2];
    const int n = parts_of(in, parts);
    const int limit = cost_.wgrad_deferral_limit;
    for (int i = 0; i < n; ++i) {
      const PassPart& part = parts[i];
      const bool runs_w =
          part.kind == PassKind::W || (part.kind == PassKind::B && !part.pass.defer_w);
      if (!runs_w || (limit != 0 && part.pass.mb >= limit)) continue;
      int stage = 0;
      pass_index(part.pass, &stage);
      if (flush_w_stage_[stage] != 0) return true;
    }
    return false;
  }

  // The stamp of the instruction's shape, nullptr when it is not stamped.
  Stamp* stamp_for(const Instruction& in) {
    // A replayed instruction would not leave its W for the flush: those are lowered one by one.
    if (!stamping_ || is_copy(in.op) || leaves_w_for_flush(in)) return nullptr;
    const bool braided = is_braided(in.op);
    // Which collective streams of the rank have run nothing yet (skips_collective), 4 bits.
    std::uint64_t idle_streams = 0;
    for (std::size_t k = 0; k < std::size(kCollectiveStreams); ++k)
      idle_streams |=
          std::uint64_t{skip_zero_ && build_.last_on_stream(rank_, kCollectiveStreams[k]) == kNone}
          << k;
    static_assert(std::size(kCollectiveStreams) == 4 && kMaxDagVirtualStages < (1 << 15) &&
                  kMaxDagChunks <= (1 << 15));
    const std::uint64_t key = static_cast<std::uint64_t>(in.op) | std::uint64_t{in.a.defer_w} << 3 |
                              std::uint64_t{braided && in.b.defer_w} << 4 |
                              std::uint64_t{skip_zero_ && pending_sync_[rank_].empty()} << 5 |
                              idle_streams << 6 | static_cast<std::uint64_t>(rank_) << 10 |
                              static_cast<std::uint64_t>(in.a.chunk) << 25 |
                              static_cast<std::uint64_t>(braided ? in.b.chunk : 0) << 40;
    return &stamps_[key];
  }

  void record(StampEvent::Kind kind, int from, int to) {
    stamp_->events.push_back(StampEvent{kind, from, to - stamp_base_});
  }
  void record_op(int id) {
    stamp_->events.push_back(StampEvent{StampEvent::Kind::Op,
                                        static_cast<std::int32_t>(stamp_->block.ops.size()),
                                        id - stamp_base_});
    stamp_->block.ops.push_back(dag_.ops[id]);
  }
  // An edge between ops of the instruction; any other (none is known) leaves the shape unstamped.
  void record_edge(int from, int to) {
    if (from < 0) return;
    if (from < stamp_base_ || to < stamp_base_) {
      stamp_usable_ = false;
      return;
    }
    stamp_->events.push_back(
        StampEvent{StampEvent::Kind::Edge, from - stamp_base_, to - stamp_base_});
  }
  [[nodiscard]] int offset_of(int op) {
    if (op == kNone) return kNone;
    if (op < stamp_base_) stamp_usable_ = false;
    return op - stamp_base_;
  }
  void record_close(const PassState& pass) {
    PassState p = pass;
    p.cursor = offset_of(p.cursor);
    p.first = offset_of(p.first);
    p.prefetched = offset_of(p.prefetched);
    stamp_->closed.push_back(p);
  }

  // The recorded events as what a replay does: the ops' dependencies among themselves (the
  // synchronous ops held and the last compute op read inside the instruction become edges), and
  // what they wait for before the instruction or leave pending after it.
  void compile(Stamp& stamp) {
    dag_build::OpBlock& block = stamp.block;
    const int n = static_cast<int>(block.ops.size());
    std::vector<std::pair<int, int>> edges;  // (to, from)
    std::vector<int> pending;
    int last_compute = kNone;
    for (const StampEvent& e : stamp.events) switch (e.kind) {
        case StampEvent::Kind::Op:
          if (block.ops[e.to].stream != StreamKind::Compute) break;
          for (const int h : pending) edges.emplace_back(e.to, h);
          pending.clear();
          if (last_compute == kNone) stamp.first_compute = e.to;
          last_compute = e.to;
          break;
        case StampEvent::Kind::Edge:
          edges.emplace_back(e.to, e.from);
          break;
        case StampEvent::Kind::LastCompute:
          if (last_compute != kNone)
            edges.emplace_back(e.to, last_compute);
          else
            stamp.from_last_compute.push_back(e.to);
          break;
        case StampEvent::Kind::Hold:
          pending.push_back(e.to);
          break;
        case StampEvent::Kind::Unit:
          if (const DagOp& op = block.ops[e.to]; op.phase == Phase::W)
            stamp.last_w.emplace_back(&step_.last_w[op.virtual_stage][e.from], e.to);
          break;
      }
    stamp.last_compute = last_compute;
    stamp.held = std::move(pending);
    std::sort(stamp.from_last_compute.begin(), stamp.from_last_compute.end());
    std::sort(edges.begin(), edges.end());
    edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
    block.pred_begin.assign(static_cast<std::size_t>(n) + 1, 0);
    for (const auto& [to, from] : edges) {
      ++block.pred_begin[to + 1];
      block.preds.push_back(from);
    }
    for (int k = 0; k < n; ++k) block.pred_begin[k + 1] += block.pred_begin[k];
    for (int k = 0; k < n; ++k) {
      const DagOp& op = block.ops[k];
      const std::int32_t s = op.rank * kStreamsPerRank + static_cast<int>(op.stream);
      block.stream.push_back(s);
      block.untimed_off_compute +=
          !(dag_.costs[op.cost].duration_s > 0) && op.stream != StreamKind::Compute;
      auto run =
          std::find_if(block.streams.begin(), block.streams.end(),
                       [s](const dag_build::OpBlock::StreamRun& r) { return r.stream == s; });
      block.stream_prev.push_back(run == block.streams.end() ? kNone : run->last);
      if (run == block.streams.end()) run = block.streams.insert(run, {s, k, 0});
      run->last = k;
      ++run->count;
    }
    stamp.events.clear();
    stamp.events.shrink_to_fit();
  }

  // The instruction's ops from its stamp, then its passes closed.
  void replay(const Stamp& stamp, const Instruction& in, std::vector<PassState>& sends) {
    int stage = 0;
    pass_index(in.a, &stage);  // the range checks of open_pass
    if (is_braided(in.op)) pass_index(in.b, &stage);
    std::vector<dag_build::BlockInput>& inputs = block_inputs_;
    inputs.clear();
    if (const int last = last_compute_[rank_]; last != kNone)
      for (const int at : stamp.from_last_compute) inputs.push_back({at, last});
    std::vector<int>& pending = pending_sync_[rank_];
    if (stamp.first_compute != kNone) {
      for (const int op : pending) inputs.push_back({stamp.first_compute, op});
      pending.clear();
    }
    const int base = build_.add_block(stamp.block, in.a.mb, in.b.mb, instruction_, inputs);
    if (stamp.last_compute != kNone) last_compute_[rank_] = base + stamp.last_compute;
    for (const int op : stamp.held) pending.push_back(base + op);
    for (const auto& [slot, at] : stamp.last_w) *slot = base + at;
    const auto shift = [base](int op) { return op == kNone ? kNone : base + op; };
    for (PassState p : stamp.closed) {
      p.mb = p.side == BlockSide::Second ? in.b.mb : in.a.mb;
      p.cursor = shift(p.cursor);
      p.first = shift(p.first);
      p.prefetched = shift(p.prefetched);
      close_pass(p, sends);
    }
  }

  // ---- instructions ---------------------------------------------------------------------------
  void lower_instruction(const Instruction& in) {
    std::vector<PassState>& sends = sends_;
    sends.clear();
    open_batch();
    Stamp* stamp = stamp_for(in);
    if (stamp != nullptr && stamp->valid) {
      replay(*stamp, in, sends);
    } else if (stamp != nullptr && !stamp->tried) {
      stamp->tried = true;
      stamp_ = stamp;
      stamp_base_ = static_cast<int>(emitted());
      stamp_usable_ = true;
      recording_ = true;
      lower_passes(in, sends);
      recording_ = false;
      stamp->valid = stamp_usable_;
      if (stamp->valid) compile(*stamp);
    } else {
      lower_passes(in, sends);
    }
    note_receives(in);
    // Sends leave at the end of the instruction (Megatron sends after forward_step /
    // backward_step returns): after the instruction's last compute op as well as their data.
    send_after_ = last_compute_[rank_];  // the builder's last_on_stream (not kept re-timing)
    flush_sends(sends);
  }

  // The instruction's passes: their ops and dependencies, each closed into `sends`.
  void lower_passes(const Instruction& in, std::vector<PassState>& sends) {
    switch (in.op) {
      case InstructionKind::F: {
        PassState f = open_pass(in.a, Phase::F, in.op, BlockSide::Plain);
        forward_prologue(f, CollectiveMode::Sync);
        forward_units(f, 0, CollectiveMode::Sync);
        close_pass(f, sends);
        break;
      }
      case InstructionKind::B: {
        PassState b = open_pass(in.a, Phase::B, in.op, BlockSide::Plain);
        const bool with_w = !in.a.defer_w;
        // Full backward: async B collectives (consumed by the next B unit); split: synchronous.
        const CollectiveMode mode = with_w ? CollectiveMode::Async : CollectiveMode::Sync;
        backward_epilogue(b, with_w, mode);
        backward_units(b, layers_of(b), with_w, mode);
        close_pass(b, sends);
        break;
      }
      case InstructionKind::W: {
        PassState w = open_pass(in.a, Phase::W, in.op, BlockSide::Plain);
        w_epilogue(w, CollectiveMode::Sync);
        w_units(w, layers_of(w), CollectiveMode::Sync);
        break;
      }
      case InstructionKind::FB:
        lower_fb(in, sends);
        break;
      case InstructionKind::FW:
        lower_fw(in, sends);
        break;
      case InstructionKind::FF:
        lower_ff(in, sends);
        break;
      case InstructionKind::Offload:
      case InstructionKind::Reload:
        lower_copy(in.op, in.a);
        break;
    }
  }

  // FB (DESIGN §2), per layer pair, F layers in order and B layers in reverse, each layer as its
  // two halves (a dense layer's: PreAttn Attn | PreMLP MLP):
  //   F first half (f) | B second half (b) | W second half (b) | F second half (f) |
  //   B first half (b) | W first half (b)
  // so each side's collectives run under the other's compute. Non-layer units and surplus layers
  // run unbraided around the pairs.
  // A pair of two MoE layers (ChunkCost::has_all_to_all_cuts) runs as six parts instead, in the
  // order of Megatron-Core's fine-grained 1F1B overlap (model_chunk_schedule_plan.py,
  // TransformerLayerSchedulePlan.run: combine_bwd | dispatch_fwd -> dispatch_bwd | combine_fwd on
  // the communication stream beside pre_dispatch_fwd | mlp_bwd -> mlp_bwd_dw -> mlp_fwd |
  // pre_dispatch_bwd on the compute stream):
  //   B from the combine (b) | F to the dispatch (f) | B, W experts (b) | F experts (f) |
  //   B, W to the dispatch (b) | F from the combine (f)
  // so the partner's compute runs between each all-to-all and the unit that waits for it: b's
  // combine backward all-to-all under f's attention, f's dispatch under b's experts, b's
  // dispatch backward under f's experts, f's combine under b's attention backward.
  void lower_fb(const Instruction& in, std::vector<PassState>& sends) {
    constexpr auto A = CollectiveMode::Async;
    PassState f = open_pass(in.a, Phase::F, in.op, BlockSide::First);
    PassState b = open_pass(in.b, Phase::B, in.op, BlockSide::Second);
    const bool with_w = !in.b.defer_w;
    const ChunkCost& fc = cost_.chunks[f.stage];
    const ChunkCost& bc = cost_.chunks[b.stage];
    const int nb = layers_of(b), pairs = std::min(layers_of(f), nb);
    forward_prologue(f, A);
    backward_epilogue(b, with_w, A);
    forward_over_reversed_layers(f, nb, pairs, sends, [&](int fl, int bl) {
      if (fc.has_all_to_all_cuts(fl) && bc.has_all_to_all_cuts(bl)) {
        emit_recompute(b, bc.layer(bl), A);
        backward_half(b, bc.from_combine(bl), with_w);
        forward_in_order(f, fc.to_dispatch(fl), A);
        backward_half(b, bc.between_all_to_alls(bl), with_w);
        forward_in_order(f, fc.between_all_to_alls(fl), A);
        backward_half(b, bc.to_dispatch(bl), with_w);
        forward_in_order(f, fc.from_combine(fl), A);
        return;
      }
      forward_in_order(f, fc.first_half(fl), A);
      emit_recompute(b, bc.layer(bl), A);
      backward_half(b, bc.second_half(bl), with_w);
      forward_in_order(f, fc.second_half(fl), A);
      backward_half(b, bc.first_half(bl), with_w);
    });
    backward_units(b, nb - pairs, with_w, A);
    close_pass(b, sends);
  }

  // The frame FB and FW share: per layer pair k, `pair(k, l)` with l = n_other - 1 - k (F's layer
  // k beside the other pass's layer l, the other pass walking its layers backwards); then F's
  // surplus layers and epilogue, and F's sends.
  template <typename Pair>
  void forward_over_reversed_layers(PassState& f, int n_other, int pairs,
                                    std::vector<PassState>& sends, Pair pair) {
    constexpr auto A = CollectiveMode::Async;
    for (int k = 0; k < pairs; ++k) pair(k, n_other - 1 - k);
    forward_units(f, pairs, A);
    close_pass(f, sends);
  }

  // Part of a layer's backward inside a braided block (a half, or a part around an MoE layer's
  // all-to-alls): its B units in reverse, then (full backward) its W units in reverse, so the B
  // collectives run under the W.
  void backward_half(PassState& b, std::span<const UnitCost> half, bool with_w) {
    for (auto it = half.rbegin(); it != half.rend(); ++it)
      emit_unit(b, *it, Phase::B, CollectiveMode::Async);
    if (!with_w) return;
    PassState w = b;
    w_in_reverse(w, half, CollectiveMode::Async);
  }

  // FW: F first half (f) | W second half (w) | F second half (f) | W first half (w) per layer
  // pair.
  void lower_fw(const Instruction& in, std::vector<PassState>& sends) {
    constexpr auto A = CollectiveMode::Async;
    PassState f = open_pass(in.a, Phase::F, in.op, BlockSide::First);
    PassState w = open_pass(in.b, Phase::W, in.op, BlockSide::Second);
    const ChunkCost& wc = cost_.chunks[w.stage];
    const int nw = layers_of(w), pairs = std::min(layers_of(f), nw);
    forward_prologue(f, A);
    w_epilogue(w, A);
    const ChunkCost& fc = cost_.chunks[f.stage];
    forward_over_reversed_layers(f, nw, pairs, sends, [&](int fl, int wl) {
      forward_in_order(f, fc.first_half(fl), A);
      w_in_reverse(w, wc.second_half(wl), A);
      forward_in_order(f, fc.second_half(fl), A);
      w_in_reverse(w, wc.first_half(wl), A);
    });
    w_units(w, nw - pairs, A);
  }

  // FF: a's first half | b's first half | a's second half | b's second half per layer pair.
  void lower_ff(const Instruction& in, std::vector<PassState>& sends) {
    constexpr auto A = CollectiveMode::Async;
    PassState fa = open_pass(in.a, Phase::F, in.op, BlockSide::First);
    PassState fb = open_pass(in.b, Phase::F, in.op, BlockSide::Second);
    const ChunkCost& ca = cost_.chunks[fa.stage];
    const ChunkCost& cb = cost_.chunks[fb.stage];
    const int pairs = std::min(layers_of(fa), layers_of(fb));
    forward_prologue(fa, A);
    forward_prologue(fb, A);
    for (int k = 0; k < pairs; ++k) {
      forward_in_order(fa, ca.first_half(k), A);
      forward_in_order(fb, cb.first_half(k), A);
      forward_in_order(fa, ca.second_half(k), A);
      forward_in_order(fb, cb.second_half(k), A);
    }
    forward_units(fa, pairs, A);
    close_pass(fa, sends);
    forward_units(fb, pairs, A);
    close_pass(fb, sends);
  }

  // OFFLOAD (device to host, frees the pass's saved activations once its forward has run) or
  // RELOAD (host to device, allocates them again after the offload).
  void lower_copy(InstructionKind copy, const Pass& p) {
    const bool offload = copy == InstructionKind::Offload;
    int stage = 0;
    const std::size_t idx = pass_index(p, &stage);
    const double bytes = cost_.chunks[stage].activation_bytes;
    DagOp op;
    op.kind = offload ? OpKind::Offload : OpKind::Reload;
    op.stream = offload ? StreamKind::D2H : StreamKind::H2D;
    op.mb = p.mb;
    op.chunk = static_cast<std::int16_t>(p.chunk);
    op.virtual_stage = static_cast<std::int16_t>(stage);
    op.instruction_op = copy;
    OpCost c{.duration_s = offload ? cost_.d2h_time_s(bytes) : cost_.h2d_time_s(bytes),
             .bytes = bytes};
    (offload ? c.free_bytes : c.alloc_bytes) = bytes;
    const int id = new_op(op, c);
    edge(offload ? f_last_[idx] : offload_[idx], id);
    // A reload is issued where the RELOAD instruction stands: not before the compute stream has
    // finished what precedes it (else every reload would start as soon as its offload ended and
    // offloading would save nothing), so it hides under the instructions that follow.
    if (!offload) edge(last_compute_[rank_], id);
    (offload ? offload_ : reload_)[idx] = id;
  }

  // ---- cross-stage dependencies ---------------------------------------------------------------
  void connect_stages() {
    if (batched_) hoist_receives();
    for (int k = 0; k < stages_; ++k) {
      // Whether the stage before and after sit on another rank (they do not for the V's turn).
      const bool from_prev = k > 0 && s_.rank_of(k - 1) != s_.rank_of(k);
      const bool from_next = k + 1 < stages_ && s_.rank_of(k + 1) != s_.rank_of(k);
      for (int i = 0; i < m_; ++i) {
        const std::size_t idx = static_cast<std::size_t>(k) * m_ + i;
        expect(f_first_[idx] != kNone && b_first_[idx] != kNone, "a pass was not lowered");
        if (from_prev)
          connect_send(send_f_[idx - m_], skipped_f_, idx - m_, f_first_[idx]);
        else if (k > 0)
          edge(f_last_[idx - m_], f_first_[idx]);
        if (from_next)
          connect_send(send_b_[idx + m_], skipped_b_, idx + m_, b_first_[idx]);
        else if (k + 1 < stages_)
          edge(b_last_[idx + m_], b_first_[idx]);
        else
          edge(f_last_[idx], b_first_[idx]);  // the loss: B of the last stage needs its F
        if (reload_[idx] != kNone) edge(reload_[idx], b_first_[idx]);
        if (!batched_) continue;
        if (from_prev)
          connect_batch(send_f_[idx - m_], idx, recv_post_f_, recv_wait_f_, recv_after_f_);
        if (from_next)
          connect_batch(send_b_[idx + m_], idx, recv_post_b_, recv_wait_b_, recv_after_b_);
      }
    }
  }

  // The input of pass `to` from another rank: the send of pass `from`, or what it waited for when
  // it was skipped.
  void connect_send(int send, const std::vector<SendInputs>& skipped, std::size_t from, int to) {
    edge(send, to);
    if (!skip_sends_) return;
    edge(skipped[from].compute, to);
    edge(skipped[from].tp, to);
  }

  const Schedule& s_;
  const CostModel& cost_;
  Dag& dag_;
  dag_build::DagBuilder build_;
  bool fold_ = false;
  bool skip_zero_ = false;   // zero-time W units and collectives are not created
  bool skip_sends_ = false;  // nor sends (skip_send)
  int stages_ = 0, m_ = 0;
  int rank_ = 0, instruction_ = 0;
  // Per pass (stage * m + mb).
  std::vector<int> f_first_, f_last_, b_first_, b_last_, send_f_, send_b_, offload_, reload_;
  // A skipped send's inputs: per pass, and per rank and P2P stream for the send that follows.
  std::vector<SendInputs> skipped_f_, skipped_b_, skipped_on_;
  std::vector<std::vector<int>> pending_sync_;      // per rank
  std::vector<int> last_compute_;                   // per rank: the last compute op emitted
  std::vector<std::vector<const UnitCost*>> flow_;  // per stage: units in forward order
  std::vector<PassState> sends_;
  // The W units the current rank's passes left for the pipeline flush (lower_flush).
  struct FlushedW {
    PassState pass;
    const UnitCost* unit = nullptr;
  };
  std::vector<FlushedW> flush_;
  std::vector<char> flush_w_stage_;  // per virtual stage: holds a unit with w_in_flush
  std::vector<int> transfers_;       // emit_compute: the last transfer of each Inside collective
  bool bulk_beside_w_ = false;  // emit_backward_unit: the B's bulk collective runs beside its W
  detail::StepInputs step_;
  int send_after_ = kNone;  // last compute op of the instruction whose sends are being emitted
  // Batched P2P (P2pMode::Batched): per pass, where its input's receive was posted (the
  // receiver's last compute op before the consuming instruction, kNone: at the start) and the
  // consuming instruction's first compute op, which waits for the batch.
  bool batched_ = false;
  bool rendezvous_ = true;  // false: receives posted ahead (the zero-bubble runtime)
  std::vector<int> recv_post_f_, recv_post_b_, recv_wait_f_, recv_wait_b_;
  detail::BatchPlan own_plan_;
  detail::BatchPlan& plan_;  // own_plan_, or the one re-timing keeps (LoweringPlan)
  bool plan_known_ = false;  // plan_ made by an earlier re-timing of the schedule
  LoweringPlan* memo_ = nullptr;
  std::vector<PassState> closed_f_, closed_b_;  // per pass: finished, its send maybe held back
  std::vector<std::vector<int>> last_compute_after_;  // per rank and instruction: last compute op
  // Megatron without interleaving: per pass, the sends its receive was posted after (warm-up and
  // cool-down); per rank, the sends of its last instruction with compute and that one's kind.
  bool sequential_ = false;
  std::vector<std::vector<int>> recv_after_f_, recv_after_b_, prev_sends_;
  // Overlapped P2P: per rank, sends whose wait comes at a later instruction (p2p_batches.hpp).
  struct HeldSend {
    int until = 0;  // the instruction whose first compute op waits for it
    int op = 0;
  };
  std::vector<std::vector<HeldSend>> held_;
  std::vector<InstructionKind> prev_op_;
  int batch_post_ = kNone;
  std::size_t batch_begin_ = 0;
  // Re-timing: the ops overwritten so far, and per entry of dag_.preds whether it came again.
  bool retiming_ = false;
  int retimed_ = 0;
  std::vector<char> found_;
  std::vector<std::int32_t> new_cost_of_;  // per old cost index: the last new one, -1 none yet
  // Pass stamping: the stamps by instruction shape, and the one being recorded.
  bool stamping_ = false;
  bool recording_ = false;
  bool stamp_usable_ = true;
  int stamp_base_ = 0;  // the recorded instruction's first op
  Stamp* stamp_ = nullptr;
  std::unordered_map<std::uint64_t, Stamp> stamps_;
  std::vector<dag_build::BlockInput> block_inputs_;  // a replay's inputs from before it
};

// The schedule's sizes must fit a DagOp's packed fields (dag.hpp). The configuration's bounds keep
// every generated schedule within them; hand-made and imported schedules are refused here.
void check_op_fields(const Schedule& s) {
  auto refuse = [&](const std::string& what, int limit, const std::string& fix) {
    throw InputError("schedule", schedule_label(s),
                     what + ", above the limit of " + std::to_string(limit) +
                         " that a DAG op holds; use " + fix);
  };
  if (s.vpp > kMaxDagChunks)
    refuse(std::to_string(s.vpp) + " chunks per rank", kMaxDagChunks, "a smaller --vpp");
  if (s.virtual_stages() > kMaxDagVirtualStages)
    refuse(std::to_string(s.virtual_stages()) + " virtual stages (pp x vpp)", kMaxDagVirtualStages,
           "a smaller --pp or --vpp");
  if (s.microbatches > kMaxDagMicrobatches)
    refuse(std::to_string(s.microbatches) + " microbatches", kMaxDagMicrobatches,
           "fewer --microbatches");
  for (const RankProgram& rank : s.ranks)
    if (rank.instructions.size() > static_cast<std::size_t>(kMaxDagInstructions))
      refuse("rank " + std::to_string(rank.rank) + " has " +
                 std::to_string(rank.instructions.size()) + " instructions",
             kMaxDagInstructions, "fewer microbatches or chunks");
}

}  // namespace

Dag lower(const Schedule& schedule, const CostModel& cost, const LowerOptions& options) {
  check_op_fields(schedule);
  if (const std::string error = pass_order_error(schedule); !error.empty())
    throw InputError("schedule", schedule_label(schedule), error);
  Dag dag;
  Lowerer(schedule, cost, options, dag).run();
  return dag;
}

bool retime(Dag& dag, const Schedule& schedule, const CostModel& cost, const LowerOptions& options,
            RetimeMemo* memo) {
  // The fold leaves out ops by their costs; a DAG built with it cannot be matched op by op.
  if (options.fold_zero_time) return false;
  if (dag.schedule != schedule.name || dag.pp != schedule.pp || dag.vpp != schedule.vpp ||
      dag.microbatches != schedule.microbatches || dag.placement != schedule.placement ||
      dag.pred_begin.size() != dag.ops.size() + 1 || dag.stream_begin.empty())
    return false;
  // A memo of this schedule: its pass order was checked when the memo was made.
  const bool known = memo && memo->schedule == &schedule && memo->plan;
  if (!known) {
    if (const std::string error = pass_order_error(schedule); !error.empty())
      throw InputError("schedule", schedule_label(schedule), error);
    if (memo) {
      memo->schedule = &schedule;
      memo->plan = std::make_shared<LoweringPlan>();
    }
  }
  const bool blocking = dag.p2p_blocking;
  try {
    Lowerer lowerer(schedule, cost, options, dag, true, memo ? memo->plan.get() : nullptr);
    if (dag.p2p_blocking != blocking) return false;
    lowerer.run();
  } catch (const Lowerer::Mismatch&) {
    return false;
  }
  return true;
}

}  // namespace braid
