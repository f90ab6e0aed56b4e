// 1F1B-I: Megatron-LM's interleaved 1F1B (forward_backward_pipelining_with_interleaving) on the
// loop placement, v chunks per rank. The order is Megatron's schedule table: microbatches in
// groups of N (microbatch_group_size_per_vp_stage, default p); within a group every chunk in turn
// runs all of the group's microbatches. The k-th backward takes the table's k-th entry with the
// chunk mirrored (v-1-c), so backwards walk the chunks in reverse. Rank r runs
// (p-r-1)*2 + (v-1)*N warm-up forwards (all of them when that reaches v*m), then one forward
// and one full backward per step, then the remaining backwards. With one chunk per rank it is
// plain 1F1B, and with one rank there is no pipeline (as in Megatron).
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "braid/error.hpp"
#include "builder.hpp"

namespace braid::detail {

int interleaved_group_size(const ScheduleOptions& options) {
  return options.group_size > 0 ? options.group_size : options.pp;
}

// Megatron's get_schedule_table: (microbatch, chunk) of each virtual microbatch, in order.
std::vector<std::pair<int, int>> interleaved_table(int m, int v, int n) {
  std::vector<std::pair<int, int>> table;
  table.reserve(static_cast<size_t>(m) * v);
  for (int first = 0; first < m; first += n) {
    // The last group takes every remaining microbatch.
    int last = first + n >= m ? m : first + n;
    for (int c = 0; c < v; ++c)
      for (int mb = first; mb < last; ++mb) table.emplace_back(mb, c);
    if (last == m) break;
  }
  return table;
}

void check_interleaved_sizes(std::string_view name, const ScheduleOptions& options) {
  const int p = options.pp;
  const int m = options.microbatches;
  const int n = interleaved_group_size(options);
  if (n < p)
    throw InputError("--group-size", std::to_string(n),
                     "Megatron's microbatch group size must be between p = " + std::to_string(p) +
                         " and the microbatch count");
  check_min_microbatches(name, options, n,
                         "the microbatch group size N = " + std::to_string(n) + "; p <= N <= m");
  if (m % n != 0 && m % n < p)
    throw InputError("--microbatches", std::to_string(m),
                     std::string(name) + " with group size N = " + std::to_string(n) +
                         " needs m mod N to be 0 or at least p = " + std::to_string(p) +
                         " (Megatron's rule: a shorter last group stalls the pipeline)");
}

Schedule make_1f1b_interleaved(const ScheduleOptions& options) {
  const int p = options.pp;
  const int v = options.vpp;
  const int m = options.microbatches;
  const int n = interleaved_group_size(options);
  if (v < 1) throw InputError("--vpp", std::to_string(v), "chunks per rank must be >= 1");
  // One chunk per rank: Megatron runs its non-interleaved schedule, plain 1F1B (with p = 1 that
  // is F, B per microbatch: no pipeline), under 1f1b-i's rules: m < p is Megatron's to run,
  // where `--schedule 1f1b` refuses it.
  if (v == 1) return one_f_one_b(options, "1f1b-i", false);
  // No pipeline (p = 1, Megatron's forward_backward_no_pipelining): each microbatch runs the
  // forward through every chunk, then the backward back through them.
  if (p == 1) {
    Schedule s = empty_schedule(1, v, m, Placement::Loop);
    RankBuilder rank(0, v);
    for (int mb = 0; mb < m; ++mb) {
      for (int c = 0; c < v; ++c) rank.f(c);
      for (int c = v - 1; c >= 0; --c) rank.b(c, false);
    }
    s.ranks.push_back(std::move(rank.program()));
    return s;
  }
  check_interleaved_sizes("1f1b-i", options);

  Schedule s = empty_schedule(p, v, m, Placement::Loop);
  const auto table = interleaved_table(m, v, n);
  const int total = m * v;
  for (int r = 0; r < p; ++r) {
    RankBuilder rank(r, v);
    int warmup = (p - r - 1) * 2 + (v - 1) * n;
    if (warmup >= total) warmup = total;  // Megatron: all microbatches in warm-up
    auto forward = [&](int k) {
      rank.push({InstructionKind::F, Pass{table[k].second, table[k].first, false}, {}});
    };
    auto backward = [&](int k) {
      rank.push({InstructionKind::B, Pass{v - 1 - table[k].second, table[k].first, false}, {}});
    };
    for (int k = 0; k < warmup; ++k) forward(k);
    for (int k = 0; k < total - warmup; ++k) {
      forward(k + warmup);
      backward(k);
    }
    for (int k = total - warmup; k < total; ++k) backward(k);
    s.ranks.push_back(std::move(rank.program()));
  }
  return s;
}

}  // namespace braid::detail
