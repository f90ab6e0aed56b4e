// DagBuilder (builder.hpp): CSR lists built as ops arrive, then finished in linear passes.
#include "builder.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace braid::dag_build {

namespace {

// Predecessor lists hold one to a few entries, nearly always in order already (checked first,
// inline): insertion sort, then unique.
std::int32_t* sort_unique_slow(std::int32_t* b, std::int32_t* e) {
  for (std::int32_t* i = b + 1; i < e; ++i)
    for (std::int32_t* j = i; j > b && j[-1] > j[0]; --j) std::swap(j[-1], j[0]);
  return std::unique(b, e);
}
inline std::int32_t* sort_unique(std::int32_t* b, std::int32_t* e) {
  if (e - b < 2) return e;  // an empty list may sit at a null address, where b + 1 is undefined
  for (const std::int32_t* i = b + 1; i < e; ++i)
    if (i[-1] >= i[0]) return sort_unique_slow(b, e);
  return e;
}

}  // namespace

CostTable::CostTable(std::vector<OpCost>& costs) : costs_(costs), slots_(64, -1), mask_(63) {
  costs_.clear();
}

std::int32_t CostTable::add(const Key& key, const OpCost& cost, std::size_t slot) {
  const auto at = static_cast<std::int32_t>(costs_.size());
  costs_.push_back(cost);
  keys_.push_back(key);
  slots_[slot] = at;
  if (keys_.size() * 2 > slots_.size()) {  // at most half full: short probes
    slots_.assign(slots_.size() * 2, -1);
    mask_ = slots_.size() - 1;
    for (std::size_t k = 0; k < keys_.size(); ++k) {
      std::size_t h = hash(keys_[k]) & mask_;
      while (slots_[h] >= 0) h = (h + 1) & mask_;
      slots_[h] = static_cast<std::int32_t>(k);
    }
  }
  return at;
}

DagBuilder::DagBuilder(Dag& dag, int ranks, std::size_t ops_hint)
    : dag_(dag),
      costs_(dag.costs),
      ranks_(ranks),
      last_(static_cast<std::size_t>(ranks) * kStreamsPerRank, -1),
      count_(last_.size(), 0) {
  dag_.ops.reserve(ops_hint);
  dag_.stream_prev.reserve(ops_hint);
  stream_.reserve(ops_hint);
  dag_.pred_begin.reserve(ops_hint + 1);
  dag_.preds.reserve(ops_hint + ops_hint / 4);
}

// Within the reservation a few pages at a time, so that no more of it is touched than is used
// (a large run's peak memory), then by doubling.
void DagBuilder::grow_preds() {
  constexpr std::size_t kStep = 4096;
  const std::size_t size = dag_.preds.size(), capacity = dag_.preds.capacity();
  dag_.preds.resize(size < capacity ? std::min(capacity, size + kStep) : size * 2 + kStep);
}

int DagBuilder::add_op(const DagOp& op, const OpCost& cost, int rank, int instruction) {
  const int id = static_cast<int>(dag_.ops.size());
  note_stream(id, rank, op.stream);
  untimed_off_compute_ += !(cost.duration_s > 0) && op.stream != StreamKind::Compute;
  DagOp& added = dag_.ops.emplace_back(op);
  added.cost = costs_.index(cost);
  added.rank = static_cast<std::int16_t>(rank);  // pp <= kMaxPp
  added.instruction = instruction;
  return id;
}

