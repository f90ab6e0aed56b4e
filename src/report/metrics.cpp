// The metrics of DESIGN §5 from a Dag and its Timeline.
//
// Idle attribution: the compute stream of rank r is idle in the gaps between its ops (and before
// the first, after the last until the iteration ends). For the gap [g0, g1) before op X, the ops
// X waits for on rank r are found by walking back from X through dependencies and stream order,
// staying on rank r, skipping the compute stream (its ops ended by g0) and ops that ended by g0.
// The part of the gap covered by a TP collective among them (running, or holding one that is
// queued behind it) is tp_exposed; the part covered by a data-parallel sync op (gradient bucket,
// parameter all-gather, tied-embedding all-reduce) and not already TP is dp_exposed; the part
// covered by an offload/reload copy and neither of those is offload_stall; the rest — waiting on
// a P2P, on another rank, start-up and drain — is pp_idle, computed as the remainder so the six
// (with busy and the optimizer step, compute ops of their own) add up to the iteration time on
// every rank. After the last compute op the "X" is the end of the iteration, which waits for
// every op of the rank.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "../util/units.hpp"
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

class IdleAttribution {
 public:
  IdleAttribution(const Dag& dag, const Timeline& t) : dag_(dag), t_(t) {
    lists_.ops = dag.ops.size();
  }

  void rank(int r, RankReport& out) {
    const int cs = dag_.stream_id(r, StreamKind::Compute);
    double busy = 0, opt = 0, tp = 0, dp = 0, off = 0, prev_end = 0;
    out.tp_exposed_pieces.clear();
    // Ranks have about as many pieces as each other: room for the last rank's, grown from there.
    out.tp_exposed_pieces.reserve(last_pieces_);
    pieces_ = &out.tp_exposed_pieces;
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
      if (s > prev_end && !small_gap(r, x, prev_end, s, tp)) {
        lists_.reset();
        push_waited_on(view(prev_end, s), lists_, x);
        gap(r, prev_end, s, tp, dp, off);
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
      gap(r, prev_end, end, tp, dp, off);
    }
    last_pieces_ = out.tp_exposed_pieces.size();
    out.busy_s = busy;
    out.optimizer_s = opt;
    out.tp_exposed_s = tp;
    out.dp_exposed_s = dp;
    out.offload_stall_s = off;
    // The remainder; a rank that is never idle can come out a few ulps below zero (PP 1), which
    // is rounding, not idle time.
    out.pp_idle_s = std::max(0.0, end - busy - opt - tp - dp - off);
  }

  // The time of the TP collectives of the ranks so far, added in op order, when their tp streams
  // list them in op order rank after rank (as lowering does); false when one does not.
  bool collectives_in_op_order() const { return collectives_.in_order; }
  double collectives_s() const { return collectives_.total_s; }

 private:
  static constexpr std::size_t kListed = 32;  // ops a gap meets before it uses the marks
  static constexpr int kSmallWalk = 8;        // ops SmallWalk holds and meets at most

  struct CollectiveSum {
    double total_s = 0;
    int last = -1;
    bool in_order = true;
  };

