// Placement arithmetic shared by every schedule (DESIGN §3), and the names and decoding of the
// schedule's records (instruction kinds, placements, P2P runtimes, an instruction's passes).
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

const char* name(P2pRuntime runtime) {
  switch (runtime) {
    case P2pRuntime::Megatron:
      return "megatron";
    case P2pRuntime::PostedAhead:
      return "posted-ahead";
  }
  return "?";
}

std::optional<P2pRuntime> parse_p2p_runtime(std::string_view text) {
  for (P2pRuntime r : {P2pRuntime::Megatron, P2pRuntime::PostedAhead})
    if (text == name(r)) return r;
  return std::nullopt;
}

int parts_of(const Instruction& in, PassPart out[2]) {
  switch (in.op) {
    case InstructionKind::F:
      out[0] = {PassKind::F, in.a};
      return 1;
    case InstructionKind::B:
      out[0] = {PassKind::B, in.a};
      return 1;
    case InstructionKind::W:
      out[0] = {PassKind::W, in.a};
      return 1;
    case InstructionKind::FB:
      out[0] = {PassKind::F, in.a};
      out[1] = {PassKind::B, in.b};
      return 2;
    case InstructionKind::FW:
      out[0] = {PassKind::F, in.a};
      out[1] = {PassKind::W, in.b};
      return 2;
    case InstructionKind::FF:
      out[0] = {PassKind::F, in.a};
      out[1] = {PassKind::F, in.b};
      return 2;
    case InstructionKind::Offload:
      out[0] = {PassKind::Offload, in.a};
      return 1;
    case InstructionKind::Reload:
      out[0] = {PassKind::Reload, in.a};
      return 1;
  }
  return 0;
}

Instruction single(const PassPart& part) {
  switch (part.kind) {
    case PassKind::F:
      return {InstructionKind::F, part.pass, {}};
    case PassKind::B:
      return {InstructionKind::B, part.pass, {}};
    case PassKind::W:
      return {InstructionKind::W, part.pass, {}};
    case PassKind::Offload:
      return {InstructionKind::Offload, part.pass, {}};
    case PassKind::Reload:
      return {InstructionKind::Reload, part.pass, {}};
  }
  return {};
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
