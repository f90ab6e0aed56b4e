// The batch plan by running the ranks' programs instruction by instruction, as the runtimes'
// host loops do: a step's first instruction runs once the sends of the step before it have
// completed, and every instruction once its own receives have; a send completes once its step has
// ended on the sender, the send before it on its P2P stream has completed and its receiver has
// finished the instruction with compute before the consumer's step (it posts the receive then).
// These are the edges the lowering adds, so when no rank can run, the lowered graph would have a
// cycle: then the receiver of a send at the head of its stream posts the receive at once, and the
// run goes on. Progress only enables more progress, so where the run stops does not depend on the
// order the ranks are tried in.
#include "p2p_batches.hpp"

#include <algorithm>
#include <cstddef>
#include <tuple>
#include <utility>

namespace braid::detail {

namespace {

struct Send {
  SendRef ref;
  int rank = 0;
  int produced_at = 0;
  int consumer_rank = 0, consumer_at = -1;
  int stream = 0;  // 0: to rank + 1, 1: to rank - 1 (p = 2: always 0)
  // The receiver's instruction after which it posts (-1: at the start); hoist_one moves it
  // earlier.
  int post = -1;
  bool done = false;
};

// Calls fn(phase, pass) for the passes of an instruction that take an input (F) or a gradient (B)
// and pass one on, in the order the lowering closes them.
template <class Fn>
void for_each_pass(const Instruction& in, Fn&& fn) {
  switch (in.op) {
    case InstructionKind::F:
    case InstructionKind::FW:
      fn(Phase::F, in.a);
      break;
    case InstructionKind::B:
      fn(Phase::B, in.a);
      break;
    case InstructionKind::FB:
      fn(Phase::F, in.a);
      fn(Phase::B, in.b);
      break;
    case InstructionKind::FF:
      fn(Phase::F, in.a);
      fn(Phase::F, in.b);
      break;
    case InstructionKind::W:
    case InstructionKind::Offload:
    case InstructionKind::Reload:
      break;
  }
}

// Per-instruction lists are flat (CSR over the instructions of all ranks, rank by rank): a
// schedule has thousands of instructions and most lists hold one send or none.
class Planner {
 public:
  Planner(const Schedule& s, Stepping stepping) : s_(s), stages_(s.virtual_stages()) {
    const std::size_t ranks = s.ranks.size();
    pc_.assign(ranks, 0);
    start_.resize(ranks);
    base_.assign(ranks + 1, 0);
    for (std::size_t r = 0; r < ranks; ++r) {
      const std::size_t n = s.ranks[r].instructions.size();
      start_[r].assign(n, true);
      base_[r + 1] = base_[r] + static_cast<int>(n);
    }
    queues_.resize(ranks * 2);
    collect();
    if (stepping != Stepping::Single) find_steady_backwards();
    if (stepping == Stepping::Paired) pair();
    for (Send& send : sends_)
      if (send.consumer_at >= 0) send.post = post_at(send.consumer_rank, send.consumer_at);
    if (stepping == Stepping::Overlapped) overlap();
    order_step_sends();
  }

  // The steady state of Megatron's interleaved 1F1B (forward_backward_pipelining_with_
  // interleaving: forward_step, backward_step per pair): a plain B right after a plain F (copies
  // between them aside). A rank whose forwards all come before its first backward has no steady
  // state (all microbatches in warm-up): no backward of it is steady.
  void find_steady_backwards() {
    steady_.resize(s_.ranks.size());
    for (const RankProgram& p : s_.ranks) {
      std::vector<bool>& steady = steady_[p.rank];
      steady.assign(p.instructions.size(), false);
      const auto first_b =
          std::find_if(p.instructions.begin(), p.instructions.end(),
                       [](const Instruction& in) { return in.op == InstructionKind::B; });
      if (std::none_of(first_b, p.instructions.end(),
                       [](const Instruction& in) { return in.op == InstructionKind::F; }))
        continue;
      int last_compute = -1;
      for (std::size_t i = 0; i < p.instructions.size(); ++i) {
        const InstructionKind op = p.instructions[i].op;
        if (is_copy(op)) continue;
        steady[i] = op == InstructionKind::B && last_compute >= 0 &&
                    p.instructions[last_compute].op == InstructionKind::F;
        last_compute = static_cast<int>(i);
      }
    }
  }

