// Combined 1F1B: Megatron-Core's pipeline schedules with --overlap-moe-expert-parallel-comm
// (pipeline_parallel/combined_1f1b.py). Each steady-state forward and backward run as one
// combined step, combined_forward_backward_step, here one FB block (a = the forward, b = the
// backward, full backward), which lowering runs layer pair by layer pair as Megatron's
// TransformerModelChunkSchedulePlan.run does (docs/moe.md). On the loop placement:
// - One rank (forward_backward_no_pipelining calls combined_1f1b_schedule_for_no_pipelining):
//   F0, then F(i+1)&B(i) for i = 0 .. m-2, then B(m-1) alone.
// - v > 1 chunks per rank on p > 1 ranks (forward_backward_pipelining_with_interleaving, its
//   steady state through forward_backward_helper_wrapper to
//   combined_1f1b_schedule_for_interleaved_pipelining): 1F1B-I's order (schedule table, group
//   size N) with one more warm-up forward, (p-r-1)*2 + (v-1)*N + 1, all v*m when that reaches it
//   (get_pp_rank_microbatches: the extra microbatch keeps each combined step's forward and
//   backward independent), then each steady-state pair one FB block, then the remaining
//   backwards.
// - One chunk per rank on p > 1 ranks is refused, as Megatron does (TransformerConfig asserts a
//   virtual pipeline size when the pipeline size is above 1 and the overlap is on). Its
//   non-interleaved runtime cannot run this order: rank r's block sends its backward's gradient
//   only at its end, while the rank before, with blocking sends, waits in its own block for the
//   forward the next rank needs (lowering finds the cycle).
// - One rank with v > 1 chunks: each microbatch's forwards through every chunk (1f1b-i's
//   no-pipeline order, group size 1), one microbatch's v forwards as warm-up, then F&B blocks.
// The warm-up is therefore (p-r-1)*2 + (v-1)*N + 1 throughout, N = 1 on one rank.
#include <algorithm>
#include <string>

#include "braid/error.hpp"
#include "builder.hpp"

namespace braid::detail {

Schedule make_combined_1f1b(const ScheduleOptions& options) {
  constexpr const char* kName = "combined-1f1b";
  const int p = options.pp;
  const int v = options.vpp;
  const int m = options.microbatches;
  if (v < 1) throw InputError("--vpp", std::to_string(v), "chunks per rank must be >= 1");
  if (v == 1 && p > 1)
    throw InputError("--vpp", std::to_string(v),
                     std::string(kName) +
                         " with pp > 1 needs at least 2 chunks per rank (Megatron asserts a "
                         "virtual pipeline size with --overlap-moe-expert-parallel-comm); give "
                         "--vpp 2 or more");
  check_microbatches_per_pp(kName, options);
  if (p > 1 && v > 1) check_interleaved_sizes(kName, options);
  const int n = p == 1 ? 1 : interleaved_group_size(options);
  const auto table = interleaved_table(m, v, n);
  const int total = m * v;

  Schedule s = empty_schedule(p, v, m, Placement::Loop);
  for (int r = 0; r < p; ++r) {
    RankBuilder rank(r, v);
    const int warmup = std::min((p - r - 1) * 2 + (v - 1) * n + 1, total);
    auto forward = [&](int k) { return Pass{table[k].second, table[k].first, false}; };
    auto backward = [&](int k) { return Pass{v - 1 - table[k].second, table[k].first, false}; };
    for (int k = 0; k < warmup; ++k) rank.push({InstructionKind::F, forward(k), {}});
    for (int k = 0; k < total - warmup; ++k)
      rank.push({InstructionKind::FB, forward(k + warmup), backward(k)});
    for (int k = total - warmup; k < total; ++k) rank.push({InstructionKind::B, backward(k), {}});
    s.ranks.push_back(std::move(rank.program()));
  }
  return s;
}

}  // namespace braid::detail
