// The designer's moves. Each edits one rank's program and names what it did; none looks at costs
// (the simulator judges) or at other ranks (validate() rejects cross-rank deadlocks).
#include "moves.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace braid::designer {

namespace {

using Program = std::vector<Instruction>;

std::string at(int rank, int position) {
  return "r" + std::to_string(rank) + "@" + std::to_string(position);
}

bool is_b(const Instruction& in) { return in.op == InstructionKind::B; }
bool is_w(const Instruction& in) { return in.op == InstructionKind::W; }
bool is_f(const Instruction& in) { return in.op == InstructionKind::F; }

// Moves the instruction at `from` to index `to` (of the program after removal).
bool shift(Program& list, int from, int to) {
  const int n = static_cast<int>(list.size());
  if (from < 0 || from >= n || to < 0 || to >= n || from == to) return false;
  const Instruction x = list[from];
  list.erase(list.begin() + from);
  list.insert(list.begin() + to, x);
  return true;
}

// A braided pair becomes its two halves, in either order.
bool unbraid(Program& list, int j, bool swap) {
  PassPart parts[2];
  if (parts_of(list[j], parts) != 2) return false;
  Instruction first = single(parts[0]), second = single(parts[1]);
  if (swap) std::swap(first, second);
  list[j] = first;
  list.insert(list.begin() + j + 1, second);
  return true;
}

// Two adjacent single instructions become one braided block.
bool braid_pair(Program& list, int j) {
  if (j < 0 || j + 1 >= static_cast<int>(list.size())) return false;
  const Instruction x = list[j], y = list[j + 1];
  Instruction fused;
  if (is_f(x) && (is_b(y) || is_w(y)))
    fused = {is_b(y) ? InstructionKind::FB : InstructionKind::FW, x.a, y.a};
  else if (is_f(y) && (is_b(x) || is_w(x)))
    fused = {is_b(x) ? InstructionKind::FB : InstructionKind::FW, y.a, x.a};
  else if (is_f(x) && is_f(y))
    fused = {InstructionKind::FF, x.a, y.a};
  else
    return false;
  list[j] = fused;
  list.erase(list.begin() + j + 1);
  return true;
}

// The backward pass an instruction runs, if any.
Pass* backward_of(Instruction& in) {
  if (in.op == InstructionKind::B) return &in.a;
  if (in.op == InstructionKind::FB) return &in.b;
  return nullptr;
}

// A full backward splits off its weight gradient: the W runs `delay` instructions later, braided
// with a lone forward there when there is one.
bool defer_w(Program& list, int j, int delay) {
  Pass* b = backward_of(list[j]);
  if (b == nullptr || b->defer_w) return false;
  b->defer_w = true;
  const Pass w{b->chunk, b->mb, false};
  const int n = static_cast<int>(list.size());
  const int target = std::min(n, j + 1 + delay);
  if (target < n && is_f(list[target])) {
    list[target] = {InstructionKind::FW, list[target].a, w};
    return true;
  }
  list.insert(list.begin() + target, Instruction{InstructionKind::W, w, {}});
  return true;
}

// A split backward takes its weight gradient back (its W instruction goes away).
bool undefer_w(Program& list, int j) {
  Pass* b = backward_of(list[j]);
  if (b == nullptr || !b->defer_w) return false;
  const Pass w{b->chunk, b->mb, false};
  b->defer_w = false;
  for (std::size_t k = 0; k < list.size(); ++k) {
    if (list[k].op == InstructionKind::W && list[k].a == w) {
      list.erase(list.begin() + static_cast<long>(k));
      return true;
    }
    if (list[k].op == InstructionKind::FW && list[k].b == w) {
      list[k] = {InstructionKind::F, list[k].a, {}};
      return true;
    }
  }
  return true;  // unreachable for a valid parent; validate() would reject the child
}

int find_pass(const Program& list, InstructionKind op, const Pass& p, bool second) {
  for (std::size_t k = 0; k < list.size(); ++k) {
    const Instruction& in = list[k];
    const Pass& q = second ? in.b : in.a;
    if (in.op == op && q.chunk == p.chunk && q.mb == p.mb) return static_cast<int>(k);
  }
  return -1;
}

int forward_at(const Program& list, const Pass& p) {
  for (InstructionKind op :
       {InstructionKind::F, InstructionKind::FB, InstructionKind::FW, InstructionKind::FF}) {
    const int k = find_pass(list, op, p, false);
    if (k >= 0) return k;
  }
  return find_pass(list, InstructionKind::FF, p, true);
}

int backward_at(const Program& list, const Pass& p) {
  const int k = find_pass(list, InstructionKind::B, p, false);
  return k >= 0 ? k : find_pass(list, InstructionKind::FB, p, true);
}

// Offloads the saved activations of one (chunk, microbatch) whose backward comes at least three
// instructions after its forward (as stp-offload places it: OFFLOAD right after the forward,
// RELOAD before the instruction ahead of the backward); or takes an offload back out.
bool toggle_offload(Program& list, int chunk, int mb) {
  const Pass p{chunk, mb, false};
  const int off = find_pass(list, InstructionKind::Offload, p, false);
  if (off >= 0) {
    list.erase(list.begin() + off);
    const int rel = find_pass(list, InstructionKind::Reload, p, false);
    if (rel >= 0) list.erase(list.begin() + rel);
    return true;
  }
  const int f = forward_at(list, p), b = backward_at(list, p);
  if (f < 0 || b < 0 || b - f < 3) return false;
  list.insert(list.begin() + f + 1, Instruction{InstructionKind::Offload, p, {}});
  list.insert(list.begin() + b, Instruction{InstructionKind::Reload, p, {}});
  return true;
}

}  // namespace