  // Without overlap_p2p_comm Megatron communicates once per steady-state pair (then one
  // send_forward_backward_recv_forward_backward): the backward joins the forward's step.
  void pair() {
    for (const RankProgram& p : s_.ranks)
      for (std::size_t i = 0; i < p.instructions.size(); ++i) {
        if (!steady_[p.rank][i]) continue;
        const int f = previous_compute(p.rank, static_cast<int>(i));
        for (std::size_t j = f + 1; j <= i; ++j) start_[p.rank][j] = false;
      }
  }

  // With overlap_p2p_comm (Megatron's default for the interleaved schedule) every instruction is
  // its own step, and in the steady state:
  //   - pp_post_forward sends the forward's output with the receive of the next forward's input,
  //     and pp_post_backward the backward's input gradient with the next backward's receive: a
  //     receive is posted one instruction earlier than its step (the last warm-up forward posts
  //     the first steady backward's, send_backward_recv_backward with overlap_p2p_comm);
  //   - a forward's send is waited for at once (deallocate_pipeline_outputs), a backward's only
  //     in the next backward's pp_post_backward (send_prev_wait_handle), or before the first
  //     cool-down backward (bwd_wait_handles) when the next backward is one.
  // Warm-up and cool-down stay blocking (send_forward_recv_forward, send_backward_recv_backward).
  void overlap() {
    for (int id = 0; id < static_cast<int>(sends_.size()); ++id) {
      Send& send = sends_[id];
      if (send.consumer_at < 0) continue;
      const int r = send.consumer_rank, at = send.consumer_at;
      const int before = previous_compute(r, at);
      if (before < 0) continue;
      const bool early = steady_[r][at] || (s_.ranks[r].instructions[at].op == InstructionKind::F &&
                                            steady_[r][before]);
      if (!early) continue;
      send.post = previous_compute(r, before);
      hoisted_.push_back(id);
    }
    held_until_.resize(s_.ranks.size());
    for (const RankProgram& p : s_.ranks) {
      const int n = static_cast<int>(p.instructions.size());
      held_until_[p.rank].assign(n, -1);
      for (int i = 0; i < n; ++i) {
        if (!steady_[p.rank][i]) continue;
        int next_b = i + 1;
        while (next_b < n && p.instructions[next_b].op != InstructionKind::B) ++next_b;
        if (next_b == n) continue;  // waited for after the loop: gates nothing
        held_until_[p.rank][i] = steady_[p.rank][next_b] ? next_compute(p.rank, next_b) : next_b;
      }
    }
    released_at_.resize(s_.ranks.size());
    for (const RankProgram& p : s_.ranks) {
      released_at_[p.rank].resize(p.instructions.size() + 1);
      for (std::size_t i = 0; i < p.instructions.size(); ++i)
        if (const int until = held_until_[p.rank][i]; until >= 0)
          released_at_[p.rank][until].push_back(static_cast<int>(i));
    }
  }

  // Runs the programs to the end (or to a deadlock no early receive breaks).
  void run() {
    while (true) {
      bool progress = false;
      for (std::size_t r = 0; r < s_.ranks.size(); ++r)
        while (can_run(static_cast<int>(r))) {
          run_instruction(static_cast<int>(r));
          progress = true;
        }
      for (Queue& q : queues_) progress = complete(q) || progress;
      if (finished() || (!progress && !hoist_one())) break;
    }
  }

