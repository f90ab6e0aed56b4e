// ZB-V: the handcrafted V pattern of the zero-bubble paper (arXiv 2401.10241 §6), in the per-rank
// order of PyTorch's ScheduleZBVZeroBubble. V placement, B and W split. Rank r:
//   warm-up   2(p-r)-1 x F0, then r x [F1, F0], then p-r x [F1, B1, W1];
//   steady    [F0, B0, W0, F1, B1, W1] until every forward has run;
//   cool-down r x [B0, B1], then p-r x [B0, W0], then the remaining W1, then the remaining W0.
// It is zero-bubble when F = B = W and holds at most 2p chunk activations per rank. For
// m < 2p-1 the pattern is built for 2p-1 microbatches and the extra ones are removed (as PyTorch
// does), which keeps it valid.
#include <algorithm>

#include "builder.hpp"

namespace braid::detail {

Schedule make_zb_v(const ScheduleOptions& options) {
  check_min_microbatches("zb-v", options, 1, "one per iteration");
  const int p = options.pp;
  const int m = options.microbatches;
  const int n = std::max(2 * p - 1, m);
  Schedule s = empty_schedule(p, 2, n, Placement::V);
  for (int r = 0; r < p; ++r) {
    RankProgram prog;
    prog.rank = r;
    int f[2] = {0, 0}, b[2] = {0, 0}, w[2] = {0, 0};
    auto F = [&](int c) {
      prog.instructions.push_back({InstructionKind::F, Pass{c, f[c]++, false}, {}});
    };
    auto B = [&](int c) {
      prog.instructions.push_back({InstructionKind::B, Pass{c, b[c]++, true}, {}});
    };
    auto W = [&](int c) {
      prog.instructions.push_back({InstructionKind::W, Pass{c, w[c]++, false}, {}});
    };
    for (int i = 0; i < 2 * (p - r) - 1; ++i) F(0);
    for (int i = 0; i < r; ++i) {
      F(1);
      F(0);
    }
    for (int i = 0; i < p - r; ++i) {
      F(1);
      B(1);
      W(1);
    }
    while (f[1] < f[0] || f[0] < n) {
      if (f[0] < n) F(0);
      B(0);
      W(0);
      F(1);
      B(1);
      W(1);
    }
    for (int i = 0; i < r; ++i) {
      B(0);
      B(1);
    }
    for (int i = 0; i < p - r; ++i) {
      B(0);
      W(0);
    }
    while (w[1] < b[1]) W(1);
    while (w[0] < b[0]) W(0);
    s.ranks.push_back(std::move(prog));
  }
  prune_microbatches(s, m);
  return s;
}

}  // namespace braid::detail