int DagBuilder::add_block(const OpBlock& block, int mb_first, int mb_second, int instruction,
                          std::span<const BlockInput> inputs) {
  const int base = static_cast<int>(dag_.ops.size());
  const std::size_t n = block.ops.size();
  // Copied as a whole, then patched in place (still in cache).
  dag_.ops.insert(dag_.ops.end(), block.ops.begin(), block.ops.end());
  DagOp* ops = dag_.ops.data() + base;
  for (std::size_t k = 0; k < n; ++k) {
    ops[k].mb = ops[k].side == BlockSide::Second ? mb_second : mb_first;
    ops[k].instruction = instruction;
  }
  stream_.insert(stream_.end(), block.stream.begin(), block.stream.end());
  const std::size_t at = dag_.stream_prev.size();
  dag_.stream_prev.resize(at + n);
  std::int32_t* prev = dag_.stream_prev.data() + at;
  for (std::size_t k = 0; k < n; ++k) {
    const std::int32_t p = block.stream_prev[k];
    prev[k] = p >= 0 ? base + p : last_[block.stream[k]];
  }
  for (const OpBlock::StreamRun& run : block.streams) {
    last_[run.stream] = base + run.last;
    count_[run.stream] += run.count;
  }
  untimed_off_compute_ += block.untimed_off_compute;

  while (dag_.preds.size() < own_preds_ + block.preds.size() + inputs.size()) grow_preds();
  dag_.pred_begin.resize(dag_.pred_begin.size() + n);
  std::int32_t* begin = dag_.pred_begin.data() + base;
  std::int32_t* p = dag_.preds.data();
  const std::int32_t* own = block.preds.data();
  const std::int32_t* own_begin = block.pred_begin.data();
  // The block's lists land at w + their offset in it, each op with inputs from before the block
  // shifting the ones after it: runs of ops between those are written as plain array loops.
  auto w = static_cast<std::int32_t>(own_preds_);
  std::size_t k = 0;
  std::int32_t j = 0;  // the first entry of block.preds not yet written
  for (const BlockInput* in = inputs.data(), *in_end = in + inputs.size();;) {
    const std::size_t stop = in != in_end ? static_cast<std::size_t>(in->at) : n;
    for (; k < stop; ++k) begin[k] = w + own_begin[k];
    const std::int32_t j_end = own_begin[stop];
    for (; j < j_end; ++j) p[w + j] = base + own[j];
    if (stop == n) break;
    // Op `stop`: its inputs from before the block sort below its own.
    begin[k] = w + own_begin[k];
    std::int32_t* const from = p + w + j;
    std::int32_t* e = from;
    for (; in != in_end && in->at == static_cast<std::int32_t>(k); ++in) *e++ = in->from;
    w += static_cast<std::int32_t>(sort_unique(from, e) - from);
    ++k;
  }
  w += own_begin[n];
  own_preds_ = static_cast<std::size_t>(w);
  return base;
}

namespace {

// Orders `late` by target, stably (least significant digit first, 11 bits a pass; a list
// already in order is left as it is). `n`: the op count, above every target.
void sort_by_target(std::vector<std::pair<std::int32_t, std::int32_t>>& late, int n) {
  if (std::is_sorted(late.begin(), late.end(),
                     [](const auto& a, const auto& b) { return a.second < b.second; }))
    return;
  constexpr int kBits = 11;
  constexpr std::size_t kBuckets = std::size_t{1} << kBits;
  std::vector<std::pair<std::int32_t, std::int32_t>> out(late.size());
  for (int shift = 0; shift == 0 || ((n - 1) >> shift) > 0; shift += kBits) {
    std::vector<std::size_t> at(kBuckets + 1, 0);
    for (const auto& e : late) ++at[((e.second >> shift) & (kBuckets - 1)) + 1];
    for (std::size_t b = 0; b < kBuckets; ++b) at[b + 1] += at[b];
    for (const auto& e : late) out[at[(e.second >> shift) & (kBuckets - 1)]++] = e;
    late.swap(out);
  }
}

}  // namespace

