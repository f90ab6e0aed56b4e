// The activation-offloading post-pass (builder.hpp: insert_offload), shared by stp-offload and
// every other schedule's --offload: after the forward of an offloaded chunk-0 microbatch its
// saved activations go to host memory (OFFLOAD, right after that instruction) and come back
// (RELOAD) one instruction before the instruction that runs its backward, so the copy hides under
// that instruction (the authors' placement in stp/schedule.py). The share `fraction` picks
// microbatches 0 .. round(fraction * m) - 1 (the earliest ones, whose chunk-0 activations wait
// longest through the warm-up). A microbatch whose backward comes less than two instructions
// after its forward is not offloaded (there would be nothing to hide the copies under). Only
// OFFLOAD / RELOAD instructions are added: the compute order is untouched.
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "builder.hpp"

namespace braid::detail {

namespace {

bool has_pass(const Instruction& in, InstructionKind op, int chunk, int mb) {
  auto match = [&](const Pass& p) { return p.chunk == chunk && p.mb == mb; };
  switch (op) {
    case InstructionKind::F:
      return ((in.op == InstructionKind::F || is_braided(in.op)) && match(in.a)) ||
             (in.op == InstructionKind::FF && match(in.b));
    case InstructionKind::B:
      return (in.op == InstructionKind::B && match(in.a)) ||
             (in.op == InstructionKind::FB && match(in.b));
    default:
      return false;
  }
}

}  // namespace

std::string fraction_text(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

void check_fraction(const char* option, double x) {
  if (!(x >= 0.0 && x <= 1.0))
    throw InputError(option, fraction_text(x), "must be between 0 and 1");
}

void insert_offload(Schedule& s, double fraction) {
  const int offloaded = static_cast<int>(std::lround(fraction * s.microbatches));
  if (offloaded <= 0) return;
  for (RankProgram& rank : s.ranks) {
    const auto& list = rank.instructions;
    const size_t n = list.size();
    // First position of each chunk-0 microbatch's forward and backward: one scan.
    std::vector<size_t> f_pos(offloaded, n), b_pos(offloaded, n);
    for (size_t k = 0; k < n; ++k) {
      const Instruction& in = list[k];
      for (const Pass* p : {&in.a, &in.b}) {
        if (p->chunk != 0 || p->mb < 0 || p->mb >= offloaded) continue;
        if (f_pos[p->mb] == n && has_pass(in, InstructionKind::F, 0, p->mb)) f_pos[p->mb] = k;
        if (b_pos[p->mb] == n && has_pass(in, InstructionKind::B, 0, p->mb)) b_pos[p->mb] = k;
      }
    }
    std::vector<std::vector<Instruction>> before(n), after(n);
    for (int i = 0; i < offloaded; ++i) {
      if (f_pos[i] == n || b_pos[i] == n || b_pos[i] < f_pos[i] + 2) continue;
      after[f_pos[i]].push_back({InstructionKind::Offload, Pass{0, i, false}, {}});
      before[b_pos[i] - 1].push_back({InstructionKind::Reload, Pass{0, i, false}, {}});
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
}

}  // namespace braid::detail
