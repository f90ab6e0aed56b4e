// 1F1B (PipeDream-flush, Megatron's non-interleaved schedule): rank r runs p-r-1 warm-up
// forwards, then alternates one forward and one full backward, then drains the backwards. The
// skeleton here is ZB-H1's too (zb_h1.cpp), with the backward split.
#include <algorithm>

#include "builder.hpp"

namespace braid::detail {

Schedule one_f_one_b(const ScheduleOptions& options, std::string_view name, bool split_backward) {
  check_microbatches_per_pp(name, options);  // 1f1b: m >= p; zb-h1: m >= 1
  Schedule s = empty_schedule(options.pp, 1, options.microbatches, Placement::Loop);
  const int m = s.microbatches;
  for (int r = 0; r < s.pp; ++r) {
    RankBuilder rank(r, 1);
    const int warmup = std::min(s.pp - r - 1, m);
    int backwards = 0;
    auto backward = [&] {
      rank.b(0, /*defer_w=*/split_backward);
      // Split: the first r backwards leave their W queued; from then on each B is followed by
      // the oldest queued W, so exactly r remain for the drain.
      if (split_backward && backwards++ >= r) rank.w();
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

Schedule make_1f1b(const ScheduleOptions& options) { return one_f_one_b(options, "1f1b", false); }

}  // namespace braid::detail
