// DagBuilder (builder.hpp): CSR lists built as ops arrive, then finished in linear passes.
#include "builder.hpp"

#include <algorithm>

namespace braid::dag_build {

namespace {

// Predecessor lists hold one to a few entries: insertion sort, then unique.
std::int32_t* sort_unique(std::int32_t* b, std::int32_t* e) {
  for (std::int32_t* i = b + 1; i < e; ++i)
    for (std::int32_t* j = i; j > b && j[-1] > j[0]; --j) std::swap(j[-1], j[0]);
  return std::unique(b, e);
}

}  // namespace

DagBuilder::DagBuilder(Dag& dag, int ranks, std::size_t ops_hint)
    : dag_(dag), ranks_(ranks), last_(static_cast<std::size_t>(ranks) * kStreamsPerRank, -1) {
  dag_.ops.reserve(ops_hint);
  dag_.stream_prev.reserve(ops_hint);
  dag_.pred_begin.reserve(ops_hint + 1);
  dag_.preds.reserve(ops_hint + ops_hint / 4);
}

int DagBuilder::add_op(const DagOp& op) {
  const int id = static_cast<int>(dag_.ops.size());
  std::int32_t& last =
      last_[static_cast<std::size_t>(op.rank) * kStreamsPerRank + static_cast<int>(op.stream)];
  dag_.stream_prev.push_back(last);
  last = id;
  dag_.pred_begin.push_back(static_cast<std::int32_t>(dag_.preds.size()));
  dag_.ops.push_back(op);
  return id;
}

void DagBuilder::finish() {
  Dag& d = dag_;
  const int n = d.size();
  d.pred_begin.push_back(static_cast<std::int32_t>(d.preds.size()));
  if (late_.empty()) {
    // In place: each list shrinks or stays, and is moved down over the gaps of earlier ones.
    std::int32_t out = 0;
    for (int i = 0; i < n; ++i) {
      std::int32_t* b = d.preds.data() + d.pred_begin[i];
      std::int32_t* e = sort_unique(b, d.preds.data() + d.pred_begin[i + 1]);
      d.pred_begin[i] = out;
      for (const std::int32_t* x = b; x < e; ++x) d.preds[out++] = *x;
    }
    d.pred_begin[n] = out;
    d.preds.resize(out);
  } else {
    // The late edges by target (counting sort), merged with each op's own list.
    std::vector<std::int32_t> late_begin(n + 1, 0), late(late_.size());
    for (const auto& e : late_) ++late_begin[e.second + 1];
    for (int i = 0; i < n; ++i) late_begin[i + 1] += late_begin[i];
    {
      std::vector<std::int32_t> fill(late_begin.begin(), late_begin.end() - 1);
      for (const auto& e : late_) late[fill[e.second]++] = e.first;
    }
    std::vector<std::int32_t> preds;
    preds.reserve(d.preds.size() + late.size());
    for (int i = 0; i < n; ++i) {
      const std::size_t at = preds.size();
      preds.insert(preds.end(), d.preds.begin() + d.pred_begin[i],
                   d.preds.begin() + d.pred_begin[i + 1]);
      preds.insert(preds.end(), late.begin() + late_begin[i], late.begin() + late_begin[i + 1]);
      std::int32_t* e = sort_unique(preds.data() + at, preds.data() + preds.size());
      preds.resize(static_cast<std::size_t>(e - preds.data()));
      d.pred_begin[i] = static_cast<std::int32_t>(at);
    }
    d.pred_begin[n] = static_cast<std::int32_t>(preds.size());
    d.preds = std::move(preds);
    late_.clear();
    late_.shrink_to_fit();
  }

  d.succ_begin.assign(n + 1, 0);
  for (const std::int32_t p : d.preds) ++d.succ_begin[p + 1];
  for (int i = 0; i < n; ++i) d.succ_begin[i + 1] += d.succ_begin[i];
  d.succs.resize(d.preds.size());
  {
    std::vector<std::int32_t> fill(d.succ_begin.begin(), d.succ_begin.end() - 1);
    for (int i = 0; i < n; ++i)
      for (int j = d.pred_begin[i]; j < d.pred_begin[i + 1]; ++j)
        d.succs[fill[d.preds[j]]++] = i;  // ascending i: successors come out sorted
  }

  const int streams = ranks_ * kStreamsPerRank;
  d.stream_begin.assign(streams + 1, 0);
  for (const DagOp& op : d.ops) ++d.stream_begin[d.stream_id(op.rank, op.stream) + 1];
  for (int s = 0; s < streams; ++s) d.stream_begin[s + 1] += d.stream_begin[s];
  d.stream_ops.resize(n);
  d.stream_next.assign(n, -1);
  std::vector<std::int32_t> fill(d.stream_begin.begin(), d.stream_begin.end() - 1);
  for (int i = 0; i < n; ++i) {
    d.stream_ops[fill[d.stream_id(d.ops[i].rank, d.ops[i].stream)]++] = i;
    if (d.stream_prev[i] >= 0) d.stream_next[d.stream_prev[i]] = i;
  }
}

}  // namespace braid::dag_build
