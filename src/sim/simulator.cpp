// The discrete-event engine (DESIGN §4). Stream order is a dependency like any other: an op is
// ready when its stream predecessor and its dependencies are done, and then starts at once (its
// stream is free because its predecessor on it has ended). Events are op completions in a binary
// min-heap over a preallocated vector; contention re-times the running ops of a rank when its
// running set changes, and stale heap entries are skipped by a per-stream version counter (a
// stream runs one op at a time). State is kept in flat per-op, per-stream and per-rank arrays;
// nothing is allocated per event.
//
// Without contention a heap is not needed: an op starts at the latest end among its predecessors
// and ends `duration` later, so one topological pass gives every time. The pass times each
// stream's ops in stream order, so a rank whose memory moves on one stream alone (lowering puts
// it on the compute stream, copies aside) has its peak from the pass; otherwise a per-rank merge
// of the streams' (already time-ordered) memory events replays the engine's order at each
// instant (completions free, then each zero-time round allocates and frees).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "braid/simulator.hpp"

namespace braid {

namespace {

struct Event {
  double time_s;
  std::int32_t op;
  std::uint32_t version;
};

// Min-heap order: earliest first, then lowest op index (determinism).
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.time_s > b.time_s || (a.time_s == b.time_s && a.op > b.op);
  }
};

// The engine reads each op's 20-byte DagOp in place, and its cost from the Dag's table of
// distinct costs (a few dozen entries, in the first-level cache).
// Every stream that is not compute or a copy engine is communication (TP, P2P, and whatever
// communication streams are added later): it contends with compute.
constexpr std::uint8_t kCompute = 0, kD2H = 1, kH2D = 2, kComm = 3;
static_assert(kComm + kStreamsPerRank <= 255);

std::uint8_t role_of(StreamKind s) {
  switch (s) {
    case StreamKind::Compute:
      return kCompute;
    case StreamKind::D2H:
      return kD2H;
    case StreamKind::H2D:
      return kH2D;
    default:
      return static_cast<std::uint8_t>(kComm + static_cast<int>(s));
  }
}

bool has_copies(const Dag& dag) {
  const int ranks = dag.pp;
  for (int r = 0; r < ranks; ++r)
    for (const StreamKind k : {StreamKind::D2H, StreamKind::H2D}) {
      const int sid = dag.stream_id(r, k);
      if (dag.stream_begin[sid + 1] > dag.stream_begin[sid]) return true;
    }
  return false;
}

// The fluid model runs only when something can slow something: compute against communication,
// or copies (when the DAG has any) against each other.
bool contends(const Dag& dag, const SimOptions& options) {
  if (!options.contention) return false;
  if (dag.contention.compute_slowdown != 1.0 || dag.contention.comm_slowdown != 1.0) return true;
  return (dag.copy_contention.d2h_slowdown != 1.0 || dag.copy_contention.h2d_slowdown != 1.0) &&
         has_copies(dag);
}

// The op after each on its stream, for the engine (the Dag keeps only the one before; the
// topological pass keeps it in each op's waiting slot): a stream's ops end in stream order, so one
// position per stream follows them.
class NextOnStream {
 public:
  explicit NextOnStream(const Dag& dag)
      : dag_(dag), at_(dag.stream_begin.begin(), dag.stream_begin.end() - 1) {}
  // The op after `i`, which must be the next op of its stream to end; -1 after the last.
  int after(int i) {
    const DagOp& op = dag_.ops[i];
    return after_on(dag_.stream_id(op.rank, op.stream));
  }
  // The same, given the stream of the op that ends.
  int after_on(int s) {
    const int k = ++at_[s];
    return k < dag_.stream_begin[s + 1] ? dag_.stream_ops[k] : -1;
  }

 private:
  const Dag& dag_;
  std::vector<std::int32_t> at_;  // per stream: where the op to end next sits in stream_ops
};

