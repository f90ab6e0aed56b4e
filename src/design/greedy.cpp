// The greedy list scheduler of greedy.hpp. Time advances rank by rank: a rank whose clock is
// earliest picks among the passes whose dependencies have finished by then; with none ready it
// runs a deferred W if it has one, else waits for the next finish. The times are estimates (sums
// of unit times, no collectives or P2P); the simulator judges the result.
#include "greedy.hpp"

#include <algorithm>
#include <deque>
#include <limits>
#include <vector>

namespace braid::designer {

namespace {

double phase_time(const ChunkCost& chunk, Phase phase) {
  double t = 0;
  auto add = [&](const UnitCost& u) { t += u[phase].time_s; };
  for (const UnitCost& u : chunk.prologue) add(u);
  for (const LayerCost& layer : chunk.layers)
    for (const UnitCost& u : layer) add(u);
  for (const UnitCost& u : chunk.epilogue) add(u);
  return t;
}

constexpr double kNever = std::numeric_limits<double>::infinity();

}  // namespace

std::optional<Schedule> greedy_v_schedule(int p, int m, const CostModel& cost,
                                          const GreedyPolicy& policy) {
  Schedule s;
  s.name = "greedy";
  s.pp = p;
  s.vpp = 2;
  s.microbatches = m;
  s.placement = Placement::V;
  const int stages = 2 * p;
  if (static_cast<int>(cost.chunks.size()) != stages) return std::nullopt;
  std::vector<double> tf(stages), tb(stages), tw(stages);
  for (int k = 0; k < stages; ++k) {
    tf[k] = phase_time(cost.chunks[k], Phase::F);
    tb[k] = phase_time(cost.chunks[k], Phase::B) +
            (policy.split ? 0 : phase_time(cost.chunks[k], Phase::W));
    tw[k] = phase_time(cost.chunks[k], Phase::W);
  }
  // Finish times per (stage, microbatch); kNever = not scheduled yet.
  std::vector<double> f_end(static_cast<size_t>(stages) * m, kNever), b_end(f_end);
  auto at = [m](int stage, int mb) { return static_cast<size_t>(stage) * m + mb; };
  struct RankState {
    double clock = 0;
    int next_f[2] = {0, 0}, next_b[2] = {0, 0};
    int live = 0;
    std::deque<Pass> deferred;
  };
  std::vector<RankState> ranks(p);
  for (int r = 0; r < p; ++r) s.ranks.push_back({r, {}});
  const int total = 2 * m * p;  // backwards to run
  int done_b = 0;
  while (done_b < total || std::any_of(ranks.begin(), ranks.end(),
                                       [](const RankState& x) { return !x.deferred.empty(); })) {
    // The rank with the earliest clock that can do something; its choice by priority.
    int best_rank = -1;
    double best_start = kNever;
    Instruction best_in;
    double best_duration = 0;
    for (int r = 0; r < p; ++r) {
      RankState& st = ranks[r];
      double start = kNever;
      Instruction in;
      double duration = 0;
      auto consider = [&](double ready, const Instruction& cand, double d) {
        const double t = std::max(ready, st.clock);
        if (t < start) start = t, in = cand, duration = d;
      };
      // Backwards first (chunk 1 first: it is nearer the loss), then forwards, then W.
      for (int c : {1, 0}) {
        const int mb = st.next_b[c];
        if (mb >= m) continue;
        const int k = s.virtual_stage(r, c);
        const double ready = k == stages - 1 ? f_end[at(k, mb)] : b_end[at(k + 1, mb)];
        if (f_end[at(k, mb)] == kNever || ready == kNever) continue;
        consider(ready, {InstructionKind::B, {c, mb, policy.split}, {}}, tb[k]);
      }
      // A chunk-0 forward leaves slots free for chunk-1 forwards: with every rank full of
      // chunk-0 activations no microbatch could reach the loss, and nothing would be freed.
      for (int c : policy.later_chunk_first ? std::vector<int>{1, 0} : std::vector<int>{0, 1}) {
        const int mb = st.next_f[c];
        if (mb >= m || st.live + (c == 0 ? policy.reserve : 0) >= policy.mem_limit) continue;
        const int depth = std::max(policy.mem_limit - 1 - r, policy.mem_limit / 2);
        if (c == 0 && policy.warmup_cap && st.next_b[0] + st.next_b[1] == 0 && mb >= depth)
          continue;
        const int k = s.virtual_stage(r, c);
        const double ready = k == 0 ? 0 : f_end[at(k - 1, mb)];
        if (ready == kNever) continue;
        // A forward loses to a backward that is ready as early.
        if (std::max(ready, st.clock) < start)
          consider(ready, {InstructionKind::F, {c, mb, false}, {}}, tf[k]);
      }
      // A deferred W runs when nothing else can start at once (it fills the wait).
      const bool full = st.live + policy.reserve >= policy.mem_limit;
      if (!st.deferred.empty() && (start > st.clock || (policy.w_when_full && full))) {
        const Pass w = st.deferred.front();
        start = st.clock;
        in = {InstructionKind::W, w, {}};
        duration = tw[s.virtual_stage(r, w.chunk)];
      }
      if (start < best_start)
        best_start = start, best_rank = r, best_in = in, best_duration = duration;
    }
    if (best_rank < 0) return std::nullopt;  // the memory limit starves every rank
    RankState& st = ranks[best_rank];
    const double end = best_start + best_duration;
    st.clock = end;
    const Pass& q = best_in.a;
    const int k = s.virtual_stage(best_rank, q.chunk);
    switch (best_in.op) {
      case InstructionKind::F:
        f_end[at(k, q.mb)] = end;
        ++st.next_f[q.chunk];
        ++st.live;
        break;
      case InstructionKind::B:
        b_end[at(k, q.mb)] = end;
        ++st.next_b[q.chunk];
        ++done_b;
        if (q.defer_w) st.deferred.push_back({q.chunk, q.mb, false});
        if (!q.defer_w || !policy.hold_until_w) --st.live;
        break;
      default:  // W
        st.deferred.pop_front();
        if (policy.hold_until_w) --st.live;
        break;
    }
    s.ranks[best_rank].instructions.push_back(best_in);
  }
  return s;
}

void braid_adjacent(Schedule& s) {
  for (RankProgram& rank : s.ranks) {
    auto& list = rank.instructions;
    for (std::size_t k = 0; k + 1 < list.size(); ++k) {
      const Instruction x = list[k], y = list[k + 1];
      const bool xf = x.op == InstructionKind::F, yf = y.op == InstructionKind::F;
      const bool xbw = x.op == InstructionKind::B || x.op == InstructionKind::W;
      const bool ybw = y.op == InstructionKind::B || y.op == InstructionKind::W;
      Instruction fused;
      if (xf && ybw)
        fused = {y.op == InstructionKind::B ? InstructionKind::FB : InstructionKind::FW, x.a, y.a};
      else if (yf && xbw)
        fused = {x.op == InstructionKind::B ? InstructionKind::FB : InstructionKind::FW, y.a, x.a};
      else
        continue;
      list[k] = fused;
      list.erase(list.begin() + static_cast<long>(k) + 1);
      if (!validate(s).ok()) {
        list[k] = x;
        list.insert(list.begin() + static_cast<long>(k) + 1, y);
      }
    }
  }
}

}  // namespace braid::designer
