// ZB-H1 (zero-bubble paper, arXiv 2401.10241, "ZB-H1"; PyTorch's looped zero-bubble order with one
// stage per rank): 1F1B with the backward split into B (input gradient) and W (weight gradient).
// Rank r keeps its first r weight gradients back and runs them, oldest first, after its last B —
// the drain bubble that grows with r — so the in-flight activations stay those of 1F1B.
#include <algorithm>

#include "builder.hpp"

namespace braid::detail {

Schedule make_zb_h1(const ScheduleOptions& options) {
  check_min_microbatches("zb-h1", options, 1, "one per iteration");
  Schedule s;
  s.pp = options.pp;
  s.vpp = 1;
  s.microbatches = options.microbatches;
  s.placement = Placement::Loop;
  const int m = s.microbatches;
  for (int r = 0; r < s.pp; ++r) {
    RankBuilder rank(r, 1);
    const int warmup = std::min(s.pp - r - 1, m);
    int backwards = 0;
    auto backward = [&] {
      rank.b(0, /*defer_w=*/true);
      // The first r backwards leave their W queued; from then on each B is followed by the
      // oldest queued W, so exactly r remain for the drain.
      if (backwards++ >= r) rank.w();
    };
    for (int i = 0; i < warmup; ++i) rank.f(0);
    for (int i = 0; i < m - warmup; ++i) {
      rank.f(0);
      backward();
    }
    for (int i = 0; i < warmup; ++i) backward();
    while (rank.has_deferred_w()) rank.w();
    s.ranks.push_back(std::move(rank.program()));
  }
  return s;
}

}  // namespace braid::detail