class Engine {
 public:
  Engine(const Dag& dag, const SimOptions& options, Timeline& out)
      : dag_(dag), succ_(successors(dag)), out_(out), record_(options.record_memory), next_(dag) {
    const int n = dag.size();
    ranks_ = dag.pp;
    compute_slowdown_ = dag.contention.compute_slowdown;
    comm_slowdown_ = dag.contention.comm_slowdown;
    // Copy contention: a D2H and an H2D copy running together on a rank slow each other (the
    // host link's bidirectional factors); copies do not slow compute or TP/P2P traffic.
    copy_slowdown_[0] = dag.copy_contention.d2h_slowdown;
    copy_slowdown_[1] = dag.copy_contention.h2d_slowdown;
    out_.start_s.assign(n, -1.0);  // -1: not started (report_deadlock)
    out_.end_s.resize(n);
    out_.ranks = ranks_;
    out_.peak_activation_bytes.assign(ranks_, 0.0);
    out_.peak_activation_time_s.assign(ranks_, 0.0);
    out_.memory.clear();
    // An op's end is written when it ends; until then its slot holds the count of its inputs not
    // yet ended (a small whole number, exact as a double), so no array of counts is needed.
    pending_ = out_.end_s.data();
    for (int i = 0; i < n; ++i)
      pending_[i] = dag.pred_begin[i + 1] - dag.pred_begin[i] + (dag.stream_prev[i] >= 0 ? 1 : 0);
    contention_ = contends(dag, options);
    if (contention_) {
      const std::size_t streams = static_cast<std::size_t>(ranks_) * kStreamsPerRank;
      running_.assign(streams, Running{});
      comm_count_.assign(ranks_, 0);
    }
    memory_.assign(ranks_, 0.0);
    last_sample_.assign(ranks_, -1);
    heap_.reserve(static_cast<std::size_t>(ranks_) * kStreamsPerRank * 4 + 16);
    ready_.reserve(64);
    zero_.reserve(64);
    if (record_) {
      out_.memory.reserve(static_cast<std::size_t>(n) + ranks_);
      for (int r = 0; r < ranks_; ++r) sample(r);
    }
  }

  void run() {
    const int n = dag_.size();
    for (int i = 0; i < n; ++i)
      if (pending_[i] == 0) ready_.push_back(i);
    for (;;) {
      // Start everything ready at `now_`; zero-length ops end at once and may ready more.
      while (!ready_.empty()) {
        for (const int op : ready_) start(op);  // start() never touches ready_
        ready_.clear();
        for (const int op : zero_) finish(op);  // finish() never touches zero_
        zero_.clear();
      }
      if (heap_.empty()) break;
      // Complete every op that ends at the next event time (frees before the next starts).
      now_ = heap_.front().time_s;
      while (!heap_.empty() && heap_.front().time_s == now_) {
        const Event e = heap_.front();
        std::pop_heap(heap_.begin(), heap_.end(), Later{});
        heap_.pop_back();
        ++out_.events;
        if (contention_ && !current(e)) continue;  // re-timed since
        finish(e.op);
      }
    }
    out_.iteration_time_s = now_;
    if (finished_ != n) report_deadlock();
  }

 private:
  // A stream runs one op at a time, so the fluid model's state lives per stream: an event is
  // current when its op is the one running on its stream and no re-timing has followed it.
  std::size_t slot(int rank, StreamKind s) const {
    return static_cast<std::size_t>(rank) * kStreamsPerRank + static_cast<int>(s);
  }
  std::size_t slot_of(int i) const { return slot(dag_.ops[i].rank, dag_.ops[i].stream); }
  bool current(const Event& e) const {
    const Running& run = running_[slot_of(e.op)];
    return run.op == e.op && run.version == e.version;
  }

  void push(double time_s, int op, std::uint32_t version) {
    heap_.push_back(Event{time_s, op, version});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }

  void sample(int rank) {
    if (!record_) return;
    const int last = last_sample_[rank];
    if (last >= 0 && out_.memory[last].time_s == now_) {
      out_.memory[last].activation_bytes = memory_[rank];
      return;
    }
    last_sample_[rank] = static_cast<int>(out_.memory.size());
    out_.memory.push_back(MemorySample{now_, rank, memory_[rank]});
  }

  void start(int i) {
    const DagOp& op = dag_.ops[i];
    const OpCost& cost = dag_.costs[op.cost];
    const int r = op.rank;
    out_.start_s[i] = now_;
    if (cost.alloc_bytes != 0) {
      memory_[r] += cost.alloc_bytes;
      if (memory_[r] > out_.peak_activation_bytes[r]) {
        out_.peak_activation_bytes[r] = memory_[r];
        out_.peak_activation_time_s[r] = now_;
      }
      sample(r);
    }
    if (cost.duration_s <= 0) {
      zero_.push_back(i);
      return;
    }
    if (!contention_) {
      push(now_ + cost.duration_s, i, 0);
      return;
    }
    double slowdown = 1.0;
    const std::uint8_t role = role_of(op.stream);
    const std::size_t compute = slot(r, StreamKind::Compute);
    if (op.copy_engine) {
      // No SMs: it runs at its own rate beside the compute (counted in no contention).
    } else if (role == kCompute) {
      if (comm_count_[r] > 0) {
        slowdown = compute_slowdown_;
        retime_comm(r, comm_slowdown_);
      }
    } else if (role >= kComm) {
      if (running_[compute].op >= 0) {
        slowdown = comm_slowdown_;
        if (comm_count_[r] == 0) retime(compute, compute_slowdown_);
      }
      ++comm_count_[r];
    } else {
      const int dir = role - kD2H;
      const std::size_t other = slot(r, dir == 0 ? StreamKind::H2D : StreamKind::D2H);
      if (running_[other].op >= 0) {
        slowdown = copy_slowdown_[dir];
        retime(other, copy_slowdown_[1 - dir]);
      }
    }
    Running& run = running_[slot(r, op.stream)];
    run.op = i;
    run.remaining_s = cost.duration_s;
    run.since_s = now_;
    run.slowdown = slowdown;
    push(now_ + cost.duration_s * slowdown, i, ++run.version);
  }

  void finish(int i) {
    const DagOp& op = dag_.ops[i];
    const OpCost& cost = dag_.costs[op.cost];
    const int r = op.rank;
    out_.end_s[i] = now_;
    ++finished_;
    if (cost.free_bytes != 0) {
      memory_[r] -= cost.free_bytes;
      sample(r);
    }
    if (contention_ && cost.duration_s > 0) {
      running_[slot(r, op.stream)].op = -1;
      const std::uint8_t role = role_of(op.stream);
      const std::size_t compute = slot(r, StreamKind::Compute);
      if (op.copy_engine) {
        // It took part in no contention.
      } else if (role == kCompute) {
        if (comm_count_[r] > 0) retime_comm(r, 1.0);
      } else if (role >= kComm) {
        if (--comm_count_[r] == 0 && running_[compute].op >= 0) retime(compute, 1.0);
      } else {
        const std::size_t other = slot(r, role == kD2H ? StreamKind::H2D : StreamKind::D2H);
        if (running_[other].op >= 0) retime(other, 1.0);
      }
    }
    const std::int32_t* succ = succ_.list.data();
    for (int j = succ_.begin[i], e = succ_.begin[i + 1]; j < e; ++j) ready_if_last(succ[j]);
    const int next = next_.after(i);
    if (next >= 0) ready_if_last(next);
  }

  // One input of op `s` has ended; when it was the last, `s` starts at this instant. Its record
  // is fetched now, while the instant's other completions run: start() reads it later, and a
  // record not in cache was the engine's largest stall.
  void ready_if_last(int s) {
    if (--pending_[s] != 0) return;
    __builtin_prefetch(&dag_.ops[s]);
    ready_.push_back(s);
  }

