// Batched P2P (P2pMode::Batched) under rendezvous (a send completes only once its receiver has
// posted the receive): how a rank's instructions group into communication steps and where each
// receive is posted. Private to src/dag. A step's receives are posted together once the previous
// step's compute is done, its first instruction waits for the previous step's sends, and its
// sends leave after its last instruction. A step is one instruction, except Megatron's interleaved
// 1F1B without overlap_p2p_comm, which communicates once per steady-state forward + backward pair;
// with it (Megatron's default) a step's receives are posted a step earlier in the steady state.
// Where that order would still deadlock, the receive that blocks it is posted earlier, as soon as
// the receiver gets there (Megatron's interleaved warm-up posts its first backward receive with the
// last warm-up forward).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "braid/cost_model.hpp"
#include "braid/schedule.hpp"

namespace braid::detail {

// A pass whose output crosses to another rank: activation (F) of `stage` or input gradient (B).
struct SendRef {
  Phase phase = Phase::F;
  int stage = 0;
  int mb = 0;
};

// A receive posted earlier than its step would (to break a deadlock): after the receiver's
// instruction `post_after` (-1: at the start).
struct HoistedReceive {
  SendRef send;
  int post_after = -1;
};

struct BatchPlan {
  // step_start[rank][instruction]: the instruction opens a step (the first one always does).
  std::vector<std::vector<bool>> step_start;
  // Overlapped P2P only (empty otherwise): held_until[rank][instruction], the instruction before
  // whose first compute op the sends of this one must have completed, where that is later than
  // the rank's next compute op (-1: the next compute op, as every held send). Megatron's
  // interleaved steady state waits for a backward's sends only in the next backward's
  // post_backward (schedules.py, send_prev_wait_handle).
  std::vector<std::vector<int>> held_until;
  // The sends that leave after a rank's instruction (the last of its step), in stream order:
  // flush[rank][flush_begin[rank][instruction] .. flush_begin[rank][instruction + 1]).
  std::vector<std::vector<int>> flush_begin;
  std::vector<std::vector<SendRef>> flush;
  std::vector<HoistedReceive> hoisted;

  [[nodiscard]] std::span<const SendRef> flushed(int rank, int instruction) const {
    const std::vector<int>& begin = flush_begin[rank];
    return {flush[rank].data() + begin[instruction],
            static_cast<std::size_t>(begin[instruction + 1] - begin[instruction])};
  }
};

// How Megatron's host loop groups a rank's sends and receives into steps.
enum class Stepping {
  // One step per instruction (forward_backward_pipelining_without_interleaving).
  Single,
  // Megatron's interleaved 1F1B without overlap_p2p_comm: a backward right after a forward shares
  // its step (one send_forward_backward_recv_forward_backward per steady-state pair).
  Paired,
  // Megatron's interleaved 1F1B with overlap_p2p_comm (its default): one step per instruction,
  // but in the steady state a forward posts the next forward's receive with its send and a
  // backward the next backward's (pp_post_forward / pp_post_backward), and a backward's sends are
  // waited for only after the next backward (held_until).
  Overlapped,
};

// The plan for `schedule` (validated) under `stepping`. A deadlock that the steps cannot break
// stays: the lowered graph then has the cycle and check_acyclic names it.
BatchPlan plan_batches(const Schedule& schedule, Stepping stepping);
// One step per instruction, each send after its own instruction (no rendezvous to plan for).
BatchPlan single_steps(const Schedule& schedule);

}  // namespace braid::detail
