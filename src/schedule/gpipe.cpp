// GPipe: every forward, then every backward (full B+W), one chunk per rank.
#include "builder.hpp"

namespace braid::detail {

Schedule make_gpipe(const ScheduleOptions& options) {
  check_microbatches_per_pp("gpipe", options);
  Schedule s = empty_schedule(options.pp, 1, options.microbatches, Placement::Loop);
  for (int r = 0; r < s.pp; ++r) {
    RankBuilder rank(r, 1);
    for (int i = 0; i < s.microbatches; ++i) rank.f(0);
    for (int i = 0; i < s.microbatches; ++i) rank.b(0, /*defer_w=*/false);
    s.ranks.push_back(std::move(rank.program()));
  }
  return s;
}

}  // namespace braid::detail