  void retime_comm(int rank, double slowdown) {
    for (int k = 0; k < kStreamsPerRank; ++k) {
      const std::size_t s = slot(rank, static_cast<StreamKind>(k));
      if (role_of(static_cast<StreamKind>(k)) >= kComm && running_[s].op >= 0 &&
          !dag_.ops[running_[s].op].copy_engine)
        retime(s, slowdown);
    }
  }

  // The fluid model: work done so far at the old rate is subtracted, the rest runs at the new one.
  void retime(std::size_t s, double slowdown) {
    Running& run = running_[s];
    if (run.slowdown == slowdown) return;
    run.remaining_s -= (now_ - run.since_s) / run.slowdown;
    if (run.remaining_s < 0) run.remaining_s = 0;
    run.since_s = now_;
    run.slowdown = slowdown;
    push(now_ + run.remaining_s * slowdown, run.op, ++run.version);
  }

  void report_deadlock() const {
    check_acyclic(dag_);  // throws naming the ops on the cycle
    std::string stuck;
    int shown = 0;
    for (int i = 0; i < dag_.size() && shown < 8; ++i)
      if (out_.start_s[i] < 0) {  // its inputs never all ended
        stuck += (shown ? ", " : "") + op_name(dag_, i);
        ++shown;
      }
    throw InputError("schedule", dag_.schedule, "ops never became ready: " + stuck);
  }

  const Dag& dag_;
  const Successors succ_;  // an op's end readies its successors
  Timeline& out_;
  bool record_ = false;
  bool contention_ = false;
  double compute_slowdown_ = 1.0, comm_slowdown_ = 1.0;
  double copy_slowdown_[2] = {1.0, 1.0};  // D2H, H2D while the other direction runs
  int ranks_ = 0;
  int finished_ = 0;
  double now_ = 0;
  // The op running on a stream (with contention), its work left at `since_s` and its rate then.
  struct Running {
    std::int32_t op = -1;
    std::uint32_t version = 0;  // bumped by every start and re-timing: older events are stale
    double remaining_s = 0, since_s = 0, slowdown = 1.0;
  };
  NextOnStream next_;
  double* pending_ = nullptr;             // in out_.end_s
  std::vector<Running> running_;          // per (rank, stream)
  std::vector<std::int32_t> comm_count_;  // per rank: communication ops running
  std::vector<double> memory_;
  std::vector<int> last_sample_;
  std::vector<Event> heap_;
  std::vector<std::int32_t> ready_, zero_;
};

// ---- the fast path --------------------------------------------------------------------------

// An op's round in the topological pass (time_topologically) with this bit set: the op took time,
// so an op it readies starts in round 1 (else in the op's round + 1).
constexpr std::uint16_t kTimed = 0x8000;

// One stream's activation memory replayed alone, in the topological pass: a stream's ops are
// timed in stream order, so its allocs and frees come in its own event order. A rank whose memory
// all moves on one stream takes its peak from here; the sweep merges the others.
struct StreamMemory {
  double bytes = 0, peak = 0, peak_time_s = 0;
  bool used = false;  // some op of the stream allocates or frees
};

// One rank's memory events in the engine's order: by time, then by slot — 0 for ends of timed ops
// (heap completions), 2k-1 for starts in the k-th zero-time round of the instant, 2k for ends of
// zero-time ops started in round k. Each stream's events are in that order already (an op starts
// no earlier than its stream predecessor's end, in a later round), so the streams are merged.
class MemorySweep {
 public:
  MemorySweep(const Dag& dag, const Timeline& t, const std::uint16_t* round)
      : dag_(dag), t_(t), round_(round) {}