  [[nodiscard]] BatchPlan plan() const {
    BatchPlan plan;
    plan.step_start = start_;
    plan.held_until = held_until_;
    for (int id : hoisted_) plan.hoisted.push_back(HoistedReceive{sends_[id].ref, sends_[id].post});
    const std::size_t ranks = s_.ranks.size();
    plan.flush_begin.resize(ranks);
    plan.flush.resize(ranks);
    for (std::size_t r = 0; r < ranks; ++r) {
      const int first = base_[r], n = base_[r + 1] - first;
      const int from = step_begin_[first];
      std::vector<int>& begin = plan.flush_begin[r];
      begin.resize(static_cast<std::size_t>(n) + 1);
      for (int i = 0; i <= n; ++i) begin[i] = step_begin_[first + i] - from;
      std::vector<SendRef>& flush = plan.flush[r];
      flush.reserve(static_cast<std::size_t>(begin[n]));
      for (int k = from; k < step_begin_[first + n]; ++k) flush.push_back(sends_[step_ids_[k]].ref);
    }
    return plan;
  }

 private:
  // Issued sends of one (rank, stream) not yet complete: ids_[head, end), first in, first out.
  struct Queue {
    std::vector<int> ids;
    std::size_t head = 0;
    [[nodiscard]] bool empty() const { return head == ids.size(); }
    [[nodiscard]] int front() const { return ids[head]; }
  };

  [[nodiscard]] int pass_key(Phase phase, int stage, int mb) const {
    return ((phase == Phase::F ? 0 : 1) * stages_ + stage) * s_.microbatches + mb;
  }
  // Rank r's instruction i among the instructions of all ranks.
  [[nodiscard]] int at(int r, int i) const { return base_[r] + i; }

  // The sends in production order (rank, instruction, pass) and where each is consumed: each
  // instruction's sends are consecutive ids (produced_begin_), its receives a list of their own.
  void collect() {
    const std::size_t ranks = s_.ranks.size();
    const int vpp = s_.vpp;
    std::vector<int> stage_of(ranks * vpp), rank_of(stages_);
    for (std::size_t r = 0; r < ranks; ++r)
      for (int c = 0; c < vpp; ++c)
        stage_of[r * vpp + c] = s_.virtual_stage(static_cast<int>(r), c);
    for (int k = 0; k < stages_; ++k) rank_of[k] = s_.rank_of(k);
    const auto stage = [&](int rank, const Pass& pass) {
      return stage_of[static_cast<std::size_t>(rank) * vpp + pass.chunk];
    };
    std::vector<int> consumer(static_cast<std::size_t>(2) * stages_ * s_.microbatches, -1);
    std::vector<int> consumer_rank(consumer.size(), -1);
    for (const RankProgram& p : s_.ranks)
      for (std::size_t i = 0; i < p.instructions.size(); ++i)
        for_each_pass(p.instructions[i], [&](Phase phase, const Pass& pass) {
          const int k = stage(p.rank, pass);
          const int from = phase == Phase::F ? k - 1 : k + 1;
          if (from < 0 || from >= stages_ || rank_of[from] == p.rank) return;
          consumer[pass_key(phase, from, pass.mb)] = static_cast<int>(i);
          consumer_rank[pass_key(phase, from, pass.mb)] = p.rank;
        });
    const int total = base_[ranks];
    produced_begin_.assign(static_cast<std::size_t>(total) + 1, 0);
    std::vector<int> receive_count(static_cast<std::size_t>(total) + 1, 0);
    for (const RankProgram& p : s_.ranks)
      for (std::size_t i = 0; i < p.instructions.size(); ++i) {
        produced_begin_[at(p.rank, static_cast<int>(i))] = static_cast<int>(sends_.size());
        for_each_pass(p.instructions[i], [&](Phase phase, const Pass& pass) {
          const int k = stage(p.rank, pass);
          const int to = phase == Phase::F ? k + 1 : k - 1;
          if (to < 0 || to >= stages_ || rank_of[to] == p.rank) return;
          Send send;
          send.ref = SendRef{phase, k, pass.mb};
          send.rank = p.rank;
          send.produced_at = static_cast<int>(i);
          send.consumer_at = consumer[pass_key(phase, k, pass.mb)];
          send.consumer_rank = consumer_rank[pass_key(phase, k, pass.mb)];
          send.stream = rank_of[to] == (p.rank + 1) % s_.pp ? 0 : 1;
          sends_.push_back(send);
          if (send.consumer_at >= 0) ++receive_count[at(send.consumer_rank, send.consumer_at) + 1];
        });
      }
    produced_begin_[total] = static_cast<int>(sends_.size());
    for (int g = 0; g < total; ++g) receive_count[g + 1] += receive_count[g];
    receives_.resize(sends_.size());
    receive_begin_ = receive_count;
    for (std::size_t id = 0; id < sends_.size(); ++id) {
      const Send& send = sends_[id];
      if (send.consumer_at >= 0)
        receives_[receive_count[at(send.consumer_rank, send.consumer_at)]++] = static_cast<int>(id);
    }
  }

