// Names of streams, op kinds and ops, as traces and error messages print them.
#include <string>

#include "braid/dag.hpp"
#include "braid/error.hpp"

namespace braid {

const char* name(StreamKind s) {
  switch (s) {
    case StreamKind::Compute:
      return "compute";
    case StreamKind::Tp:
      return "tp";
    case StreamKind::P2pNext:
      return "p2p_next";
    case StreamKind::P2pPrev:
      return "p2p_prev";
    case StreamKind::D2H:
      return "d2h";
    case StreamKind::H2D:
      return "h2d";
    case StreamKind::Dp:
      return "dp";
    case StreamKind::Cp:
      return "cp";
    case StreamKind::Ep:
      return "ep";
    case StreamKind::TpRing:
      return "tp_ring";
  }
  return "?";
}

StreamKind stream_of(Group g) {
  switch (g) {
    case Group::Tp:
    case Group::Etp:
    // FP8's amax all-reduce: synchronous on the compute stream, as the TP collectives are
    // (Transformer Engine calls it with async_op=False).
    case Group::TpDpCp:
      return StreamKind::Tp;
    case Group::Cp:
      return StreamKind::Cp;
    case Group::Ep:
      return StreamKind::Ep;
    case Group::Dp:
    case Group::DpCp:
    case Group::Edp:
      return StreamKind::Dp;
    case Group::Pp:
      break;
  }
  throw InternalError(std::string("a unit collective over the ") + name(g) +
                      " group has no stream (pipeline sends are P2P ops)");
}

const char* name(OpKind k) {
  switch (k) {
    case OpKind::Compute:
      return "compute";
    case OpKind::Collective:
      return "collective";
    case OpKind::P2P:
      return "p2p";
    case OpKind::Offload:
      return "offload";
    case OpKind::Reload:
      return "reload";
    case OpKind::DpSync:
      return "dp_sync";
    case OpKind::Optimizer:
      return "optimizer";
  }
  return "?";
}

namespace {

const char* short_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce:
      return "AR";
    case CollectiveKind::AllGather:
      return "AG";
    case CollectiveKind::ReduceScatter:
      return "RS";
    case CollectiveKind::P2P:
      return "P2P";
    case CollectiveKind::AllToAll:
      return "A2A";
    case CollectiveKind::None:
      break;
  }
  return "?";
}

// "F1.3 Attn L12" (vision layers: "V12").
std::string unit_name(const DagOp& op) {
  std::string s = op.recompute ? "R" : name(op.phase);
  s += std::to_string(op.chunk);
  s += '.';
  s += std::to_string(op.mb);
  s += ' ';
  s += name(op.unit);
  if (op.layer >= 0) {
    s += op.vision ? " V" : " L";
    s += std::to_string(op.layer);
  }
  return s;
}

}  // namespace

int peer_of(const Dag& dag, int op) {
  const DagOp& o = dag.ops[op];
  if (o.kind != OpKind::P2P) return -1;
  return o.stream == StreamKind::P2pNext ? (o.rank + 1) % dag.pp : (o.rank - 1 + dag.pp) % dag.pp;
}

std::string op_name(const Dag& dag, int index) {
  const DagOp& op = dag.ops[index];
  switch (op.kind) {
    case OpKind::Compute:
      return unit_name(op);
    case OpKind::Collective:
      return std::string(short_name(op.collective)) + " " + unit_name(op);
    case OpKind::P2P:
      return std::string("send ") + name(op.phase) + std::to_string(op.chunk) + "." +
             std::to_string(op.mb) + " r" + std::to_string(op.rank) + "->r" +
             std::to_string(peer_of(dag, index));
    case OpKind::Offload:
      return "OFFLOAD " + std::to_string(op.chunk) + "." + std::to_string(op.mb);
    case OpKind::Reload:
      return "RELOAD " + std::to_string(op.chunk) + "." + std::to_string(op.mb);
    case OpKind::DpSync:
      // "DP RS c0 b1" (bucket 1 of chunk 0), "DP AR embedding"; op.mb holds the bucket.
      return std::string("DP ") + short_name(op.collective) +
             (op.layer == -2 ? std::string(" embedding")
                             : " c" + std::to_string(op.chunk) + " b" + std::to_string(op.mb));
    case OpKind::Optimizer:
      return "OPTIMIZER";
  }
  return "?";
}

}  // namespace braid