  // Streams whose ops neither allocate nor free (`memory_of`, per stream of the Dag) are not read.
  void rank(int r, const std::vector<StreamMemory>& memory_of, double& peak, double& peak_time) {
    int active = 0;
    for (int s = 0; s < kStreamsPerRank; ++s) {
      const int sid = dag_.stream_id(r, static_cast<StreamKind>(s));
      if (!memory_of[sid].used) continue;
      Cursor& c = cursor_[active++];
      c = Cursor{dag_.stream_begin[sid], dag_.stream_begin[sid + 1], false, false, 0, 0, 0};
      advance(c);
    }
    double memory = 0;
    peak = 0;
    peak_time = 0;
    for (;;) {
      Cursor* next = nullptr;
      for (int a = 0; a < active; ++a) {
        Cursor& c = cursor_[a];
        if (c.pending &&
            (!next || c.time_s < next->time_s || (c.time_s == next->time_s && c.slot < next->slot)))
          next = &c;
      }
      if (!next) break;
      memory += next->delta;
      if (next->delta > 0 && memory > peak) {
        peak = memory;
        peak_time = next->time_s;
      }
      advance(*next);
    }
  }

 private:
  struct Cursor {
    int k, end;    // the op to look at next in stream_ops, end of the stream
    bool at_free;  // op k's alloc has been taken; its free is next
    bool pending;  // time_s, slot, delta hold an event not yet applied
    double time_s;
    std::int64_t slot;
    double delta;
  };

  // Loads the stream's next event with a non-zero amount (pending false when none is left).
  void advance(Cursor& c) const {
    c.pending = false;
    while (c.k < c.end) {
      const int i = dag_.stream_ops[c.k];
      const OpCost& cost = dag_.cost(i);
      const std::int64_t round = round_[i] & ~kTimed;
      if (!c.at_free) {
        c.at_free = true;
        if (cost.alloc_bytes != 0) {
          c.time_s = t_.start_s[i];
          c.slot = 2 * round - 1;
          c.delta = cost.alloc_bytes;
          c.pending = true;
          return;
        }
      }
      c.at_free = false;
      ++c.k;
      if (cost.free_bytes != 0) {
        c.time_s = t_.end_s[i];
        c.slot = cost.duration_s > 0 ? 0 : 2 * round;
        c.delta = -cost.free_bytes;
        c.pending = true;
        return;
      }
    }
  }

  const Dag& dag_;
  const Timeline& t_;
  const std::uint16_t* round_;
  Cursor cursor_[kStreamsPerRank]{};
};

// While an op waits in the topological pass, its end-time slot holds a negative zero — the sign
// bit, which no end (a sum of non-negative times) has — and in bits 0-31 one more than the first
// stream stalled on it (0: none); the list goes on through each stalled stream's `next_waiter`.
// A stream stalls on one op at a time, so the lists need one slot per stream, none per op.
constexpr std::uint64_t kWaiting = std::uint64_t{1} << 63;

// One stream in the topological pass: its next op, and what its last timed op hands the next.
struct Lane {
  int k = 0, end = 0;    // the op to time next in stream_ops, end of the stream
  int next_waiter = -1;  // the next stream stalled on the same op (while this one is)
  double behind_s = -1;  // the end of the stream's last timed op (-1: none yet)
  std::uint32_t behind_round = 0;
};

