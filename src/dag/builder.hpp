// DagBuilder: appends ops and dependencies to a Dag and finishes its index arrays (CSR
// predecessors and successors, per-stream order). Private to src/dag: the lowering of the
// pipeline (lower.cpp) and of any extra step it adds use it, nothing outside the module does.
// Dependencies on the op added last go straight into CSR order (nearly all of them, since an op's
// inputs are known when it is emitted); the others are kept aside and merged in finish().
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "braid/dag.hpp"

namespace braid::dag_build {

// A run of ops appended at once with their whole predecessor lists: one instruction's ops as
// first lowered, the dependencies among them (and their stream order) as offsets in the block.
struct OpBlock {
  std::vector<DagOp> ops;  // rank, stream and cost set; microbatch and instruction per copy
  std::vector<std::int32_t> stream;  // per op: its (rank, stream)
  // Per op: its stream predecessor, -1 when that is the stream's last op before the block.
  std::vector<std::int32_t> stream_prev;
  std::vector<std::int32_t> pred_begin;  // per op and one past: its inputs in `preds`
  std::vector<std::int32_t> preds;       // per op ascending, without duplicates
  struct StreamRun {
    std::int32_t stream = 0, last = 0, count = 0;  // the block's last op on it and its op count
  };
  std::vector<StreamRun> streams;  // per stream the block runs on
  int untimed_off_compute = 0;     // ops that take no time, off the compute stream
};
// Op `at` of a block waits for op `from`, added before the block.
struct BlockInput {
  std::int32_t at = 0, from = 0;
};

// The Dag's distinct costs, each once: a cost is looked up bit for bit (the four doubles' bit
// patterns, so -0.0 and 0.0 stay apart and every op keeps exactly the cost it was given) in an
// open-addressing table and appended to Dag::costs when new. Runs have a few dozen distinct costs,
// so the table stays in the first-level cache.
class CostTable {
 public:
  // Starts `costs` afresh.
  explicit CostTable(std::vector<OpCost>& costs);
  // The index of `cost` in the Dag's costs.
  std::int32_t index(const OpCost& cost) { return find_or_add(key_of(cost), cost); }
  // The same, trying `guess` (an index, or -1) first: a compare instead of a lookup when right.
  std::int32_t index(const OpCost& cost, std::int32_t guess) {
    const Key key = key_of(cost);
    if (guess >= 0 && static_cast<std::size_t>(guess) < keys_.size() &&
        keys_[static_cast<std::size_t>(guess)] == key)
      return guess;
    return find_or_add(key, cost);
  }

 private:
  struct Key {
    std::uint64_t bits[4];
    bool operator==(const Key&) const = default;
  };
  std::int32_t find_or_add(const Key& key, const OpCost& cost) {
    for (std::size_t h = hash(key) & mask_;; h = (h + 1) & mask_) {
      const std::int32_t at = slots_[h];
      if (at < 0) return add(key, cost, h);
      if (keys_[static_cast<std::size_t>(at)] == key) return at;
    }
  }
  static Key key_of(const OpCost& c) {
    return Key{{std::bit_cast<std::uint64_t>(c.duration_s),
                std::bit_cast<std::uint64_t>(c.alloc_bytes),
                std::bit_cast<std::uint64_t>(c.free_bytes), std::bit_cast<std::uint64_t>(c.bytes)}};
  }
  // The low bits of costs are mostly zero (whole byte counts, short mantissas): the words are
  // mixed, then the product's high bits folded down (MurmurHash3's finalizer), so that the slot
  // (the low bits) depends on every bit.
  static std::size_t hash(const Key& k) {
    std::uint64_t h = 0;
    for (const std::uint64_t b : k.bits) h = (h ^ b) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return static_cast<std::size_t>(h);
  }
  std::int32_t add(const Key& key, const OpCost& cost, std::size_t slot);
  std::vector<OpCost>& costs_;
  std::vector<Key> keys_;            // per entry of costs_
  std::vector<std::int32_t> slots_;  // index into costs_, -1 empty; a power of two long
  std::size_t mask_ = 0;
};

class DagBuilder {
 public:
  // `ranks`: the pipeline ranks (dag.pp); `ops_hint`: the expected op count, reserved up front.
  // The Dag's costs start afresh.
  DagBuilder(Dag& dag, int ranks, std::size_t ops_hint);

