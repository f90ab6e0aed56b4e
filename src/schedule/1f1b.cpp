// 1F1B (PipeDream-flush, Megatron's non-interleaved schedule): rank r runs p-r-1 warm-up
// forwards, then alternates one forward and one full backward, then drains the backwards.
#include <algorithm>

#include "builder.hpp"

namespace braid::detail {

Schedule make_1f1b(const ScheduleOptions& options) {
  check_min_microbatches("1f1b", options, 1, "one per iteration");
  Schedule s;
  s.pp = options.pp;
  s.vpp = 1;
  s.microbatches = options.microbatches;
  s.placement = Placement::Loop;
  const int m = s.microbatches;
  for (int r = 0; r < s.pp; ++r) {
    RankBuilder rank(r, 1);
    const int warmup = std::min(s.pp - r - 1, m);
    for (int i = 0; i < warmup; ++i) rank.f(0);
    for (int i = 0; i < m - warmup; ++i) {
      rank.f(0);
      rank.b(0, /*defer_w=*/false);
    }
    for (int i = 0; i < warmup; ++i) rank.b(0, false);
    s.ranks.push_back(std::move(rank.program()));
  }
  return s;
}

}  // namespace braid::detail
