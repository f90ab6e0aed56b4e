// STP: the braided V-shape schedule of "Synergistic Tensor and Pipeline Parallelism" (Qi et al.,
// NeurIPS 2025), in the order of the authors' generator (MICLAB-BUPT/STP, stp/schedule.py),
// DESIGN §3. Rank r of p, chunk 0 = stage r, chunk 1 = stage 2p-1-r, for m >= 3p-1:
//   1. 2(p-1-r) x F0                     2. (r+1) x [F0, F1]
//   3. (r+1) x F0, paired as FF (a lone F0 first when r+1 is odd)
//   4. (p-1-r) x [F1&B1*, F0&W]          (B1's W deferred; W = the oldest deferred W)
//   5. 2(m-3p+1)+1+2r blocks alternating F1&B1 and F0&B0, full backward except the last r
//   6. the remaining [B0, F1&B1*]        7. (r+1) x [B0, B1]
//   8. 1+2(p-1-r) entries alternating B0 and [W, W]        9. 2r x W
// Steps 1-4 need 3p-1-r chunk-0 forwards, so the order exists only for m >= 3p-1. For
// 2p <= m < 3p-1 braid builds it for 3p-1 microbatches, removes the extra ones (which keeps it
// valid and V-shaped; their partners run alone) and then re-braids: every adjacent lone F and lone
// B (or lone W) on a rank is fused into FB (FW) unless the fused block would wait on itself
// through another rank (a reachability check on the wait graph).
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "builder.hpp"

namespace braid::detail {

namespace {

RankProgram stp_rank(int p, int m, int r) {
  RankBuilder rank(r, 2);
  for (int i = 0; i < 2 * (p - 1 - r); ++i) rank.f(0);  // step 1
  for (int i = 0; i < r + 1; ++i) {                     // step 2
    rank.f(0);
    rank.f(1);
  }
  if ((r + 1) % 2 == 1) rank.f(0);  // step 3
  for (int i = 0; i < (r + 1) / 2; ++i) rank.ff(0);
  for (int i = 0; i < p - 1 - r; ++i) {  // step 4
    rank.fb(1, 1, /*defer_w=*/true);
    rank.fw(0);
  }
  const int step5 = 2 * (m - 3 * p + 1) + 1 + 2 * r;  // step 5
  const int full = step5 - r;
  for (int i = 0; i < step5; ++i) {
    int chunk = i % 2 == 0 ? 1 : 0;
    rank.fb(chunk, chunk, /*defer_w=*/i >= full);
  }
  const int step6 = m - p - (step5 + 1) / 2;  // step 6
  for (int i = 0; i < step6; ++i) {
    rank.b(0, false);
    rank.fb(1, 1, true);
  }
  for (int i = 0; i < r + 1; ++i) {  // step 7
    rank.b(0, false);
    rank.b(1, false);
  }
  for (int i = 0; i < 1 + 2 * (p - 1 - r); ++i) {  // step 8
    if (i % 2 == 0) {
      rank.b(0, false);
    } else {
      rank.w();
      rank.w();
    }
  }
  for (int i = 0; i < 2 * r; ++i) rank.w();  // step 9
  return std::move(rank.program());
}

bool lone_f(const Instruction& in) { return in.op == OpCode::F; }

// The cross-rank waits of a schedule as plain adjacency (the validator's graph without its
// reporting): node = instruction, edges = program order plus forward / backward dependencies.
struct WaitGraph {
  std::vector<int> first;               // first node of each rank
  std::vector<std::vector<int>> out;    // node -> nodes that wait for it
  std::vector<std::vector<int>> waits;  // node -> cross dependencies (not program order)