// Each op's list sorted and deduplicated, with its late edges merged in, in place: from the last
// op down, every list is written at the end of what is still free (a list moves up by at most the
// late edges of the ops up to it, so it never overwrites one not yet read), then all move down
// over the room the duplicates left. Only the ops with a late edge or an out-of-order list are
// handled one by one; the runs of ops between them move as a block (one memmove, and their
// starts shifted by one amount).
void DagBuilder::merge_late() {
  Dag& d = dag_;
  const int n = d.size();
  const std::size_t own = own_preds_;
  d.pred_begin.push_back(static_cast<std::int32_t>(own));
  sort_by_target(late_, n);
  d.preds.resize(own + late_.size());
  std::int32_t* p = d.preds.data();
  std::int32_t* begin = d.pred_begin.data();
  std::size_t w = d.preds.size();  // where the list written next ends
  std::size_t l = late_.size();    // the late edges of ops up to i: late_[0, l)
  std::size_t u = unsorted_.size();
  int hi = n;                                    // ops [hi, n) are written
  auto old_hi = static_cast<std::int32_t>(own);  // where op hi's list was
  std::vector<std::int32_t> extra;
  for (;;) {
    // The next op below hi to handle alone, -1 if none.
    int at = l > 0 ? late_[l - 1].second : -1;
    if (u > 0) at = std::max(at, unsorted_[u - 1]);
    const int lo = at + 1;
    const std::int32_t old_lo = lo < hi ? begin[lo] : old_hi;
    const auto len = static_cast<std::size_t>(old_hi - old_lo);
    const std::size_t to = w - len;
    if (to != static_cast<std::size_t>(old_lo)) {
      std::memmove(p + to, p + old_lo, len * sizeof(std::int32_t));
      const auto shift = static_cast<std::int32_t>(to - static_cast<std::size_t>(old_lo));
      for (int k = lo; k < hi; ++k) begin[k] += shift;
    }
    w = to;
    if (at < 0) break;
    const std::int32_t old_begin = begin[at];
    std::int32_t* b = p + old_begin;
    std::int32_t* e = p + old_lo;
    if (u > 0 && unsorted_[u - 1] == at) {
      e = sort_unique_slow(b, e);
      --u;
    }
    if (l > 0 && late_[l - 1].second == at && (l == 1 || late_[l - 2].second != at)) {
      // One late edge (nearly every op that has one): written in its place among the others.
      const std::int32_t v = late_[--l].first;
      while (e > b && e[-1] > v) p[--w] = *--e;
      if (e == b || e[-1] != v) p[--w] = v;
      while (e > b) p[--w] = *--e;
      begin[at] = static_cast<std::int32_t>(w);
      hi = at;
      old_hi = old_begin;
      continue;
    }
    extra.clear();
    for (; l > 0 && late_[l - 1].second == at; --l) extra.push_back(late_[l - 1].first);
    const auto x_end = sort_unique(extra.data(), extra.data() + extra.size());
    // Backward merge of [b, e) and extra into the room ending at w, one copy of each.
    const std::int32_t* x = x_end;
    while (e > b || x > extra.data()) {
      std::int32_t v;
      if (x == extra.data() || (e > b && e[-1] >= x[-1])) {
        v = *--e;
        if (x > extra.data() && x[-1] == v) --x;
      } else {
        v = *--x;
      }
      p[--w] = v;
    }
    begin[at] = static_cast<std::int32_t>(w);
    hi = at;
    old_hi = old_begin;
  }
  if (w > 0) {
    std::copy(p + w, p + d.preds.size(), p);
    for (int i = 0; i < n; ++i) begin[i] -= static_cast<std::int32_t>(w);
    d.preds.resize(d.preds.size() - w);
  }
  begin[n] = static_cast<std::int32_t>(d.preds.size());
  late_.clear();
  late_.shrink_to_fit();
  unsorted_.clear();
  unsorted_.shrink_to_fit();
}

