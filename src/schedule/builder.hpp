// RankBuilder: appends one rank's instructions while keeping the bookkeeping every generator
// needs — the next forward / backward microbatch of each chunk and the FIFO of deferred weight
// gradients, so a generator can say "W" (the oldest deferred one) as the published schedules do.
// Internal to src/schedule/; it knows nothing of costs and checks nothing (validate() does).
#pragma once

#include <cassert>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "braid/schedule.hpp"

namespace braid::detail {

class RankBuilder {
 public:
  RankBuilder(int rank, int chunks) : next_f_(chunks, 0), next_b_(chunks, 0) {
    program_.rank = rank;
  }

  // The next forward / backward pass of `chunk` (advances its counter).
  Pass take_f(int chunk) { return Pass{chunk, next_f_[chunk]++, false}; }
  Pass take_b(int chunk, bool defer_w) {
    Pass p{chunk, next_b_[chunk]++, defer_w};
    if (defer_w) deferred_.push_back(Pass{p.chunk, p.mb, false});
    return p;
  }
  // The oldest deferred weight gradient (the caller knows one is pending).
  Pass take_w() {
    assert(!deferred_.empty() && "generator asked for a W with none deferred");
    Pass p = deferred_.front();
    deferred_.pop_front();
    return p;
  }
  bool has_deferred_w() const { return !deferred_.empty(); }
  int next_f(int chunk) const { return next_f_[chunk]; }
  int next_b(int chunk) const { return next_b_[chunk]; }

  void f(int chunk) { push({InstructionKind::F, take_f(chunk), {}}); }
  void b(int chunk, bool defer_w) { push({InstructionKind::B, take_b(chunk, defer_w), {}}); }
  void w() { push({InstructionKind::W, take_w(), {}}); }
  // Braided pairs: forward of `f_chunk` with the backward of `b_chunk` / the oldest W / another F.
  void fb(int f_chunk, int b_chunk, bool defer_w) {
    Pass f = take_f(f_chunk);
    push({InstructionKind::FB, f, take_b(b_chunk, defer_w)});
  }
  void fw(int f_chunk) {
    Pass f = take_f(f_chunk);
    push({InstructionKind::FW, f, take_w()});
  }
  void ff(int chunk) {
    Pass a = take_f(chunk);
    push({InstructionKind::FF, a, take_f(chunk)});
  }
  void push(const Instruction& in) { program_.instructions.push_back(in); }

  RankProgram& program() { return program_; }

 private:
  RankProgram program_;
  std::vector<int> next_f_;
  std::vector<int> next_b_;
  std::deque<Pass> deferred_;
};

// An empty schedule of these sizes, to which a generator appends one RankProgram per rank.
inline Schedule empty_schedule(int pp, int vpp, int microbatches, Placement placement) {
  Schedule s;
  s.pp = pp;
  s.vpp = vpp;
  s.microbatches = microbatches;
  s.placement = placement;
  return s;
}

// The skeleton of 1F1B and ZB-H1 (1f1b.cpp): one chunk per rank, rank r runs min(p-r-1, m)
// warm-up forwards, then one forward and one backward alternately, then the remaining backwards.
// Full backwards (1F1B), or split ones (ZB-H1): rank r keeps the W of its first r backwards back,
// each later B is followed by the oldest queued W, and the r left run after the last B.
Schedule one_f_one_b(const ScheduleOptions& options, std::string_view name, bool split_backward);

// Shared argument checks; each throws InputError naming the option and the allowed values.
void check_pp(const ScheduleOptions& options);
void check_min_microbatches(std::string_view name, const ScheduleOptions& options, int minimum,
                            const std::string& why);
// The traits' rule m >= microbatches_per_pp x p (gpipe and 1f1b: p, as 1f1b-i and the V schedules
// refuse theirs: with fewer microbatches than stages the pipeline never fills); m >= 1 for a
// schedule without one.
void check_microbatches_per_pp(std::string_view name, const ScheduleOptions& options);

// Drops every instruction (or half of a pair) whose microbatch is >= m; pairs with one half left
// become single instructions. Removing passes never creates a dependency cycle, so a valid
// schedule stays valid (used to build small-m variants from a larger valid order).
void prune_microbatches(Schedule& schedule, int m);

// Activation offloading post-pass (offload.cpp): OFFLOAD of chunk-0 microbatches
// 0 .. round(fraction * m) - 1 right after their forward, RELOAD one instruction before their
// backward; the compute instructions and their order are unchanged.
void insert_offload(Schedule& schedule, double fraction);
// Throws InputError(option, value, ...) unless 0 <= x <= 1.
void check_fraction(const char* option, double x);

// Generators, one per file.
Schedule make_gpipe(const ScheduleOptions& options);
Schedule make_1f1b(const ScheduleOptions& options);
Schedule make_1f1b_interleaved(const ScheduleOptions& options);
Schedule make_zb_h1(const ScheduleOptions& options);
Schedule make_zb_v(const ScheduleOptions& options);
Schedule make_stp(const ScheduleOptions& options);
Schedule make_stp_offload(const ScheduleOptions& options);
Schedule make_dualpipe_v(const ScheduleOptions& options);
Schedule make_combined_1f1b(const ScheduleOptions& options);

// 1F1B-I's pieces (1f1b_interleaved.cpp), shared with combined-1f1b: Megatron's microbatch group
// size N (--group-size, default p); its schedule table, the (microbatch, chunk) of each virtual
// microbatch in order (get_schedule_table); and its size rules for p > 1 and v > 1 (p <= N <= m,
// m mod N either 0 or >= p), thrown as InputError naming `name`.
int interleaved_group_size(const ScheduleOptions& options);
std::vector<std::pair<int, int>> interleaved_table(int m, int v, int n);
void check_interleaved_sizes(std::string_view name, const ScheduleOptions& options);

}  // namespace braid::detail
