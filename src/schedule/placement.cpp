// Placement arithmetic shared by every schedule (DESIGN §3).
#include "braid/schedule.hpp"

namespace braid {

namespace {

constexpr OpCode kOpCodes[] = {OpCode::F,  OpCode::B,  OpCode::W,       OpCode::FB,
                               OpCode::FW, OpCode::FF, OpCode::Offload, OpCode::Reload};

}  // namespace

const char* name(OpCode op) {
  switch (op) {
    case OpCode::F:
      return "F";
    case OpCode::B:
      return "B";
    case OpCode::W:
      return "W";
    case OpCode::FB:
      return "FB";
    case OpCode::FW:
      return "FW";
    case OpCode::FF:
      return "FF";
    case OpCode::Offload:
      return "OFFLOAD";
    case OpCode::Reload:
      return "RELOAD";
  }
  return "?";
}

std::optional<OpCode> parse_op_code(std::string_view text) {
  for (OpCode op : kOpCodes)
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

int Schedule::rank_of(int stage) const {
  if (placement == Placement::V) return stage < pp ? stage : 2 * pp - 1 - stage;
  return stage % pp;
}

int Schedule::chunk_of(int stage) const {
  if (placement == Placement::V) return stage < pp ? 0 : 1;
  return stage / pp;
}

}  // namespace braid