// Zero-time ops (LowerOptions::fold_zero_time). An op z that takes no time ends when the last of
// its inputs (dependencies and stream predecessor) ends, so every op that waited for z can wait
// for those inputs instead: z's "handle", with z's folded inputs replaced by their handles in
// turn and, per stream, only the latest member kept (it ends after the earlier ones). Times are
// unchanged. Only ops off the compute stream that move no memory and whose dependencies all sit
// on their rank are folded, so the idle attribution reaches the same ops (a zero-length interval
// adds nothing; what z would have led the walk to is reached directly). Memory events only move
// between zero-time rounds of one instant, which changes no peak when no zero-time op frees
// memory and the sums are exact; otherwise nothing is folded.
void DagBuilder::fold_zero_time() {
  Dag& d = dag_;
  const int n = d.size();
  std::vector<char> fold(n, 0);
  int folded = 0;
  for (int i = 0; i < n; ++i) {
    const DagOp& op = d.ops[i];
    const OpCost& c = d.costs[op.cost];
    if (c.duration_s > 0) continue;
    if (c.free_bytes != 0) return;
    if (c.alloc_bytes != 0 || op.stream == StreamKind::Compute) continue;
    bool local = true;
    for (int j = d.pred_begin[i]; j < d.pred_begin[i + 1]; ++j)
      local = local && stream_[d.preds[j]] / kStreamsPerRank == op.rank;
    if (!local) continue;
    fold[i] = 1;
    ++folded;
  }
  if (folded == 0 || !(d.memory_exact || memory_sums_exact(d))) return;

  // Ops are added in stream order, so on one stream a higher index is a later op.
  // (Read from the per-op stream index rather than the op records, which are four times wider.)
  auto stream_of = [&](int i) { return stream_[i]; };
  // Keeps the latest member per stream of hv[from..).
  std::vector<std::int32_t> hv;
  auto prune = [&](std::size_t from) {
    std::sort(hv.begin() + static_cast<std::ptrdiff_t>(from), hv.end(), [&](int a, int b) {
      const int sa = stream_of(a), sb = stream_of(b);
      return sa != sb ? sa < sb : a > b;
    });
    std::size_t out = from;
    for (std::size_t k = from; k < hv.size(); ++k)
      if (k == from || stream_of(hv[k]) != stream_of(hv[out - 1])) hv[out++] = hv[k];
    hv.resize(out);
  };

  // Handles, in depth-first post-order over folded inputs; a cycle among them leaves the DAG as
  // it is (the simulator names the cycle).
  std::vector<std::int32_t> hb(n, 0), he(n, 0);
  std::vector<char> state(n, 0);  // 0 new, 1 on the current path, 2 done
  std::vector<std::int32_t> stack;
  auto append_input = [&](int y) {
    if (!fold[y]) {
      hv.push_back(y);
      return;
    }
    for (int k = hb[y]; k < he[y]; ++k) hv.push_back(hv[k]);
  };
  for (int z0 = 0; z0 < n; ++z0) {
    if (!fold[z0] || state[z0] != 0) continue;
    stack.push_back(z0);
    while (!stack.empty()) {
      const int x = stack.back();
      if (state[x] == 2) {
        stack.pop_back();
        continue;
      }
      if (state[x] == 0) {
        state[x] = 1;
        auto visit = [&](int y) {
          if (!fold[y]) return true;
          if (state[y] == 1) return false;
          if (state[y] == 0) stack.push_back(y);
          return true;
        };
        bool ok = true;
        for (int j = d.pred_begin[x]; j < d.pred_begin[x + 1]; ++j) ok = ok && visit(d.preds[j]);
        if (d.stream_prev[x] >= 0) ok = ok && visit(d.stream_prev[x]);
        if (!ok) return;
        continue;
      }
      const std::size_t from = hv.size();
      for (int j = d.pred_begin[x]; j < d.pred_begin[x + 1]; ++j) append_input(d.preds[j]);
      if (d.stream_prev[x] >= 0) append_input(d.stream_prev[x]);
      prune(from);
      hb[x] = static_cast<std::int32_t>(from);
      he[x] = static_cast<std::int32_t>(hv.size());
      state[x] = 2;
      stack.pop_back();
    }
  }

  // The kept ops, renumbered in order, with folded inputs replaced by their handles. Ops and
  // stream links move down in place (a kept op's new index is never above its old one); the
  // predecessor lists, which a handle can lengthen, are written anew.
  state.clear();
  state.shrink_to_fit();
  // A kept op's new index goes in hb (which only folded ops use for their handles).
  std::vector<std::int32_t>& id = hb;
  int kept = 0;
  for (int i = 0; i < n; ++i)
    if (!fold[i])
      id[i] = kept++;
    else
      --count_[stream_of(i)];
  std::vector<std::int32_t> preds, list;
  preds.reserve(d.preds.size());
  for (int i = 0; i < n; ++i) {
    if (fold[i]) continue;
    // The new stream predecessor: the old one if kept, else the member of its handle on this
    // stream (the handle keeps the latest kept op of each stream, down the folded chain).
    int sp = d.stream_prev[i];
    const int to = id[i];
    bool direct = sp < 0 || !fold[sp];
    for (int j = d.pred_begin[i]; direct && j < d.pred_begin[i + 1]; ++j)
      direct = !fold[d.preds[j]];
    if (direct) {
      // No folded input (most ops): the list is sorted and unique already and renumbering keeps
      // its order.
      const int b = d.pred_begin[i], e = d.pred_begin[i + 1];
      d.pred_begin[to] = static_cast<std::int32_t>(preds.size());
      for (int j = b; j < e; ++j)
        if (d.preds[j] != sp) preds.push_back(id[d.preds[j]]);
      d.stream_prev[to] = sp >= 0 ? id[sp] : -1;
      if (to != i) {
        d.ops[to] = d.ops[i];
        stream_[to] = stream_[i];
      }
      continue;
    }
    list.clear();
    if (sp >= 0 && fold[sp]) {
      const int folded_prev = sp;
      sp = -1;
      const int here = stream_of(i);
      for (int k = hb[folded_prev]; k < he[folded_prev]; ++k) {
        const int m = hv[k];
        list.push_back(m);
        // Ops below i have moved to their new index already (each slot is written once).
        if (stream_[m < i ? id[m] : m] == here) sp = m;
      }
    }
    for (int j = d.pred_begin[i]; j < d.pred_begin[i + 1]; ++j) {
      const int p = d.preds[j];
      if (!fold[p]) {
        list.push_back(p);
        continue;
      }
      for (int k = hb[p]; k < he[p]; ++k) list.push_back(hv[k]);
    }
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
    // pred_begin[to] is read for op i >= to before it is overwritten here (i's own entry is read
    // above, and later ops have indices above to).
    d.pred_begin[to] = static_cast<std::int32_t>(preds.size());
    for (const int p : list)
      if (p != sp) preds.push_back(id[p]);  // the stream predecessor waits by stream order
    d.stream_prev[to] = sp >= 0 ? id[sp] : -1;
    if (to != i) {
      d.ops[to] = d.ops[i];
      stream_[to] = stream_[i];
    }
  }
  d.pred_begin[kept] = static_cast<std::int32_t>(preds.size());
  d.pred_begin.resize(kept + 1);
  d.ops.resize(kept);
  d.stream_prev.resize(kept);
  stream_.resize(kept);
  d.preds = std::move(preds);
}

