// Placement arithmetic shared by every schedule (DESIGN §3).
#include "braid/schedule.hpp"

namespace braid {

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