bool mutate(Schedule& s, const std::vector<Gap>& gaps, bool tight, bool offload, Rng& rng,
            std::string& what) {
  const bool aimed = !gaps.empty() && rng.below(3) != 0;
  int rank = rng.below(s.pp), position = 0;
  if (aimed) {
    const Gap& g = gaps[rng.below(std::min<int>(8, static_cast<int>(gaps.size())))];
    rank = g.rank;
    position = g.position;
  }
  Program& list = s.ranks[rank].instructions;
  const int n = static_cast<int>(list.size());
  if (n < 2) return false;
  if (!aimed) position = rng.below(n);
  const int kind = rng.below(!offload ? 10 : tight ? 13 : 11);
  switch (kind) {
    case 0:
    case 1:
    case 2: {  // fill the gap: pull a later instruction in front of the waiting one
      const int from = position + 1 + rng.below(kind == 2 ? 12 : 4);
      what = "pull " + at(rank, from) + "->" + std::to_string(position);
      return shift(list, from, position);
    }
    case 3: {  // let the waiting instruction go later
      const int to = position + 1 + rng.below(4);
      what = "push " + at(rank, position) + "->" + std::to_string(to);
      return shift(list, position, to);
    }
    case 4: {
      const bool swap = rng.below(2) == 1;
      what = std::string("unbraid") + (swap ? "-swapped " : " ") + at(rank, position);
      return unbraid(list, position, swap);
    }
    case 5: {
      const int j = position - rng.below(2);
      what = "braid " + at(rank, j);
      return braid_pair(list, j);
    }
    case 6: {
      const int delay = rng.below(8);
      what = "defer-w " + at(rank, position) + " +" + std::to_string(delay);
      return defer_w(list, position, delay);
    }
    case 7:
      what = "undefer-w " + at(rank, position);
      return undefer_w(list, position);
    case 8:
    case 9: {  // any instruction a few places earlier or later
      const int to = position + (rng.below(2) == 0 ? -1 : 1) * (1 + rng.below(3));
      what = "shift " + at(rank, position) + "->" + std::to_string(to);
      return shift(list, position, to);
    }
    default: {
      const int chunk = s.vpp > 1 && rng.below(4) == 0 ? 1 : 0;
      const int mb = rng.below(s.microbatches);
      what = "offload r" + std::to_string(rank) + " " + std::to_string(chunk) + "." +
             std::to_string(mb);
      return toggle_offload(list, chunk, mb);
    }
  }
}

std::uint64_t schedule_hash(const Schedule& s) {
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](std::uint64_t x) {
    h ^= x;
    h *= 1099511628211ULL;
  };
  for (const RankProgram& rank : s.ranks) {
    mix(0xffff);
    for (const Instruction& in : rank.instructions) {
      mix(static_cast<std::uint64_t>(in.op));
      for (const Pass* p : {&in.a, &in.b}) {
        mix(static_cast<std::uint64_t>(p->chunk));
        mix(static_cast<std::uint64_t>(p->mb));
        mix(p->defer_w ? 1 : 0);
      }
    }
  }
  return h;
}

}  // namespace braid::designer