void DagBuilder::finish(bool fold) {
  merge_late();
  // Only a zero-time op off the compute stream is ever folded: with none (uniform mode, whose
  // zero-time ops the lowering never creates), the pass over every op is skipped.
  if (fold && untimed_off_compute_ > 0) fold_zero_time();
  Dag& d = dag_;
  const int n = d.size();
  // Stream order from the per-stream counts and each op's stream, kept aside as ops arrive, so
  // that the op records are not read again.
  const int streams = ranks_ * kStreamsPerRank;
  d.stream_begin.resize(streams + 1);
  d.stream_begin[0] = 0;
  for (int s = 0; s < streams; ++s) d.stream_begin[s + 1] = d.stream_begin[s] + count_[s];
  d.stream_ops.resize(n);
  // Two fills at once, the first half of the ops forward from each stream's start and the second
  // backward from its end (they meet where the halves' counts divide the stream): consecutive ops
  // on one stream chain each counter's load to the store before, and two such chains overlap.
  std::vector<std::int32_t> low(d.stream_begin.begin(), d.stream_begin.end() - 1);
  std::vector<std::int32_t> high(d.stream_begin.begin() + 1, d.stream_begin.end());
  std::int32_t* stream_ops = d.stream_ops.data();
  const std::int32_t* stream = stream_.data();
  for (int i = 0, j = n - 1; i < j; ++i, --j) {
    stream_ops[low[stream[i]]++] = i;
    stream_ops[--high[stream[j]]] = j;
  }
  if (n % 2 == 1) stream_ops[low[stream[n / 2]]] = n / 2;
  stream_.clear();
  stream_.shrink_to_fit();
}

}  // namespace braid::dag_build

namespace braid {

Successors successors(const Dag& dag) {
  const int n = dag.size();
  Successors s;
  // Counted one place up, summed, then each op's start (at p + 1) is its fill position: once
  // filled it is the next op's start, and the array, its last place dropped, is the begin array.
  s.begin.assign(n + 2, 0);
  std::int32_t* at = s.begin.data();
  for (const std::int32_t p : dag.preds) ++at[p + 2];
  for (int i = 0; i < n; ++i) at[i + 2] += at[i + 1];
  s.list.resize(dag.preds.size());
  // Through plain pointers: stores through `at` would otherwise make the compiler read the
  // vectors' data pointers again for every op.
  const std::int32_t* preds = dag.preds.data();
  const std::int32_t* pred_begin = dag.pred_begin.data();
  std::int32_t* list = s.list.data();
  for (int i = 0; i < n; ++i)
    for (int j = pred_begin[i]; j < pred_begin[i + 1]; ++j)
      list[at[preds[j] + 1]++] = i;  // ascending i: successors come out sorted
  s.begin.pop_back();
  return s;
}

bool memory_sums_exact(const Dag& dag) {
  constexpr double kMaxSum = 4398046511104.0;  // 2^42
  std::vector<double> total(dag.pp, 0.0);
  for (const DagOp& op : dag.ops)
    for (const OpCost& c = dag.costs[op.cost]; const double v : {c.alloc_bytes, c.free_bytes}) {
      if (v == 0) continue;
      // v <= 2^42 first: then v * 2^10 (exact, a power of two) fits an int64 and converts back
      // unchanged exactly when it is whole.
      if (!(v > 0 && v <= kMaxSum)) return false;
      const double scaled = v * 1024;
      if (scaled != static_cast<double>(static_cast<std::int64_t>(scaled))) return false;
      total[op.rank] += v;
      if (!(total[op.rank] <= kMaxSum)) return false;
    }
  return true;
}

}  // namespace braid