// The topological pass: false when it cannot guarantee the event engine's results (a cycle, a
// duration too small to move its end, memory sums that could round by order). Each stream times
// its ops in stream order, reading its ops' predecessors, until one has a predecessor not yet
// timed; it then waits on that op and another stream goes on. No successor lists, no count of
// inputs per op. The Dag is read through plain pointers: a store through the timeline's pointers
// could otherwise alias a vector's own, and every access would load the vector's data pointer
// again.
bool time_topologically(const Dag& dag, Timeline& out) {
  const int n = dag.size();
  if (!(dag.memory_exact || memory_sums_exact(dag))) return false;
  if (dag.stream_begin.back() != n) return false;  // every op is on a stream
  out.start_s.resize(n);
  out.end_s.assign(n, std::bit_cast<double>(kWaiting));
  out.ranks = dag.pp;
  double* start = out.start_s.data();
  double* end_of = out.end_s.data();
  // round: the zero-time round of the instant in which the op starts (1 when readied by a timed
  // op's end or at time 0, k + 1 when by a zero-time op of round k) — the engine's order — and
  // kTimed. 2 bytes per op at the peak of a run (the Dag and the Timeline are alive): an instant of
  // more rounds is left to the engine.
  const auto round_of = std::make_unique_for_overwrite<std::uint16_t[]>(n);
  std::uint16_t* round = round_of.get();
  const int streams = static_cast<int>(dag.stream_begin.size()) - 1;
  std::vector<Lane> lanes(streams);
  std::vector<StreamMemory> memory(streams);
  // The streams ready to go on: each is here at most once (or running, or stalled).
  std::vector<std::int32_t> ready(streams);
  int top = 0;
  for (int sid = streams - 1; sid >= 0; --sid) {
    lanes[sid].k = dag.stream_begin[sid];
    lanes[sid].end = dag.stream_begin[sid + 1];
    ready[top++] = sid;
  }
  const DagOp* ops = dag.ops.data();
  const OpCost* costs = dag.costs.data();
  const std::int32_t* stream_ops = dag.stream_ops.data();
  const std::int32_t* pred_begin = dag.pred_begin.data();
  const std::int32_t* preds = dag.preds.data();
  double last = 0;
  int done = 0;
  std::int64_t timed = 0;
  while (top > 0) {
    const int sid = ready[--top];
    Lane& lane = lanes[sid];
    while (lane.k < lane.end) {
      const int i = stream_ops[lane.k];
      if (lane.k + 1 < lane.end) __builtin_prefetch(&ops[stream_ops[lane.k + 1]]);
      double t = lane.behind_s;
      std::uint32_t r = lane.behind_round;
      int waits_on = -1;
      for (int j = pred_begin[i], e = pred_begin[i + 1]; j < e; ++j) {
        const int p = preds[j];
        const auto bits = std::bit_cast<std::uint64_t>(end_of[p]);
        if (bits & kWaiting) {
          waits_on = p;
          break;
        }
        const double pe = std::bit_cast<double>(bits);
        const std::uint32_t pr = (round[p] & kTimed) != 0 ? 1U : round[p] + 1U;
        if (pe > t) {
          t = pe;
          r = pr;
        } else if (pe == t) {
          r = std::max(r, pr);
        }
      }
      if (waits_on >= 0) {
        const auto bits = std::bit_cast<std::uint64_t>(end_of[waits_on]);
        lane.next_waiter = static_cast<int>(static_cast<std::uint32_t>(bits)) - 1;
        end_of[waits_on] = std::bit_cast<double>(kWaiting | static_cast<std::uint64_t>(sid + 1));
        break;
      }
      if (t < 0) {  // no inputs: starts at 0
        t = 0;
        r = 1;
      }
      if (r >= kTimed) return false;  // the engine counts on
      ++done;
      start[i] = t;
      const OpCost& cost = costs[ops[i].cost];
      if (cost.alloc_bytes != 0 || cost.free_bytes != 0) {
        StreamMemory& m = memory[sid];
        m.used = true;
        if (cost.alloc_bytes != 0) {
          m.bytes += cost.alloc_bytes;
          if (cost.alloc_bytes > 0 && m.bytes > m.peak) {
            m.peak = m.bytes;
            m.peak_time_s = t;
          }
        }
        m.bytes -= cost.free_bytes;
      }
      const double d = cost.duration_s;
      double e = t;
      if (d > 0) {
        e += d;
        if (e == t) return false;  // the engine would meet it again at this instant
        ++timed;
        round[i] = static_cast<std::uint16_t>(r | kTimed);
        lane.behind_round = 1;
      } else {
        round[i] = static_cast<std::uint16_t>(r);
        lane.behind_round = r + 1;
      }
      lane.behind_s = e;
      last = std::max(last, e);
      const auto waiting = std::bit_cast<std::uint64_t>(end_of[i]);
      end_of[i] = e;
      for (int w = static_cast<int>(static_cast<std::uint32_t>(waiting)) - 1; w >= 0;
           w = lanes[w].next_waiter)
        ready[top++] = w;
      ++lane.k;
    }
  }
  if (done != n) return false;  // the event engine names the cycle
  out.iteration_time_s = last;
  out.events = timed;
  out.peak_activation_bytes.assign(dag.pp, 0.0);
  out.peak_activation_time_s.assign(dag.pp, 0.0);
  MemorySweep sweep(dag, out, round);
  for (int rk = 0; rk < dag.pp; ++rk) {
    const StreamMemory* only = nullptr;
    int used = 0;
    for (int k = 0; k < kStreamsPerRank; ++k) {
      const StreamMemory& m = memory[dag.stream_id(rk, static_cast<StreamKind>(k))];
      if (m.used) {
        only = &m;
        ++used;
      }
    }
    if (used > 1) {
      sweep.rank(rk, memory, out.peak_activation_bytes[rk], out.peak_activation_time_s[rk]);
    } else if (only) {  // nothing to merge
      out.peak_activation_bytes[rk] = only->peak;
      out.peak_activation_time_s[rk] = only->peak_time_s;
    }
  }
  out.fast_path = true;
  return true;
}

}  // namespace