  // The index of `cost` in the Dag's costs (added when new), trying `guess` first (-1: none).
  std::int32_t cost_index(const OpCost& cost, std::int32_t guess) {
    return costs_.index(cost, guess);
  }
  // Appends `op` with `rank`, `instruction` and `cost` (its stream already set) at the end of its
  // (rank, stream) order and returns its index.
  int add_op(const DagOp& op, const OpCost& cost, int rank, int instruction);
  // Appends a copy of `block` (pass stamping, lower.cpp) and returns the index of its first op:
  // each op's microbatch is `mb_second` on a block's second side, `mb_first` elsewhere; every op
  // gets `instruction`. `inputs`, ordered by their op, are the dependencies on ops before the
  // block.
  int add_block(const OpBlock& block, int mb_first, int mb_second, int instruction,
                std::span<const BlockInput> inputs);
  // `to` waits for `from`; from < 0 (no op) is ignored. Duplicates are removed by finish().
  void add_dependency(int from, int to) {
    if (from < 0) return;
    if (to == static_cast<int>(dag_.ops.size()) - 1) {
      // The same input twice in a row (a synchronous collective is both the unit's input and
      // pending on the rank) is kept once; an input below the one before leaves the list out of
      // order, to be sorted by finish() (the few such lists are noted, so that the others are
      // not checked there).
      if (own_preds_ > static_cast<std::size_t>(dag_.pred_begin.back()) &&
          dag_.preds[own_preds_ - 1] >= from) {
        if (dag_.preds[own_preds_ - 1] == from) return;
        if (unsorted_.empty() || unsorted_.back() != to) unsorted_.push_back(to);
      }
      if (own_preds_ == dag_.preds.size()) grow_preds();
      dag_.preds[own_preds_++] = from;
    } else
      late_.emplace_back(from, to);
  }
  // The last op added on (rank, stream), -1 if none.
  int last_on_stream(int rank, StreamKind stream) const {
    return last_[static_cast<std::size_t>(rank) * kStreamsPerRank + static_cast<int>(stream)];
  }
  // Sorts and deduplicates every predecessor list, leaves out the zero-time ops when `fold` (see
  // LowerOptions::fold_zero_time), then builds successors and stream order.
  void finish(bool fold = false);

 private:
  // Op `id` at the end of (rank, stream)'s order, its predecessors from here on.
  void note_stream(int id, int rank, StreamKind stream) {
    const std::size_t s =
        static_cast<std::size_t>(rank) * kStreamsPerRank + static_cast<int>(stream);
    dag_.stream_prev.push_back(last_[s]);
    stream_.push_back(static_cast<std::int32_t>(s));
    last_[s] = id;
    ++count_[s];
    dag_.pred_begin.push_back(static_cast<std::int32_t>(own_preds_));
  }
  void grow_preds();
  void merge_late();
  void fold_zero_time();
  Dag& dag_;
  CostTable costs_;
  int ranks_;
  std::vector<std::int32_t> last_;    // per (rank, stream)
  std::vector<std::int32_t> count_;   // ops per (rank, stream)
  std::vector<std::int32_t> stream_;  // per op: its (rank, stream)
  std::vector<std::pair<std::int32_t, std::int32_t>> late_;
  std::vector<std::int32_t> unsorted_;  // ascending: the ops whose own list is out of order
  // Entries of dag.preds in use while ops are added: the array is sized ahead (grow_preds) and
  // filled by index, so that adding an edge is a store and a compare, not a call to push_back.
  std::size_t own_preds_ = 0;
  int untimed_off_compute_ = 0;  // ops that take no time, off the compute stream
};

}  // namespace braid::dag_build
