// Placement arithmetic shared by every schedule (DESIGN §3).
#include "braid/schedule.hpp"

namespace braid {

namespace {

constexpr InstructionKind kInstructionKinds[] = {
    InstructionKind::F,  InstructionKind::B,  InstructionKind::W,       InstructionKind::FB,
    InstructionKind::FW, InstructionKind::FF, InstructionKind::Offload, InstructionKind::Reload};

}  // namespace

const char* name(InstructionKind op) {
  switch (op) {
    case InstructionKind::F:
      return "F";
    case InstructionKind::B:
      return "B";
    case InstructionKind::W:
      return "W";
    case InstructionKind::FB:
      return "FB";
    case InstructionKind::FW:
      return "FW";
    case InstructionKind::FF:
      return "FF";
    case InstructionKind::Offload:
      return "OFFLOAD";
    case InstructionKind::Reload:
      return "RELOAD";
  }
  return "?";
}

std::optional<InstructionKind> parse_instruction_kind(std::string_view text) {
  for (InstructionKind op : kInstructionKinds)
    if (text == name(op)) return op;
  return std::nullopt;
}

const char* name(Placement placement) { return placement == Placement::V ? "v" : "loop"; }

std::optional<Placement> parse_placement(std::string_view text) {
  for (Placement p : {Placement::Loop, Placement::V})
    if (text == name(p)) return p;
  return std::nullopt;
}

int Schedule::virtual_stage(int rank, int chunk) const {
  if (placement == Placement::V) return chunk == 0 ? rank : 2 * pp - 1 - rank;
  return chunk * pp + rank;
}

std::vector<int> Schedule::virtual_stages_of(int rank) const {
  std::vector<int> stages(vpp);
  for (int c = 0; c < vpp; ++c) stages[c] = virtual_stage(rank, c);
  return stages;
}

int Schedule::rank_of(int stage) const {
  if (placement == Placement::V) return stage < pp ? stage : 2 * pp - 1 - stage;
  return stage % pp;
}

int Schedule::chunk_of(int stage) const {
  if (placement == Placement::V) return stage < pp ? 0 : 1;
  return stage / pp;
}

}  // namespace braid
