// The greedy list scheduler of greedy.hpp. Time advances rank by rank: a rank whose clock is
// earliest picks among the passes whose dependencies have finished by then; with none ready it
// runs a deferred W if it has one, else waits for the next finish. The times are estimates (sums
// of unit times, no collectives or P2P); the simulator judges the result.
#include "greedy.hpp"

#include <algorithm>
#include <deque>
#include <limits>
#include <utility>
#include <vector>

namespace braid::designer {

namespace {

double phase_time(const ChunkCost& chunk, Phase phase) {
  double t = 0;
  for_each_unit(chunk, [&](const UnitCost& u) { t += u[phase].time_s; });
  return t;
}

constexpr double kNever = std::numeric_limits<double>::infinity();

}  // namespace

std::optional<GreedyResult> greedy_v_schedule(int p, int m, const CostModel& cost,
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
  double makespan = 0;
  int peak_live = 0;
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
      double start = kNever, aim = kNever;
      Instruction in;
      double duration = 0;
      // In the drain (no forward left) a rank may drop its order: backwards first, W in waits.
      const bool drained = policy.drain_w_last && st.next_f[0] >= m && st.next_f[1] >= m;
      const bool targeted = !drained && (!policy.target.empty() || !policy.pass_target.empty());
      auto aim_of = [&](int k, Phase phase, int mb) {
        const int slot = 3 * k + static_cast<int>(phase);
        if (!targeted) return 0.0;
        if (!policy.pass_target.empty()) return policy.pass_target[slot * m + mb];
        return targeted ? policy.target_period * mb + policy.target[slot] : 0.0;
      };
      // Earliest start first; with targets, ties go to the pass aimed earliest.
      auto consider = [&](double ready, const Instruction& cand, double d, double a) {
        const double t = std::max(ready, st.clock);
        if (t < start || (targeted && t == start && a < aim))
          start = t, aim = a, in = cand, duration = d;
      };
      if (policy.strict_order && !drained) {
        // The rank's next pass in target order runs next, when its input is there; memory is
        // what the order makes it.
        double next_aim = kNever, ready = kNever, d = 0;
        Instruction next;
        auto offer = [&](double a, const Instruction& cand, double r_s, double dur) {
          if (a < next_aim) next_aim = a, next = cand, ready = r_s, d = dur;
        };
        for (int c : {1, 0}) {
          const int k = s.virtual_stage(r, c);
          if (const int mb = st.next_b[c]; mb < m) {
            const double input = k == stages - 1 ? f_end[at(k, mb)] : b_end[at(k + 1, mb)];
            offer(aim_of(k, Phase::B, mb), {InstructionKind::B, {c, mb, true}, {}},
                  f_end[at(k, mb)] == kNever ? kNever : input, tb[k]);
          }
          if (const int mb = st.next_f[c]; mb < m)
            offer(aim_of(k, Phase::F, mb), {InstructionKind::F, {c, mb, false}, {}},
                  k == 0 ? 0 : f_end[at(k - 1, mb)], tf[k]);
        }
        for (const Pass& w : st.deferred) {
          const int k = s.virtual_stage(r, w.chunk);
          offer(aim_of(k, Phase::W, w.mb), {InstructionKind::W, w, {}}, 0, tw[k]);
        }
        if (ready != kNever) consider(ready, next, d, next_aim);
        if (start < best_start)
          best_start = start, best_rank = r, best_in = in, best_duration = duration;
        continue;
      }
      // Backwards first (chunk 1 first: it is nearer the loss), then forwards, then W.
      for (int c : {1, 0}) {
        const int mb = st.next_b[c];
        if (mb >= m) continue;
        const int k = s.virtual_stage(r, c);
        const double ready = k == stages - 1 ? f_end[at(k, mb)] : b_end[at(k + 1, mb)];
        if (f_end[at(k, mb)] == kNever || ready == kNever) continue;
        consider(ready, {InstructionKind::B, {c, mb, policy.split}, {}}, tb[k],
                 aim_of(k, Phase::B, mb));
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
        // A forward loses to a backward that is ready as early (unless targets decide).
        if (targeted || std::max(ready, st.clock) < start)
          consider(ready, {InstructionKind::F, {c, mb, false}, {}}, tf[k], aim_of(k, Phase::F, mb));
      }
      if (targeted && !st.deferred.empty()) {
        const Pass w = st.deferred.front();
        const int k = s.virtual_stage(r, w.chunk);
        consider(st.clock, {InstructionKind::W, w, {}}, tw[k], aim_of(k, Phase::W, w.mb));
      }
      // A deferred W runs when nothing else can start at once (it fills the wait).
      const bool full = st.live + policy.reserve >= policy.mem_limit;
      if (!targeted && !st.deferred.empty() && (start > st.clock || (policy.w_when_full && full))) {
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
    makespan = std::max(makespan, end);
    const Pass& q = best_in.a;
    const int k = s.virtual_stage(best_rank, q.chunk);
    switch (best_in.op) {
      case InstructionKind::F:
        f_end[at(k, q.mb)] = end;
        ++st.next_f[q.chunk];
        ++st.live;
        peak_live = std::max(peak_live, st.live);
        break;
      case InstructionKind::B:
        b_end[at(k, q.mb)] = end;
        ++st.next_b[q.chunk];
        ++done_b;
        if (q.defer_w) st.deferred.push_back({q.chunk, q.mb, false});
        if (!q.defer_w || !policy.hold_until_w) --st.live;
        break;
      default:  // W
        st.deferred.erase(std::find(st.deferred.begin(), st.deferred.end(), q));
        if (policy.hold_until_w) --st.live;
        break;
    }
    s.ranks[best_rank].instructions.push_back(best_in);
  }
  return GreedyResult{std::move(s), makespan, peak_live};
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