Timeline simulate_events(const Dag& dag, const SimOptions& options) {
  Timeline timeline;
  Engine engine(dag, options, timeline);
  engine.run();
  return timeline;
}

Timeline simulate(const Dag& dag, const SimOptions& options) {
  if (!options.record_memory && !contends(dag, options)) {
    Timeline timeline;
    if (time_topologically(dag, timeline)) return timeline;
  }
  return simulate_events(dag, options);
}

std::optional<std::vector<double>> untimed_activation_peaks(const Dag& dag) {
  if (dag.stream_begin.empty() || dag.stream_begin.back() != dag.size()) return std::nullopt;
  std::vector<double> peaks(dag.pp, 0.0);
  for (int r = 0; r < dag.pp; ++r) {
    bool moved = false;  // some earlier stream of the rank allocates or frees
    for (int k = 0; k < kStreamsPerRank; ++k) {
      const int sid = dag.stream_id(r, static_cast<StreamKind>(k));
      double bytes = 0, peak = 0;
      bool used = false;
      for (int j = dag.stream_begin[sid], e = dag.stream_begin[sid + 1]; j < e; ++j) {
        const OpCost& cost = dag.costs[dag.ops[dag.stream_ops[j]].cost];
        if (cost.alloc_bytes == 0 && cost.free_bytes == 0) continue;
        used = true;
        // The engine's order of terms (Engine::start, Engine::finish).
        if (cost.alloc_bytes != 0) {
          bytes += cost.alloc_bytes;
          peak = std::max(peak, bytes);
        }
        if (cost.free_bytes != 0) bytes -= cost.free_bytes;
      }
      if (!used) continue;
      if (moved) return std::nullopt;
      moved = true;
      peaks[r] = peak;
    }
  }
  return peaks;
}

int critical_pred(const Dag& dag, const Timeline& timeline, int op) {
  const double* end = timeline.end_s.data();
  int best = dag.stream_prev[op];
  for (int j = dag.pred_begin[op], e = dag.pred_begin[op + 1]; j < e; ++j) {
    const int p = dag.preds[j];
    if (best < 0 || end[p] > end[best] || (end[p] == end[best] && p < best)) best = p;
  }
  return best;
}

}  // namespace braid
