// STP with activation offloading (the authors' placement in stp/schedule.py): after the forward
// of an offloaded chunk-0 microbatch its saved activations go to host memory (OFFLOAD) and come
// back (RELOAD) one instruction before the instruction that runs its backward, so the copy hides
// under that instruction. offload_fraction picks the share of microbatches offloaded: microbatches
// 0 .. round(fraction * m) - 1 (the earliest ones, whose chunk-0 activations wait longest through
// the warm-up). A microbatch whose backward comes less than two instructions after its forward
// is not offloaded (there would be nothing to hide the copies under).
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "builder.hpp"

namespace braid::detail {

namespace {

// Shortest form of a user-given number (2, 0.25), as it was typed.
std::string number_text(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

bool has_pass(const Instruction& in, OpCode op, int chunk, int mb) {
  auto match = [&](const Pass& p) { return p.chunk == chunk && p.mb == mb; };
  switch (op) {
    case OpCode::F:
      return ((in.op == OpCode::F || in.op == OpCode::FB || in.op == OpCode::FW ||
               in.op == OpCode::FF) &&
              match(in.a)) ||
             (in.op == OpCode::FF && match(in.b));
    case OpCode::B:
      return (in.op == OpCode::B && match(in.a)) || (in.op == OpCode::FB && match(in.b));
    default:
      return false;
  }
}

}  // namespace

Schedule make_stp_offload(const ScheduleOptions& options) {
  const double x = options.offload_fraction;
  if (!(x >= 0.0 && x <= 1.0))
    throw InputError("--offload-fraction", number_text(x), "must be between 0 and 1");
  check_min_microbatches("stp-offload", options, 2 * options.pp,
                         "2p with p = " + std::to_string(options.pp));
  Schedule s = make_stp(options);
  const int offloaded = static_cast<int>(std::lround(x * s.microbatches));
  for (RankProgram& rank : s.ranks) {
    const auto& list = rank.instructions;
    const size_t n = list.size();
    std::vector<std::vector<Instruction>> before(n), after(n);
    for (int i = 0; i < offloaded; ++i) {
      size_t f_pos = n, b_pos = n;
      for (size_t k = 0; k < n; ++k) {
        if (f_pos == n && has_pass(list[k], OpCode::F, 0, i)) f_pos = k;
        if (b_pos == n && has_pass(list[k], OpCode::B, 0, i)) b_pos = k;
      }
      if (f_pos == n || b_pos == n || b_pos < f_pos + 2) continue;
      after[f_pos].push_back({OpCode::Offload, Pass{0, i, false}, {}});
      before[b_pos - 1].push_back({OpCode::Reload, Pass{0, i, false}, {}});
    }
    std::vector<Instruction> out;
    out.reserve(n + 2 * static_cast<size_t>(offloaded));
    for (size_t k = 0; k < n; ++k) {
      out.insert(out.end(), before[k].begin(), before[k].end());
      out.push_back(list[k]);
      out.insert(out.end(), after[k].begin(), after[k].end());
    }
    rank.instructions = std::move(out);
  }
  return s;
}

}  // namespace braid::detail
