// DualPipeV: DeepSeek's V-shaped DualPipe (deepseek-ai/DualPipe, dualpipe/dualpipev.py), the
// published schedule nearest to STP. V placement, m >= 2p. Rank r of p runs eight steps:
//   1. 2(p-r-1) x F0            2. (r+1) x [F0, F1]
//   3. (p-r-1) x [B1*, W, F1]   (zero bubble: the W of the B1 just run)
//   4. (m-2p+r+1) x [F0&B1, F1&B0], overlapped pairs with full backward; on the last rank the
//      first F0 and B1 run apart (DeepSeek: "to further reduce bubble size")
//   5. (p-r-1) x [B1, F1&B0]
//   6. (r+1) x [B1, B0], W deferred from the middle on (from B1 on odd ranks, from B0 on even)
//   7. (p-r-1) x [W, B0*]       8. (r+1) x W
// W always runs the oldest deferred weight gradient (DualPipe's WeightGradStore is a FIFO).
#include <string>

#include "builder.hpp"

namespace braid::detail {

Schedule make_dualpipe_v(const ScheduleOptions& options) {
  const int p = options.pp;
  check_min_microbatches("dualpipe-v", options, 2 * p, "2p with p = " + std::to_string(p));
  const int m = options.microbatches;
  Schedule s = empty_schedule(p, 2, m, Placement::V);
  for (int r = 0; r < p; ++r) {
    RankBuilder rank(r, 2);
    for (int i = 0; i < 2 * (p - r - 1); ++i) rank.f(0);  // step 1
    for (int i = 0; i < r + 1; ++i) {                     // step 2
      rank.f(0);
      rank.f(1);
    }
    for (int i = 0; i < p - r - 1; ++i) {  // step 3
      rank.b(1, /*defer_w=*/true);
      rank.w();
      rank.f(1);
    }
    for (int i = 0; i < m - 2 * p + r + 1; ++i) {  // step 4
      if (i == 0 && r == p - 1) {
        rank.f(0);
        rank.b(1, false);
      } else {
        rank.fb(0, 1, false);
      }
      rank.fb(1, 0, false);
    }
    for (int i = 0; i < p - r - 1; ++i) {  // step 5
      rank.b(1, false);
      rank.fb(1, 0, false);
    }
    bool zb = false;  // step 6
    for (int i = 0; i < r + 1; ++i) {
      if (i == (r + 1) / 2 && r % 2 == 1) zb = true;
      rank.b(1, zb);
      if (i == (r + 1) / 2 && r % 2 == 0) zb = true;
      rank.b(0, zb);
    }
    for (int i = 0; i < p - r - 1; ++i) {  // step 7
      rank.w();
      rank.b(0, true);
    }
    for (int i = 0; i < r + 1; ++i) rank.w();  // step 8
    s.ranks.push_back(std::move(rank.program()));
  }
  return s;
}

}  // namespace braid::detail