  // The collectives are the ops of the tp streams (OpKind::Collective). Rank r's are added right
  // after its compute pass, which has just read the times of the ops around them (a rank's part
  // of the timeline stays in cache; a second pass over the whole timeline would not find it).
  void add_collectives(int r) {
    const int s = dag_.stream_id(r, StreamKind::Tp);
    const int* i = dag_.stream_ops.data() + dag_.stream_begin[s];
    const int* const stop = dag_.stream_ops.data() + dag_.stream_begin[s + 1];
    const double* start = t_.start_s.data();
    const double* end = t_.end_s.data();
    CollectiveSum sum = collectives_;
    for (; i != stop; ++i) {
      sum.in_order = sum.in_order && *i > sum.last;
      sum.last = *i;
      sum.total_s += end[*i] - start[*i];
    }
    collectives_ = sum;
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
      if (!w.record(v, op.kind, y) || !push_waited_on(v, w, y)) return false;
    }
    return true;
  }

  // The storage of a walk that meets at most kSmallWalk ops and, of the rank's own, no DP sync
  // op, no copy and at most two collectives (every gap of the qwen2 run): arrays on the stack,
  // searched by a scan.
  struct SmallWalk {
    int stack[kSmallWalk], met_ops[kSmallWalk], coll[2];
    int depth = 0, n_met = 0, n_coll = 0;
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
    bool record(const WalkView&, OpKind kind, int y) {  // the intervals are read at the end
      if (kind == OpKind::Collective) {
        if (n_coll == 2) return false;
        coll[n_coll++] = y;
        return true;
      }
      return kind != OpKind::DpSync && kind != OpKind::Offload && kind != OpKind::Reload;
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
    std::vector<std::pair<double, double>> tp_iv, dp_only, copy_iv;
    std::vector<int> tp_ops;  // the collective of each tp_iv
    void reset() {
      stack.clear();
      seen.clear();
      marked = false;
      tp_iv.clear();
      tp_ops.clear();
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
    bool record(const WalkView& v, OpKind kind, int y) {
      if (kind == OpKind::Collective) {
        tp_iv.push_back(v.interval(y));
        tp_ops.push_back(y);
      } else if (kind == OpKind::DpSync) {
        dp_only.push_back(v.interval(y));
      } else if (kind == OpKind::Offload || kind == OpKind::Reload) {
        copy_iv.push_back(v.interval(y));
      }
      return true;
    }
  };

  // The gap [g0, g1) before compute op x on SmallWalk's arrays, with the same pieces and sums as
  // gap() (they depend on which ops the walk meets, not on the order it meets them). False, with
  // nothing recorded, when the walk does not fit them.
  bool small_gap(int r, int x, double g0, double g1, double& tp) {
    const WalkView v = view(g0, g1);
    SmallWalk w;
    if (!push_waited_on(v, w, x) || !walk_gap(v, w, r)) return false;
    if (w.n_coll == 1) one_collective(v.interval(w.coll[0]), w.coll[0], tp);
    if (w.n_coll == 2)
      two_collectives(v.interval(w.coll[0]), w.coll[0], v.interval(w.coll[1]), w.coll[1], tp);
    return true;
  }

  // The gap [g0, g1) whose roots lists_ holds.
  void gap(int r, double g0, double g1, double& tp, double& dp, double& off) {
    walk_gap(view(g0, g1), lists_, r);
    std::vector<std::pair<double, double>>& tp_iv = lists_.tp_iv;
    const std::vector<std::pair<double, double>>& dp_only = lists_.dp_only;
    const std::vector<std::pair<double, double>>& copy_iv = lists_.copy_iv;
    if (tp_iv.size() <= 2 && dp_only.empty() && copy_iv.empty()) {
      // The common gaps: one collective or none, or two (one queued behind the other). The same
      // pieces and sums as the general case below.
      const std::vector<int>& ops = lists_.tp_ops;
      if (tp_iv.size() == 1) one_collective(tp_iv[0], ops[0], tp);
      if (tp_iv.size() == 2) two_collectives(tp_iv[0], ops[0], tp_iv[1], ops[1], tp);
      return;
    }
    // Precedence TP, then DP, then copies: each category is its union minus the ones before.
    // The TP union is recorded piece by piece (its collectives) before the sort below.
    split_among_collectives();
    // The DP union is over the collectives and the DP sync ops, the last over those and the
    // copies. The union sorts its intervals first, so the order they are gathered in changes
    // nothing; one over the same intervals as the one before it (no DP sync op, no copy in the
    // gap) would sum to the same value and is not measured again.
    const double t = union_length(tp_iv);
    double td = t;
    if (!dp_only.empty()) {
      dp_iv_.assign(tp_iv.begin(), tp_iv.end());
      dp_iv_.insert(dp_iv_.end(), dp_only.begin(), dp_only.end());
      td = union_length(dp_iv_);
    }
    double all = td;
    if (!copy_iv.empty()) {
      const auto& below = dp_only.empty() ? tp_iv : dp_iv_;
      all_iv_.assign(below.begin(), below.end());
      all_iv_.insert(all_iv_.end(), copy_iv.begin(), copy_iv.end());
      all = union_length(all_iv_);
    }
    tp += t;
    dp += td - t;
    off += all - td;
  }

  // A piece [b, e) of collective y, joined to the one before when it continues it.
  void piece(int y, double b, double e) {
    std::vector<ExposedPiece>& out = *pieces_;
    if (!out.empty() && out.back().op == y && out.back().end_s == b)
      out.back().end_s = e;
    else
      out.push_back({y, b, e});
  }

  // split_among_collectives and union_length for a single interval [b, e) of collective y.
  void one_collective(std::pair<double, double> iv, int y, double& tp) {
    const auto [b, e] = iv;
    if (e <= b) return;
    piece(y, b, e);
    tp += e - b;
  }

  // The same for the intervals of two collectives p and q: the one that started first (the
  // lower op on a tie) holds all of its own; the other what lies after it. The union adds one
  // length when they overlap or touch, else the two lengths in start order.
  void two_collectives(std::pair<double, double> p_iv, int p, std::pair<double, double> q_iv, int q,
                       double& tp) {
    auto [pb, pe] = p_iv;
    auto [qb, qe] = q_iv;
    if (qe <= qb) return one_collective(p_iv, p, tp);
    if (pe <= pb) return one_collective(q_iv, q, tp);
    if (qb < pb || (qb == pb && q < p)) {
      std::swap(pb, qb);
      std::swap(pe, qe);
      std::swap(p, q);
    }
    piece(p, pb, pe);
    if (qe > pe) piece(q, std::max(qb, pe), qe);
    tp += qb <= pe ? std::max(pe, qe) - pb : (pe - pb) + (qe - qb);
  }

  // The union of this gap's collective intervals, each elementary segment given to the collective
  // that covers it and started first (lists_.tp_iv and tp_ops are parallel, before sorting).
  void split_among_collectives() {
    const std::vector<std::pair<double, double>>& tp_iv = lists_.tp_iv;
    const std::vector<int>& tp_ops = lists_.tp_ops;
    std::vector<double>& xs = xs_;  // kept between gaps: no allocation per gap
    xs.clear();
    for (const auto& [b, e] : tp_iv) {
      if (e <= b) continue;
      xs.push_back(b);
      xs.push_back(e);
    }
    std::sort(xs.begin(), xs.end());
    xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
    for (std::size_t k = 0; k + 1 < xs.size(); ++k) {
      int holder = -1;
      for (std::size_t i = 0; i < tp_iv.size(); ++i) {
        const auto& [b, e] = tp_iv[i];
        if (b > xs[k] || e < xs[k + 1] || e <= b) continue;
        if (holder < 0 || b < tp_iv[holder].first ||
            (b == tp_iv[holder].first && tp_ops[i] < tp_ops[holder]))
          holder = static_cast<int>(i);
      }
      if (holder >= 0) piece(tp_ops[holder], xs[k], xs[k + 1]);
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
  std::vector<std::pair<double, double>> dp_iv_, all_iv_;
  CollectiveSum collectives_;                    // the ranks' so far
  std::vector<ExposedPiece>* pieces_ = nullptr;  // the rank's tp_exposed pieces
  std::size_t last_pieces_ = 0;                  // how many the rank before had
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
  for (std::size_t k = 0; k < visits.size() && k < kShown; ++k) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%sr%d %.4g", k ? " > " : "", visits[k].first, visits[k].second);
    cp.text += buf;
  }
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

// attribute_idle, and the total time of the TP collectives, all ranks, added in op order: along
// the tp streams as the attribution passes them, the same terms in the same order as a pass over
// every op, which is made only when a stream lists them out of op order.
double attribute_ranks(const Dag& dag, const Timeline& t, std::vector<RankReport>& ranks) {
  IdleAttribution attribution(dag, t);
  ranks.resize(dag.pp);
  for (int r = 0; r < dag.pp; ++r) {
    ranks[r].rank = r;
    attribution.rank(r, ranks[r]);
  }
  if (attribution.collectives_in_op_order()) return attribution.collectives_s();
  double total = 0;
  for (int j = 0; j < dag.size(); ++j)
    if (dag.ops[j].kind == OpKind::Collective) total += t.end_s[j] - t.start_s[j];
  return total;
}

}  // namespace

void attribute_idle(const Dag& dag, const Timeline& timeline, std::vector<RankReport>& ranks) {
  attribute_ranks(dag, timeline, ranks);
}

std::vector<TimeInterval> tp_exposed_intervals(const RankReport& rank) {
  std::vector<TimeInterval> out;
  for (const ExposedPiece& p : rank.tp_exposed_pieces) {
    if (!out.empty() && out.back().end_s == p.start_s)
      out.back().end_s = p.end_s;
    else
      out.push_back({p.start_s, p.end_s});
  }
  return out;
}

Report make_report(const std::string& study, const Schedule& schedule, const CostModel& cost,
                   const Dag& dag, const Timeline& timeline) {
  Report rep;
  rep.study = study;
  rep.schedule = schedule.name;
  rep.uniform = cost.uniform;
  rep.pp = schedule.pp;
  rep.vpp = schedule.vpp;
  rep.tp = cost.tp;
  rep.microbatches = schedule.microbatches;
  rep.gpus = cost.gpus;
  rep.ops = dag.size();
  const double T = timeline.iteration_time_s;
  rep.iteration_time_s = T;
  const double collectives_s = attribute_ranks(dag, timeline, rep.ranks);

  double ma = 0;
  for (const ChunkCost& c : cost.chunks) ma += c.activation_bytes;
  rep.ma_bytes = cost.chunks.empty() ? 0 : ma / static_cast<double>(cost.chunks.size());
  rep.hbm_gib = cost.hbm_bytes / kGiB;

  double tp = 0, pp = 0, off = 0, dp = 0, opt = 0;
  for (int r = 0; r < schedule.pp; ++r) {
    RankReport& rr = rep.ranks[r];
    tp += rr.tp_exposed_s;
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
  const double denom = schedule.pp * T;
  if (denom > 0) {
    rep.dp_exposed_rate = dp / denom;
    rep.optimizer_rate = opt / denom;
    rep.tp_comm_rate = collectives_s / denom;
    rep.tp_bubble_rate = tp / denom;
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
  rep.critical_path = summarize_critical_path(dag, timeline);
  return rep;
}

}  // namespace braid