  explicit WaitGraph(const Schedule& s) {
    const int p = s.pp, stages = s.virtual_stages(), m = s.microbatches;
    first.assign(p + 1, 0);
    for (int r = 0; r < p; ++r)
      first[r + 1] = first[r] + static_cast<int>(s.ranks[r].instructions.size());
    const int n = first[p];
    out.assign(n, {});
    waits.assign(n, {});
    std::vector<int> f_node(static_cast<size_t>(stages) * m, -1), b_node(f_node);
    auto key = [&](int stage, int mb) { return static_cast<size_t>(stage) * m + mb; };
    for (int r = 0; r < p; ++r)
      for (int k = 0; k < static_cast<int>(s.ranks[r].instructions.size()); ++k) {
        const Instruction& in = s.ranks[r].instructions[k];
        const bool pair = in.op == OpCode::FB || in.op == OpCode::FW || in.op == OpCode::FF;
        if (in.op == OpCode::F || pair)
          f_node[key(s.virtual_stage(r, in.a.chunk), in.a.mb)] = first[r] + k;
        if (in.op == OpCode::FF)
          f_node[key(s.virtual_stage(r, in.b.chunk), in.b.mb)] = first[r] + k;
        if (in.op == OpCode::B) b_node[key(s.virtual_stage(r, in.a.chunk), in.a.mb)] = first[r] + k;
        if (in.op == OpCode::FB)
          b_node[key(s.virtual_stage(r, in.b.chunk), in.b.mb)] = first[r] + k;
      }
    for (int r = 0; r < p; ++r)
      for (int k = 0; k < static_cast<int>(s.ranks[r].instructions.size()); ++k) {
        const int self = first[r] + k;
        if (k > 0) out[self - 1].push_back(self);
        const Instruction& in = s.ranks[r].instructions[k];
        auto forward = [&](const Pass& q) {
          int stage = s.virtual_stage(r, q.chunk);
          if (stage > 0) add(f_node[key(stage - 1, q.mb)], self);
        };
        auto backward = [&](const Pass& q) {
          int stage = s.virtual_stage(r, q.chunk);
          add(stage == stages - 1 ? f_node[key(stage, q.mb)] : b_node[key(stage + 1, q.mb)], self);
        };
        if (in.op == OpCode::F || in.op == OpCode::FB || in.op == OpCode::FW || in.op == OpCode::FF)
          forward(in.a);
        if (in.op == OpCode::FF) forward(in.b);
        if (in.op == OpCode::B) backward(in.a);
        if (in.op == OpCode::FB) backward(in.b);
      }
  }
  void add(int from, int to) {
    out[from].push_back(to);
    waits[to].push_back(from);
  }
  // Whether fusing consecutive nodes x and x+1 of one rank closes a cycle: it does exactly when
  // one of x+1's cross dependencies is x itself or is reachable from x.
  bool fusing_closes_cycle(int x) const {
    const auto& targets = waits[x + 1];
    if (targets.empty()) return false;
    std::vector<char> seen(out.size(), 0);
    std::vector<int> stack{x};
    seen[x] = 1;
    while (!stack.empty()) {
      int u = stack.back();
      stack.pop_back();
      if (std::find(targets.begin(), targets.end(), u) != targets.end()) return true;
      for (int w : out[u])
        if (!seen[w] && !(u == x && w == x + 1)) {
          seen[w] = 1;
          stack.push_back(w);
        }
    }
    return false;
  }
};

// Fuses adjacent single F with single B (or W) into FB (FW) wherever no wait cycle results.
void rebraid(Schedule& s) {
  WaitGraph graph(s);
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    for (size_t k = 0; k + 1 < s.ranks[r].instructions.size(); ++k) {
      auto& list = s.ranks[r].instructions;
      const Instruction x = list[k], y = list[k + 1];
      Instruction fused;
      if (lone_f(x) && (y.op == OpCode::B || y.op == OpCode::W)) {
        fused = {y.op == OpCode::B ? OpCode::FB : OpCode::FW, x.a, y.a};
      } else if (lone_f(y) && (x.op == OpCode::B || x.op == OpCode::W)) {
        fused = {x.op == OpCode::B ? OpCode::FB : OpCode::FW, y.a, x.a};
      } else {
        continue;
      }
      if (graph.fusing_closes_cycle(graph.first[r] + static_cast<int>(k))) continue;
      list[k] = fused;
      list.erase(list.begin() + static_cast<long>(k) + 1);
      graph = WaitGraph(s);
    }
  }
}

}  // namespace

Schedule make_stp(const ScheduleOptions& options) {
  const int p = options.pp;
  check_min_microbatches("stp", options, 2 * p, "2p with p = " + std::to_string(p));
  const int m = options.microbatches;
  const int built = std::max(m, 3 * p - 1);
  Schedule s;
  s.name = "stp";
  s.pp = p;
  s.vpp = 2;
  s.microbatches = built;
  s.placement = Placement::V;
  for (int r = 0; r < p; ++r) s.ranks.push_back(stp_rank(p, built, r));
  if (built != m) {
    prune_microbatches(s, m);
    rebraid(s);
    ValidationResult check = validate(s);
    if (!check.ok()) throw std::logic_error("stp re-braiding broke the schedule: " + check.error);
  }
  return s;
}

}  // namespace braid::detail
