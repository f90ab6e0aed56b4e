// The metrics of DESIGN §5 from a Dag and its Timeline.
//
// Idle attribution: the compute stream of rank r is idle in the gaps between its ops (and before
// the first, after the last until the iteration ends). For the gap [g0, g1) before op X, the ops
// X waits for on rank r are found by walking back from X through dependencies and stream order,
// staying on rank r, skipping the compute stream (its ops ended by g0) and ops that ended by g0.
// The part of the gap covered by a collective among them (running, or holding one that is queued
// behind it) is exposed time of its stream's group: tp_exposed, then cp_exposed, ep_exposed and a
// unit collective's dp share, each what the groups before it do not cover (kCollectiveStreams'
// order); the part covered by a data-parallel sync op (gradient bucket, parameter all-gather,
// tied-embedding all-reduce) and none of those is dp_exposed too; the part covered by an
// offload/reload copy and none of those is offload_stall; the rest — waiting on a P2P, on another
// rank, start-up and drain — is pp_idle, computed as the remainder so the eight (with busy and
// the optimizer step, compute ops of their own) add up to the iteration time on every rank.
// measured_pp_idle_s measures pp_idle from the gaps as well, independently. After the last compute
// op the "X" is the end of the iteration, which waits for every op of the rank.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../util/format.hpp"
#include "../util/pipeline_sizes.hpp"
#include "../util/units.hpp"
#include "braid/error.hpp"
#include "braid/report.hpp"