  [[nodiscard]] int size(int r) const { return base_[r + 1] - base_[r]; }
  [[nodiscard]] int step_first(int r, int i) const {
    while (i > 0 && !start_[r][i]) --i;
    return i;
  }
  // Rank r's last instruction with compute before `i` (-1: none), and its first after `i` (the
  // rank's instruction count: none).
  [[nodiscard]] int previous_compute(int r, int i) const {
    const std::vector<Instruction>& in = s_.ranks[r].instructions;
    for (int j = i - 1; j >= 0; --j)
      if (!is_copy(in[j].op)) return j;
    return -1;
  }
  [[nodiscard]] int next_compute(int r, int i) const {
    const std::vector<Instruction>& in = s_.ranks[r].instructions;
    const int n = static_cast<int>(in.size());
    for (int j = i + 1; j < n; ++j)
      if (!is_copy(in[j].op)) return j;
    return n;
  }
  // The receiver posts the receive for instruction `at` after the last instruction with compute
  // before `at`'s step (-1: at the start).
  [[nodiscard]] int post_at(int r, int at) const { return previous_compute(r, step_first(r, at)); }

  // The sends of each step, listed at its last instruction in the order they leave: the order
  // their receivers consume them (NCCL matches a pair's sends and receives in issue order, so a
  // held-back send goes behind the ones its receiver needs first). Once, as the steps are fixed.
  void order_step_sends() {
    const std::size_t ranks = s_.ranks.size();
    const int total = base_[ranks];
    step_begin_.assign(static_cast<std::size_t>(total) + 1, 0);
    step_ids_.reserve(sends_.size());
    for (std::size_t r = 0; r < ranks; ++r) {
      const int n = size(static_cast<int>(r));
      int first = 0;
      for (int i = 0; i < n; ++i) {
        const int g = at(static_cast<int>(r), i);
        step_begin_[g] = static_cast<int>(step_ids_.size());
        if (start_[r][i]) first = i;
        if (i + 1 < n && !start_[r][i + 1]) continue;
        const auto from = static_cast<std::ptrdiff_t>(step_ids_.size());
        for (int id = produced_begin_[at(static_cast<int>(r), first)]; id < produced_begin_[g + 1];
             ++id)
          step_ids_.push_back(id);
        std::sort(step_ids_.begin() + from, step_ids_.end(), [this](int a, int b) {
          const Send& x = sends_[a];
          const Send& y = sends_[b];
          return std::tuple(x.consumer_rank, x.consumer_at, a) <
                 std::tuple(y.consumer_rank, y.consumer_at, b);
        });
      }
    }
    step_begin_[total] = static_cast<int>(step_ids_.size());
  }

  // Whether the sends the step starting at `first` waits for, those of the step before it, have
  // all completed (in any order: no list is made, none sorted, while a rank waits).
  // Overlapped: the step before's sends unless they are held until later, and the sends held until
  // this instruction.
  [[nodiscard]] bool waited_sends_done(int r, int first) const {
    if (first == 0) return true;
    const int before = step_first(r, first - 1);
    if (held_until_.empty() || held_until_[r][before] < 0)
      if (!sends_done(r, before, first)) return false;
    if (!held_until_.empty())
      for (const int j : released_at_[r][first])
        if (!sends_done(r, j, j + 1)) return false;
    return true;
  }
  // Whether the sends of rank r's instructions [from, to) have all completed.
  [[nodiscard]] bool sends_done(int r, int from, int to) const {
    for (int id = produced_begin_[at(r, from)]; id < produced_begin_[at(r, to)]; ++id)
      if (!sends_[id].done) return false;
    return true;
  }

