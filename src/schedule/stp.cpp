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
// through another rank (a reachability check on the wait graph, wait_graph.hpp).
#include <algorithm>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "builder.hpp"
#include "wait_graph.hpp"

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

bool lone_f(const Instruction& in) { return in.op == InstructionKind::F; }

// Fuses adjacent single F with single B (or W) into FB (FW) wherever no wait cycle results.
void rebraid(Schedule& s) {
  detail::WaitGraph graph(s);
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    for (size_t k = 0; k + 1 < s.ranks[r].instructions.size(); ++k) {
      auto& list = s.ranks[r].instructions;
      const Instruction x = list[k], y = list[k + 1];
      Instruction fused;
      if (lone_f(x) && (y.op == InstructionKind::B || y.op == InstructionKind::W)) {
        fused = {y.op == InstructionKind::B ? InstructionKind::FB : InstructionKind::FW, x.a, y.a};
      } else if (lone_f(y) && (x.op == InstructionKind::B || x.op == InstructionKind::W)) {
        fused = {x.op == InstructionKind::B ? InstructionKind::FB : InstructionKind::FW, y.a, x.a};
      } else {
        continue;
      }
      if (graph.fusing_closes_cycle(graph.first[r] + static_cast<int>(k))) continue;
      list[k] = fused;
      list.erase(list.begin() + static_cast<long>(k) + 1);
      graph = detail::WaitGraph(s);
    }
  }
}

}  // namespace

Schedule make_stp(const ScheduleOptions& options) {
  const int p = options.pp;
  check_min_microbatches("stp", options, 2 * p, "2p with p = " + std::to_string(p));
  const int m = options.microbatches;
  const int built = std::max(m, 3 * p - 1);
  Schedule s = empty_schedule(p, 2, built, Placement::V);
  s.name = "stp";
  for (int r = 0; r < p; ++r) s.ranks.push_back(stp_rank(p, built, r));
  if (built != m) {
    prune_microbatches(s, m);
    rebraid(s);
    ValidationResult check = validate(s);
    if (!check.ok()) throw InternalError("stp re-braiding broke the schedule: " + check.error);
  }
  return s;
}

}  // namespace braid::detail