namespace braid {

namespace {

// Measure of the union of intervals (sorted in place).
double union_length(std::vector<std::pair<double, double>>& iv) {
  std::sort(iv.begin(), iv.end());
  double total = 0, cur_b = 0, cur_e = 0;
  bool open = false;
  for (const auto& [b, e] : iv) {
    if (e <= b) continue;
    if (!open || b > cur_e) {
      if (open) total += cur_e - cur_b;
      cur_b = b;
      cur_e = e;
      open = true;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (open) total += cur_e - cur_b;
  return total;
}

// Where exposed time goes: per collective stream (tp, cp, ep, dp, in kCollectiveStreams order,
// which is also their precedence), the DP sync ops' share and the copies'.
struct Exposure {
  double coll[std::size(kCollectiveStreams)] = {};
  double dp_sync = 0, off = 0;
};

// The stream a collective op's time is reported under: the TP ring's copy-engine lane is TP's.
constexpr StreamKind report_stream(StreamKind s) {
  return s == StreamKind::TpRing ? StreamKind::Tp : s;
}

// The position of a collective stream in kCollectiveStreams (the TP ring's lane: TP's); -1 for
// any other stream.
constexpr int collective_index(StreamKind stream) {
  const StreamKind s = report_stream(stream);
  for (std::size_t k = 0; k < std::size(kCollectiveStreams); ++k)
    if (kCollectiveStreams[k] == s) return static_cast<int>(k);
  return -1;
}

class IdleAttribution {
 public:
  IdleAttribution(const Dag& dag, const Timeline& t) : dag_(dag), t_(t) {
    lists_.ops = dag.ops.size();
  }

  void rank(int r, RankReport& out) {
    const int cs = dag_.stream_id(r, StreamKind::Compute);
    double busy = 0, opt = 0, prev_end = 0;
    Exposure e;
    out.exposed_pieces.clear();
    // Ranks have about as many pieces as each other: room for the last rank's, grown from there.
    out.exposed_pieces.reserve(last_pieces_);
    pieces_ = &out.exposed_pieces;
    const int stream_end = dag_.stream_begin[cs + 1];
    for (int k = dag_.stream_begin[cs]; k < stream_end; ++k) {
      const int x = dag_.stream_ops[k];
      // The records of the ops a few ahead, and of the ops just before them (their collectives,
      // met in the gap's walk-back): a read of a record not in cache is most of this pass.
      if (k + kAhead < stream_end) {
        const int ahead = dag_.stream_ops[k + kAhead];
        prefetch_labels(ahead);
        if (ahead > 0) prefetch_labels(ahead - 1);
      }
      const double s = t_.start_s[x];
      if (s > prev_end && !small_gap(r, x, prev_end, s, e)) {
        lists_.reset();
        push_waited_on(view(prev_end, s), lists_, x);
        gap(r, prev_end, s, e);
      }
      (dag_.ops[x].kind == OpKind::Optimizer ? opt : busy) += t_.end_s[x] - s;
      prev_end = t_.end_s[x];
    }
    add_collectives(r);
    const double end = t_.iteration_time_s;
    if (end > prev_end) {  // drain: the iteration end waits for every op of the rank
      lists_.reset();
      for (int st = 1; st < kStreamsPerRank; ++st) {
        const int sid = dag_.stream_id(r, static_cast<StreamKind>(st));
        for (int k = dag_.stream_begin[sid]; k < dag_.stream_begin[sid + 1]; ++k)
          if (t_.end_s[dag_.stream_ops[k]] > prev_end) lists_.push(dag_.stream_ops[k]);
      }
      gap(r, prev_end, end, e);
    }
    last_pieces_ = out.exposed_pieces.size();
    out.busy_s = busy;
    out.optimizer_s = opt;
    out.tp_exposed_s = e.coll[collective_index(StreamKind::Tp)];
    out.cp_exposed_s = e.coll[collective_index(StreamKind::Cp)];
    out.ep_exposed_s = e.coll[collective_index(StreamKind::Ep)];
    out.dp_exposed_s = e.dp_sync + e.coll[collective_index(StreamKind::Dp)];
    out.offload_stall_s = e.off;
    // The remainder; a rank that is never idle can come out a few ulps below zero (PP 1), which
    // is rounding, not idle time.
    out.pp_idle_s = std::max(0.0, end - busy - opt - out.tp_exposed_s - out.cp_exposed_s -
                                      out.ep_exposed_s - out.dp_exposed_s - out.offload_stall_s);
  }

  // The time of the ops of each collective stream of the ranks so far, added in op order, when the
  // streams list them in op order rank after rank (as lowering does); false when one does not.
  bool collectives_in_op_order() const {
    return std::all_of(std::begin(comm_), std::end(comm_),
                       [](const CollectiveSum& s) { return s.in_order; });
  }
  double comm_s(StreamKind s) const { return comm_[collective_index(s)].total_s; }

 private:
  static constexpr std::size_t kListed = 32;  // ops a gap meets before it uses the marks
  static constexpr int kSmallWalk = 8;        // ops SmallWalk holds and meets at most

  struct CollectiveSum {
    double total_s = 0;
    int last = -1;
    bool in_order = true;
  };

  // The ops of rank r's collective streams. They are added right after its compute pass, which
  // has just read the times of the ops around them (a rank's part of the timeline stays in cache;
  // a second pass over the whole timeline would not find it).
  // TP's sum takes the ring lane's ops too, merged with the TP stream's in op order.
  void add_collectives(int r) {
    const int ring = dag_.stream_id(r, StreamKind::TpRing);
    for (std::size_t c = 0; c < std::size(kCollectiveStreams); ++c) {
      const int s = dag_.stream_id(r, kCollectiveStreams[c]);
      const int* i = dag_.stream_ops.data() + dag_.stream_begin[s];
      const int* const stop = dag_.stream_ops.data() + dag_.stream_begin[s + 1];
      const bool tp = kCollectiveStreams[c] == StreamKind::Tp;
      const int* j = dag_.stream_ops.data() + dag_.stream_begin[tp ? ring : s + 1];
      const int* const j_stop = dag_.stream_ops.data() + dag_.stream_begin[tp ? ring + 1 : s + 1];
      const double* start = t_.start_s.data();
      const double* end = t_.end_s.data();
      CollectiveSum sum = comm_[c];
      while (i != stop || j != j_stop) {
        const int op = j == j_stop || (i != stop && *i < *j) ? *i++ : *j++;
        sum.in_order = sum.in_order && op > sum.last;
        sum.last = op;
        sum.total_s += end[op] - start[op];
      }
      comm_[c] = sum;
    }
  }

  // The lines of op i's record that hold its kind, rank and stream (its labels, bytes 4 to 19 of
  // the 20): one line, or two where the record straddles them.
  void prefetch_labels(int i) const {
    const char* op = reinterpret_cast<const char*>(&dag_.ops[i]);
    __builtin_prefetch(op + kLabelsOffset);
    __builtin_prefetch(op + sizeof(DagOp) - 1);
  }

  // The walk of a gap [g0, g1), one rule on two kinds of storage. From the ops the gap's compute
  // op (or the iteration end) waited on, it goes back through what each of them waited on, each
  // op once. An op that ended by g0 is neither counted nor followed: it is not pushed (most ops
  // met, the compute ops feeding X and finished sends, are such). Of the ops met, the rank's own
  // off the compute stream are recorded with their part of [g0, g1). A Walk holds the stack,
  // the ops met and the records; each of its steps returns false when it has no room, and the
  // walk gives up (SmallWalk; GapLists always has room).
  //
  // WalkView: the gap and the arrays a walk reads, through plain pointers (read through the
  // vectors, their data pointers would be loaded again after each store into the storage).
  struct WalkView {
    const double* start;
    const double* end;
    const std::int32_t* pred_begin;
    const std::int32_t* preds;
    const std::int32_t* stream_prev;
    const DagOp* ops;
    double g0, g1;
    std::pair<double, double> interval(int y) const {
      return {std::max(start[y], g0), std::min(end[y], g1)};
    }
  };
  WalkView view(double g0, double g1) const {
    return {t_.start_s.data(),
            t_.end_s.data(),
            dag_.pred_begin.data(),
            dag_.preds.data(),
            dag_.stream_prev.data(),
            dag_.ops.data(),
            g0,
            g1};
  }

  template <class Walk>
  [[gnu::always_inline]] static bool push_waited_on(const WalkView& v, Walk& w, int y) {
    for (int j = v.pred_begin[y], e = v.pred_begin[y + 1]; j < e; ++j) {
      const int p = v.preds[j];
      if (v.end[p] > v.g0 && !w.met(p) && !w.push(p)) return false;
    }
    const int prev = v.stream_prev[y];
    return prev < 0 || v.end[prev] <= v.g0 || w.met(prev) || w.push(prev);
  }

  template <class Walk>
  [[gnu::always_inline]] static bool walk_gap(const WalkView& v, Walk& w, int r) {
    int y = 0;
    while (w.pop(y)) {
      if (w.met(y)) continue;
      if (!w.meet(y)) return false;
      const DagOp& op = v.ops[y];
      if (op.rank != r || op.stream == StreamKind::Compute) continue;
      if (!w.record(v, op, y) || !push_waited_on(v, w, y)) return false;
    }
    return true;
  }

  // The storage of a walk that meets at most kSmallWalk ops and, of the rank's own, no DP sync
  // op, no copy and at most two collectives of one stream (every gap of the qwen2 run): arrays on
  // the stack, searched by a scan.
  struct SmallWalk {
    int stack[kSmallWalk], met_ops[kSmallWalk], coll[2];
    int depth = 0, n_met = 0, n_coll = 0;
    StreamKind coll_stream = StreamKind::Tp;
    bool met(int y) const {
      for (int i = 0; i < n_met; ++i)
        if (met_ops[i] == y) return true;
      return false;
    }
    bool meet(int y) {
      if (n_met == kSmallWalk) return false;
      met_ops[n_met++] = y;
      return true;
    }
    bool push(int y) {
      if (depth == kSmallWalk) return false;
      stack[depth++] = y;
      return true;
    }
    bool pop(int& y) {
      if (depth == 0) return false;
      y = stack[--depth];
      return true;
    }
    bool record(const WalkView&, const DagOp& op, int y) {  // the intervals are read at the end
      if (op.kind == OpKind::Collective) {
        const StreamKind stream = report_stream(op.stream);
        if (n_coll == 2 || (n_coll == 1 && stream != coll_stream)) return false;
        coll_stream = stream;
        coll[n_coll++] = y;
        return true;
      }
      return op.kind != OpKind::DpSync && op.kind != OpKind::Offload && op.kind != OpKind::Reload;
    }
  };

  // The storage of any walk. Most gaps meet one to three ops, which a short list finds faster
  // than a mark per op of the Dag (whose zeroed pages, a third of a MB in the qwen2 run, cost
  // more than the whole search); a gap that meets kListed ops switches to the marks.
  struct GapLists {
    std::size_t ops = 0;  // of the Dag: the size of the marks
    std::vector<int> stack;
    std::vector<int> seen;            // the ops this gap met, while there are fewer than kListed
    bool marked = false;              // this gap met kListed ops: mark holds them
    std::vector<std::uint16_t> mark;  // per op, made by the first gap that needs it
    std::uint16_t generation = 0;
    // The collectives met (any collective stream), their ops and streams' indices, parallel.
    std::vector<std::pair<double, double>> coll_iv, dp_only, copy_iv;
    std::vector<int> coll_ops;
    std::vector<int> coll_index;  // collective_index of each one's stream
    bool one_stream = true;       // every collective met is on one stream
    void reset() {
      stack.clear();
      seen.clear();
      marked = false;
      coll_iv.clear();
      coll_ops.clear();
      coll_index.clear();
      one_stream = true;
      dp_only.clear();
      copy_iv.clear();
    }
    bool met(int y) const {
      if (marked) return mark[y] == generation;
      for (const int v : seen)
        if (v == y) return true;
      return false;
    }
    bool meet(int y) {
      if (marked) {
        mark[y] = generation;
        return true;
      }
      seen.push_back(y);
      if (seen.size() < kListed) return true;
      // 16-bit marks (half the memory of 32-bit ones, next to the Dag and the Timeline at the
      // report's peak): when the generation wraps, every mark is cleared once.
      if (mark.empty()) mark.assign(ops, 0);
      if (++generation == 0) {
        std::fill(mark.begin(), mark.end(), std::uint16_t{0});
        generation = 1;
      }
      for (const int v : seen) mark[v] = generation;
      marked = true;
      return true;
    }
    bool push(int y) {
      stack.push_back(y);
      return true;
    }
    bool pop(int& y) {
      if (stack.empty()) return false;
      y = stack.back();
      stack.pop_back();
      return true;
    }
    bool record(const WalkView& v, const DagOp& op, int y) {
      if (op.kind == OpKind::Collective) {
        const int index = collective_index(op.stream);
        one_stream = one_stream && (coll_index.empty() || coll_index.front() == index);
        coll_iv.push_back(v.interval(y));
        coll_ops.push_back(y);
        coll_index.push_back(index);
      } else if (op.kind == OpKind::DpSync) {
        dp_only.push_back(v.interval(y));
      } else if (op.kind == OpKind::Offload || op.kind == OpKind::Reload) {
        copy_iv.push_back(v.interval(y));
      }
      return true;
    }
  };

  // The gap [g0, g1) before compute op x on SmallWalk's arrays, with the same pieces and sums as
  // gap() (they depend on which ops the walk meets, not on the order it meets them). False, with
  // nothing recorded, when the walk does not fit them.
  bool small_gap(int r, int x, double g0, double g1, Exposure& e) {
    const WalkView v = view(g0, g1);
    SmallWalk w;
    if (!push_waited_on(v, w, x) || !walk_gap(v, w, r)) return false;
    if (w.n_coll == 0) return true;
    double& total = e.coll[collective_index(w.coll_stream)];
    if (w.n_coll == 1) one_collective(v.interval(w.coll[0]), w.coll[0], w.coll_stream, total);
    if (w.n_coll == 2)
      two_collectives(v.interval(w.coll[0]), w.coll[0], v.interval(w.coll[1]), w.coll[1],
                      w.coll_stream, total);
    return true;
  }

  // The gap [g0, g1) whose roots lists_ holds.
  void gap(int r, double g0, double g1, Exposure& e) {
    walk_gap(view(g0, g1), lists_, r);
    std::vector<std::pair<double, double>>& coll_iv = lists_.coll_iv;
    const std::vector<std::pair<double, double>>& dp_only = lists_.dp_only;
    const std::vector<std::pair<double, double>>& copy_iv = lists_.copy_iv;
    const std::vector<int>& ops = lists_.coll_ops;
    if (lists_.one_stream && coll_iv.size() <= 2 && dp_only.empty() && copy_iv.empty()) {
      // The common gaps: one collective or none, or two of one stream (one queued behind the
      // other). The same pieces and sums as the general case below.
      if (coll_iv.empty()) return;
      const int c = lists_.coll_index.front();
      const StreamKind s = kCollectiveStreams[c];
      if (coll_iv.size() == 1) one_collective(coll_iv[0], ops[0], s, e.coll[c]);
      if (coll_iv.size() == 2)
        two_collectives(coll_iv[0], ops[0], coll_iv[1], ops[1], s, e.coll[c]);
      return;
    }
    // Precedence tp, cp, ep, dp collectives (kCollectiveStreams' order), then DP sync ops, then
    // copies: each category is its union with the ones before it, minus theirs. The collectives'
    // union is recorded piece by piece before the sort below.
    split_among_collectives();
    // A union sorts its intervals first, so the order they are gathered in changes nothing; one
    // over the same intervals as the one before it (no DP sync op, no copy in the gap) would sum
    // to the same value and is not measured again.
    double t = 0;
    if (lists_.one_stream) {
      t = union_length(coll_iv);
      if (!coll_iv.empty()) e.coll[lists_.coll_index.front()] += t;
    } else {
      // Several streams: the union grows stream by stream in precedence order.
      below_iv_.clear();
      for (std::size_t c = 0; c < std::size(kCollectiveStreams); ++c) {
        bool any = false;
        for (std::size_t i = 0; i < coll_iv.size(); ++i)
          if (lists_.coll_index[i] == static_cast<int>(c)) {
            below_iv_.push_back(coll_iv[i]);
            any = true;
          }
        if (!any) continue;
        scratch_iv_.assign(below_iv_.begin(), below_iv_.end());
        const double u = union_length(scratch_iv_);
        e.coll[c] += u - t;
        t = u;
      }
      coll_iv.assign(below_iv_.begin(), below_iv_.end());
    }
    double td = t;
    if (!dp_only.empty()) {
      dp_iv_.assign(coll_iv.begin(), coll_iv.end());
      dp_iv_.insert(dp_iv_.end(), dp_only.begin(), dp_only.end());
      td = union_length(dp_iv_);
    }
    double all = td;
    if (!copy_iv.empty()) {
      const auto& below = dp_only.empty() ? coll_iv : dp_iv_;
      all_iv_.assign(below.begin(), below.end());
      all_iv_.insert(all_iv_.end(), copy_iv.begin(), copy_iv.end());
      all = union_length(all_iv_);
    }
    e.dp_sync += td - t;
    e.off += all - td;
  }

  // A piece [b, e) of collective y on `stream`, joined to the one before when it continues it.
  void piece(int y, StreamKind stream, double b, double e) {
    std::vector<ExposedPiece>& out = *pieces_;
    if (!out.empty() && out.back().op == y && out.back().end_s == b)
      out.back().end_s = e;
    else
      out.push_back({y, stream, b, e});
  }

  // split_among_collectives and union_length for a single interval [b, e) of collective y.
  void one_collective(std::pair<double, double> iv, int y, StreamKind stream, double& total) {
    const auto [b, e] = iv;
    if (e <= b) return;
    piece(y, stream, b, e);
    total += e - b;
  }

  // The same for the intervals of two collectives p and q of one stream: the one that started
  // first (the lower op on a tie) holds all of its own; the other what lies after it. The union
  // adds one length when they overlap or touch, else the two lengths in start order.
  void two_collectives(std::pair<double, double> p_iv, int p, std::pair<double, double> q_iv, int q,
                       StreamKind stream, double& total) {
    auto [pb, pe] = p_iv;
    auto [qb, qe] = q_iv;
    if (qe <= qb) return one_collective(p_iv, p, stream, total);
    if (pe <= pb) return one_collective(q_iv, q, stream, total);
    if (qb < pb || (qb == pb && q < p)) {
      std::swap(pb, qb);
      std::swap(pe, qe);
      std::swap(p, q);
    }
    piece(p, stream, pb, pe);
    if (qe > pe) piece(q, stream, std::max(qb, pe), qe);
    total += qb <= pe ? std::max(pe, qe) - pb : (pe - pb) + (qe - qb);
  }

  // The union of this gap's collective intervals, each elementary segment given to the collective
  // that covers it on the stream first in precedence, then that started first, then the lowest op
  // (lists_.coll_iv, coll_ops and coll_index are parallel, before sorting).
  void split_among_collectives() {
    const std::vector<std::pair<double, double>>& iv = lists_.coll_iv;
    const std::vector<int>& ops = lists_.coll_ops;
    const std::vector<int>& index = lists_.coll_index;
    std::vector<double>& xs = xs_;  // kept between gaps: no allocation per gap
    xs.clear();
    for (const auto& [b, e] : iv) {
      if (e <= b) continue;
      xs.push_back(b);
      xs.push_back(e);
    }
    std::sort(xs.begin(), xs.end());
    xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
    for (std::size_t k = 0; k + 1 < xs.size(); ++k) {
      int holder = -1;
      for (std::size_t i = 0; i < iv.size(); ++i) {
        const auto& [b, e] = iv[i];
        if (b > xs[k] || e < xs[k + 1] || e <= b) continue;
        if (holder < 0 || index[i] < index[holder] ||
            (index[i] == index[holder] &&
             (b < iv[holder].first || (b == iv[holder].first && ops[i] < ops[holder]))))
          holder = static_cast<int>(i);
      }
      if (holder >= 0) piece(ops[holder], kCollectiveStreams[index[holder]], xs[k], xs[k + 1]);
    }
  }

  static constexpr int kAhead = 8;  // how many compute ops ahead the pass prefetches
  static constexpr std::size_t kLabelsOffset = 4;
  // The kind is in the bit-fields after the cost index (bytes 4 to 7), rank and stream after the
  // layer.
  static_assert(offsetof(DagOp, cost) + sizeof(std::int32_t) == kLabelsOffset &&
                    offsetof(DagOp, rank) + 2 < sizeof(DagOp) && sizeof(DagOp) == 20,
                "prefetch_labels reads the record's labels");
  const Dag& dag_;
  const Timeline& t_;
  GapLists lists_;          // the general walk's storage, kept between gaps
  std::vector<double> xs_;  // split_among_collectives' segment ends
  std::vector<std::pair<double, double>> dp_iv_, all_iv_, below_iv_, scratch_iv_;
  CollectiveSum comm_[std::size(kCollectiveStreams)];  // the ranks' so far, per stream
  std::vector<ExposedPiece>* pieces_ = nullptr;        // the rank's exposed pieces
  std::size_t last_pieces_ = 0;                        // how many the rank before had
};

// The lowest index among the latest ends of the n ops, in one pass: four independent running
// maxima (one waits on each comparison before the next), each with the first op that reached it
// (a later op replaces it only with a strictly later end); then the lowest of those among the
// latest.
int last_ending_op(const Timeline& t, int n) {
  const double* end = t.end_s.data();
  double m[4] = {end[0], end[0], end[0], end[0]};
  int at[4] = {0, 0, 0, 0};
  int i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) {
      const bool later = end[i + k] > m[k];
      m[k] = later ? end[i + k] : m[k];
      at[k] = later ? i + k : at[k];
    }
  for (; i < n; ++i) {
    const bool later = end[i] > m[0];
    m[0] = later ? end[i] : m[0];
    at[0] = later ? i : at[0];
  }
  const double latest = std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
  int last = n - 1;  // where no end equals the latest (a NaN first end), as the scan it replaced
  for (int k = 0; k < 4; ++k)
    if (m[k] == latest) last = std::min(last, at[k]);
  return last;
}

// What the summary reads of one op of the critical path.
struct PathStep {
  double duration_s;
  int rank;
  OpKind kind;
};

// The critical path: from the op that ends last (the lowest index among equal ends) back through
// each op's critical predecessor (simulator.hpp). Each op's time, rank and kind are read as the
// walk meets it: those reads do not wait on each other, so they overlap the walk's chain of
// predecessor reads instead of missing again later.
std::vector<PathStep> critical_steps(const Dag& dag, const Timeline& t) {
  const int n = dag.size();
  std::vector<PathStep> steps;
  if (n == 0) return steps;
  for (int i = last_ending_op(t, n); i >= 0; i = critical_pred(dag, t, i)) {
    const DagOp& op = dag.ops[i];
    steps.push_back({t.end_s[i] - t.start_s[i], op.rank, op.kind});
  }
  std::reverse(steps.begin(), steps.end());
  return steps;
}

CriticalPathSummary summarize_critical_path(const Dag& dag, const Timeline& t) {
  CriticalPathSummary cp;
  cp.rank_s.assign(dag.pp, 0.0);
  const std::vector<PathStep> path = critical_steps(dag, t);
  cp.ops = static_cast<int>(path.size());
  double covered = 0;
  // Visits: maximal runs of path ops on one rank, with their time.
  std::vector<std::pair<int, double>> visits;
  for (const auto& [d, rank, kind] : path) {
    covered += d;
    cp.rank_s[rank] += d;
    switch (kind) {
      case OpKind::Compute:
      case OpKind::Optimizer:
        cp.compute_s += d;
        break;
      case OpKind::DpSync:
      case OpKind::Collective:
        cp.collective_s += d;
        break;
      case OpKind::P2P:
        cp.p2p_s += d;
        break;
      case OpKind::Offload:
      case OpKind::Reload:
        cp.copy_s += d;
        break;
    }
    if (visits.empty() || visits.back().first != rank) {
      visits.emplace_back(rank, 0.0);
      cp.rank_sequence.push_back(rank);
    }
    visits.back().second += d;
  }
  cp.wait_s = t.iteration_time_s - covered;
  // "r0 1.2 s > r1 0.4 s > r0 ..." for the first visits, then how many follow.
  constexpr std::size_t kShown = 16;
  for (std::size_t k = 0; k < visits.size() && k < kShown; ++k)
    cp.text += util::format("%sr%d %.4g", k ? " > " : "", visits[k].first, visits[k].second);
  if (visits.size() > kShown)
    cp.text += " > ... (" + std::to_string(visits.size() - kShown) + " more)";
  return cp;
}

// Static memory of rank r by part (rank_static_parts, cost_model.hpp) and the fixed overhead.
void static_parts(const CostModel& cost, const Schedule& schedule, int r, RankReport& rr) {
  const StaticParts parts = rank_static_parts(cost, schedule.virtual_stages_of(r));
  rr.static_layers_bytes = parts.layers_bytes;
  rr.static_embeddings_bytes = parts.embeddings_bytes;
  rr.static_other_bytes = parts.other_bytes;
  rr.static_fixed_bytes = cost.fixed_overhead_bytes;
  rr.static_bytes = rr.static_layers_bytes + rr.static_embeddings_bytes + rr.static_other_bytes +
                    rr.static_fixed_bytes;
}

// The total time of the ops of each collective stream (kCollectiveStreams' order), all ranks.
using CommSeconds = std::array<double, std::size(kCollectiveStreams)>;

// attribute_idle, and the time of each collective stream's ops, all ranks, added in op order:
// along the streams as the attribution passes them, the same terms in the same order as a pass
// over every op, which is made only when a stream lists them out of op order.
CommSeconds attribute_ranks(const Dag& dag, const Timeline& t, std::vector<RankReport>& ranks) {
  IdleAttribution attribution(dag, t);
  ranks.resize(dag.pp);
  for (int r = 0; r < dag.pp; ++r) {
    ranks[r].rank = r;
    attribution.rank(r, ranks[r]);
  }
  CommSeconds total{};
  if (attribution.collectives_in_op_order()) {
    for (std::size_t c = 0; c < total.size(); ++c)
      total[c] = attribution.comm_s(kCollectiveStreams[c]);
    return total;
  }
  for (int j = 0; j < dag.size(); ++j)
    if (const int c = collective_index(dag.ops[j].stream); c >= 0)
      total[static_cast<std::size_t>(c)] += t.end_s[j] - t.start_s[j];
  return total;
}

}  // namespace

void attribute_idle(const Dag& dag, const Timeline& timeline, std::vector<RankReport>& ranks) {
  attribute_ranks(dag, timeline, ranks);
}

namespace {

// One idle gap [g0, g1) of rank r's compute stream whose compute op (or the iteration end) waits
// directly on `roots`: its length less the union of the intervals, within it, of every op of rank
// r off the compute stream that the roots reach (through dependencies and stream order, following
// only ops that end after g0) and that holds the compute stream (a collective, DP sync or copy).
double unexplained(const Dag& dag, const Timeline& t, int r, double g0, double g1,
                   std::vector<int> roots) {
  std::unordered_set<int> met;
  std::vector<std::pair<double, double>> held;
  while (!roots.empty()) {
    const int y = roots.back();
    roots.pop_back();
    if (!met.insert(y).second) continue;
    const DagOp& op = dag.ops[y];
    if (op.rank != r || op.stream == StreamKind::Compute) continue;
    if (op.kind == OpKind::Collective || op.kind == OpKind::DpSync || op.kind == OpKind::Offload ||
        op.kind == OpKind::Reload)
      held.emplace_back(std::max(t.start_s[y], g0), std::min(t.end_s[y], g1));
    for (int j = dag.pred_begin[y]; j < dag.pred_begin[y + 1]; ++j)
      if (t.end_s[dag.preds[j]] > g0) roots.push_back(dag.preds[j]);
    if (const int prev = dag.stream_prev[y]; prev >= 0 && t.end_s[prev] > g0) roots.push_back(prev);
  }
  return (g1 - g0) - union_length(held);
}

}  // namespace

std::vector<double> measured_pp_idle_s(const Dag& dag, const Timeline& t) {
  std::vector<double> out(static_cast<std::size_t>(dag.pp), 0.0);
  for (int r = 0; r < dag.pp; ++r) {
    const int cs = dag.stream_id(r, StreamKind::Compute);
    double prev_end = 0, idle = 0;
    for (int k = dag.stream_begin[cs]; k < dag.stream_begin[cs + 1]; ++k) {
      const int x = dag.stream_ops[k];
      if (t.start_s[x] > prev_end) {
        std::vector<int> roots;
        for (int j = dag.pred_begin[x]; j < dag.pred_begin[x + 1]; ++j)
          if (t.end_s[dag.preds[j]] > prev_end) roots.push_back(dag.preds[j]);
        if (const int prev = dag.stream_prev[x]; prev >= 0 && t.end_s[prev] > prev_end)
          roots.push_back(prev);
        idle += unexplained(dag, t, r, prev_end, t.start_s[x], std::move(roots));
      }
      prev_end = t.end_s[x];
    }
    if (t.iteration_time_s > prev_end) {
      std::vector<int> roots;
      for (int s = 0; s < kStreamsPerRank; ++s) {
        if (static_cast<StreamKind>(s) == StreamKind::Compute) continue;
        const int sid = dag.stream_id(r, static_cast<StreamKind>(s));
        for (int k = dag.stream_begin[sid]; k < dag.stream_begin[sid + 1]; ++k)
          if (t.end_s[dag.stream_ops[k]] > prev_end) roots.push_back(dag.stream_ops[k]);
      }
      idle += unexplained(dag, t, r, prev_end, t.iteration_time_s, std::move(roots));
    }
    out[static_cast<std::size_t>(r)] = idle;
  }
  return out;
}

std::vector<TimeInterval> exposed_intervals(const RankReport& rank, StreamKind stream) {
  std::vector<TimeInterval> out;
  for (const ExposedPiece& p : rank.exposed_pieces) {
    if (p.stream != stream) continue;
    if (!out.empty() && out.back().end_s == p.start_s)
      out.back().end_s = p.end_s;
    else
      out.push_back({p.start_s, p.end_s});
  }
  return out;
}

// The first figure of `fields` (a report, a rank's part, ...) that is not finite, as its dotted
// name ("ranks.peak_memory_gib"), or "" when every one is.
template <HasFields T>
std::string first_non_finite(const T& fields, const std::string& prefix) {
  std::string bad;
  visit_fields(fields, [&](const FieldInfo& info, const auto& v) {
    using V = std::remove_cvref_t<decltype(v)>;
    if (!bad.empty()) return;
    const std::string name = prefix + info.name;
    if constexpr (std::is_floating_point_v<V>) {
      if (!std::isfinite(v)) bad = name + " = " + util::format("%g", v);
    } else if constexpr (HasFields<V>) {
      bad = first_non_finite(v, name + ".");
    } else if constexpr (ListOfFields<V>) {
      for (const auto& item : v)
        if (bad.empty()) bad = first_non_finite(item, name + ".");
    } else if constexpr (std::is_same_v<V, std::vector<double>>) {
      for (const double x : v)
        if (bad.empty() && !std::isfinite(x)) bad = name + " = " + util::format("%g", x);
    }
  });
  return bad;
}

namespace {

// make_report, or with `attribute` false its figures alone (report_figures).
Report report_of(const std::string& study, const Schedule& schedule, const CostModel& cost,
                 const Dag& dag, const Timeline& timeline, bool attribute) {
  Report rep;
  rep.study = study;
  rep.schedule = schedule.name;
  rep.uniform = cost.uniform;
  util::copy_pipeline_sizes(rep, schedule);
  rep.tp = cost.tp;
  rep.gpus = cost.gpus;
  rep.ops = dag.size();
  const double T = timeline.iteration_time_s;
  rep.iteration_time_s = T;
  CommSeconds comm_s{};
  if (attribute) {
    comm_s = attribute_ranks(dag, timeline, rep.ranks);
  } else {
    rep.ranks.resize(dag.pp);
    for (int r = 0; r < dag.pp; ++r) rep.ranks[r].rank = r;
  }

  double ma = 0;
  for (const ChunkCost& c : cost.chunks) ma += c.activation_bytes;
  rep.ma_bytes = cost.chunks.empty() ? 0 : ma / static_cast<double>(cost.chunks.size());
  rep.hbm_gib = cost.hbm_bytes / kGiB;

  double tp = 0, cp = 0, ep = 0, pp = 0, off = 0, dp = 0, opt = 0;
  for (int r = 0; r < schedule.pp; ++r) {
    RankReport& rr = rep.ranks[r];
    tp += rr.tp_exposed_s;
    cp += rr.cp_exposed_s;
    ep += rr.ep_exposed_s;
    pp += rr.pp_idle_s;
    off += rr.offload_stall_s;
    dp += rr.dp_exposed_s;
    opt += rr.optimizer_s;
    static_parts(cost, schedule, r, rr);
    rr.activation_peak_bytes = timeline.peak_activation_bytes[r];
    rr.activation_peak_ma = rep.ma_bytes > 0 ? rr.activation_peak_bytes / rep.ma_bytes : 0;
    rr.peak_memory_bytes = rr.static_bytes + rr.activation_peak_bytes;
    rr.peak_memory_gib = rr.peak_memory_bytes / kGiB;
    if (cost.hbm_bytes > 0 && rr.peak_memory_bytes > cost.hbm_bytes) {
      rr.oom = true;
      rr.over_bytes = rr.peak_memory_bytes - cost.hbm_bytes;
      if (!rep.oom || rr.over_bytes > rep.oom_over_gib * kGiB) {
        rep.oom = true;
        rep.oom_rank = r;
        rep.oom_over_gib = rr.over_bytes / kGiB;
      }
    }
    rep.max_peak_memory_gib = std::max(rep.max_peak_memory_gib, rr.peak_memory_gib);
  }
  // Without a study's cap (explore.hpp, MemoryCap) the peak is held against the bare HBM.
  rep.cap_gib = rep.hbm_gib;
  rep.margin_gib = rep.hbm_gib - rep.max_peak_memory_gib;
  const double denom = schedule.pp * T;
  if (denom > 0) {
    rep.dp_exposed_rate = dp / denom;
    rep.optimizer_rate = opt / denom;
    rep.tp_comm_rate = comm_s[collective_index(StreamKind::Tp)] / denom;
    rep.cp_comm_rate = comm_s[collective_index(StreamKind::Cp)] / denom;
    rep.ep_comm_rate = comm_s[collective_index(StreamKind::Ep)] / denom;
    rep.dp_comm_rate = comm_s[collective_index(StreamKind::Dp)] / denom;
    rep.tp_bubble_rate = tp / denom;
    rep.cp_exposed_rate = cp / denom;
    rep.ep_exposed_rate = ep / denom;
    rep.pp_bubble_rate = pp / denom;
    rep.offload_stall_rate = off / denom;
  }
  if (T > 0) {
    if (cost.gpus > 0 && cost.peak_flops > 0) {
      rep.mfu = cost.model_flops / (T * cost.gpus * cost.peak_flops);
      rep.hfu = cost.hardware_flops / (T * cost.gpus * cost.peak_flops);
    }
    rep.tokens_per_s = cost.tokens_per_iteration / T;
    rep.samples_per_s = cost.samples_per_iteration / T;
    if (cost.gpus > 0) rep.tflops_per_gpu = cost.model_flops / T / cost.gpus / 1e12;
  }
  if (!attribute) return rep;
  rep.critical_path = summarize_critical_path(dag, timeline);
  // Finite by construction: the inputs are bounded (docs/configuration.md, Bounds), so a figure
  // that overflowed is a bug, never a printed inf or a sweep row ranked ok.
  if (const std::string bad = first_non_finite(rep, ""); !bad.empty())
    throw InternalError("report figure " + bad + " is not finite for schedule " + schedule.name +
                        " on " + study +
                        "; its inputs are within their bounds, so this is a "
                        "bug");
  return rep;
}

}  // namespace

Report make_report(const std::string& study, const Schedule& schedule, const CostModel& cost,
                   const Dag& dag, const Timeline& timeline) {
  return report_of(study, schedule, cost, dag, timeline, true);
}

Report report_figures(const std::string& study, const Schedule& schedule, const CostModel& cost,
                      const Dag& dag, const Timeline& timeline) {
  return report_of(study, schedule, cost, dag, timeline, false);
}

}  // namespace braid