  [[nodiscard]] bool finished() const {
    for (std::size_t r = 0; r < s_.ranks.size(); ++r)
      if (pc_[r] < size(static_cast<int>(r))) return false;
    return true;
  }

  // A step's first instruction waits for the sends of the step before it; every instruction for
  // its own receives.
  [[nodiscard]] bool can_run(int r) const {
    const int i = pc_[r];
    if (i >= size(r)) return false;
    if (start_[r][i] && !waited_sends_done(r, i)) return false;
    const int g = at(r, i);
    for (int k = receive_begin_[g]; k < receive_begin_[g + 1]; ++k)
      if (!sends_[receives_[k]].done) return false;
    return true;
  }

  void run_instruction(int r) {
    const int g = at(r, pc_[r]++);
    for (int k = step_begin_[g]; k < step_begin_[g + 1]; ++k) {
      const int id = step_ids_[k];
      queues_[static_cast<std::size_t>(r) * 2 + sends_[id].stream].ids.push_back(id);
    }
  }

  // Completes the sends at the head of a stream whose receivers have posted; true if any did.
  bool complete(Queue& q) {
    bool any = false;
    while (!q.empty()) {
      Send& send = sends_[q.front()];
      if (send.consumer_at >= 0 && send.post >= 0 && pc_[send.consumer_rank] <= send.post) break;
      send.done = true;
      ++q.head;
      any = true;
    }
    return any;
  }

  // No rank can run: a send at the head of its stream still waits for its receiver to post the
  // receive. The receiver posts it now instead, in the batch after its last instruction (as the
  // STP and DualPipe trainers post a receive one instruction early); activations before
  // gradients, then the earliest produced, then the lowest rank. False when no send waits so.
  bool hoist_one() {
    int best = -1;
    const auto priority = [this](int id) {
      const Send& x = sends_[id];
      return std::tuple(x.ref.phase == Phase::F ? 0 : 1, x.produced_at, x.rank, id);
    };
    for (const Queue& q : queues_)
      if (!q.empty() && (best < 0 || priority(q.front()) < priority(best))) best = q.front();
    if (best < 0) return false;
    Send& send = sends_[best];
    send.post = pc_[send.consumer_rank] - 1;
    hoisted_.push_back(best);
    return true;
  }

  const Schedule& s_;
  int stages_ = 0;
  std::vector<Send> sends_;
  std::vector<int> pc_;    // per rank: its next instruction
  std::vector<int> base_;  // per rank: its first instruction's index among all ranks' (at())
  // Per instruction (at()): its sends, produced_begin_[g] .. produced_begin_[g + 1]; those it
  // consumes, receives_[receive_begin_[g] .. receive_begin_[g + 1]); the sends that leave after
  // it (step_ids_ from step_begin_[g], ordered; none unless it ends its step).
  std::vector<int> produced_begin_, receive_begin_, receives_, step_begin_, step_ids_;
  std::vector<std::vector<bool>> start_;      // per rank and instruction: whether it opens a step
  std::vector<std::vector<bool>> steady_;     // per rank and instruction: a steady-state backward
  std::vector<std::vector<int>> held_until_;  // Stepping::Overlapped only (BatchPlan::held_until)
  // Overlapped: per rank and instruction, the instructions whose sends are held until it.
  std::vector<std::vector<std::vector<int>>> released_at_;
  std::vector<Queue> queues_;  // per (rank, stream): issued sends not yet complete
  std::vector<int> hoisted_;
};

}  // namespace

BatchPlan single_steps(const Schedule& schedule) {
  return Planner(schedule, Stepping::Single).plan();
}

BatchPlan plan_batches(const Schedule& schedule, Stepping stepping) {
  Planner planner(schedule, stepping);
  planner.run();
  return planner.plan();
}

}  // namespace braid::detail
