// The discrete-event engine (DESIGN §4). Stream order is a dependency like any other: an op is
// ready when its stream predecessor and its dependencies are done, and then starts at once (its
// stream is free because its predecessor on it has ended). Events are op completions in a binary
// min-heap over a preallocated vector; contention re-times the running ops of a rank when its
// running set changes, and stale heap entries are skipped by a per-op version counter. State is
// kept in flat per-op and per-rank arrays; nothing is allocated per event.
#include <algorithm>
#include <cstdint>
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

bool is_comm(StreamKind s) {
  return s == StreamKind::Tp || s == StreamKind::P2pNext || s == StreamKind::P2pPrev ||
         s == StreamKind::Dp;
}

// What the inner loop reads of an op, packed in 32 bytes (a DagOp is twice that, with fields the
// engine never reads; this keeps the hot path in cache).
struct HotOp {
  double duration_s;
  double alloc_bytes;
  double free_bytes;
  std::int32_t rank;
  std::uint8_t role;  // 0 compute, 1..4 comm slot (tp, p2p next, p2p prev, dp) + 1, 5 D2H, 6 H2D
  std::uint8_t pad[3];
};
constexpr std::uint8_t kCompute = 0, kCommSlots = 4, kCopy = 5, kD2H = 5, kH2D = 6;

std::uint8_t role_of(StreamKind s) {
  if (s == StreamKind::Compute) return kCompute;
  if (s == StreamKind::Dp) return kCommSlots;
  if (is_comm(s)) return static_cast<std::uint8_t>(s);
  return s == StreamKind::D2H ? kD2H : kH2D;
}

class Engine {
 public:
  Engine(const Dag& dag, const SimOptions& options, Timeline& out)
      : dag_(dag), out_(out), record_(options.record_memory) {
    const int n = dag.size();
    ranks_ = dag.pp;
    compute_slowdown_ = dag.contention.compute_slowdown;
    comm_slowdown_ = dag.contention.comm_slowdown;
    // Copy contention: a D2H and an H2D copy running together on a rank slow each other (the
    // host link's bidirectional factors); copies do not slow compute or TP/P2P traffic.
    copy_slowdown_[0] = dag.copy_contention.d2h_slowdown;
    copy_slowdown_[1] = dag.copy_contention.h2d_slowdown;
    out_.start_s.assign(n, 0.0);
    out_.end_s.assign(n, 0.0);
    out_.ranks = ranks_;
    out_.peak_activation_bytes.assign(ranks_, 0.0);
    out_.peak_activation_time_s.assign(ranks_, 0.0);
    out_.memory.clear();
    // One pass over the ops: dependency counts and the packed hot records.
    pending_.resize(n);
    hot_.resize(n);
    for (int i = 0; i < n; ++i) {
      pending_[i] = dag.pred_begin[i + 1] - dag.pred_begin[i] + (dag.stream_prev[i] >= 0 ? 1 : 0);
      const DagOp& op = dag.ops[i];
      HotOp& h = hot_[i];
      h.duration_s = op.duration_s;
      h.alloc_bytes = op.alloc_bytes;
      h.free_bytes = op.free_bytes;
      h.rank = op.rank;
      h.role = role_of(op.stream);
    }
    // The fluid model runs only when something can slow something: compute against
    // communication, or copies (when the DAG has any) against each other.
    const bool copies =
        std::any_of(hot_.begin(), hot_.end(), [](const HotOp& h) { return h.role >= kCopy; });
    contention_ =
        options.contention && (compute_slowdown_ != 1.0 || comm_slowdown_ != 1.0 ||
                               (copies && (copy_slowdown_[0] != 1.0 || copy_slowdown_[1] != 1.0)));
    if (contention_) {
      remaining_.assign(n, 0.0);
      slowdown_.assign(n, 1.0);
      since_.assign(n, 0.0);
      version_.assign(n, 0);
      running_compute_.assign(ranks_, -1);
      running_comm_.assign(static_cast<std::size_t>(ranks_) * kCommSlots, -1);
      comm_count_.assign(ranks_, 0);
      running_copy_.assign(static_cast<std::size_t>(ranks_) * 2, -1);
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
        if (contention_ && e.version != version_[e.op]) continue;  // re-timed since
        finish(e.op);
      }
    }
    out_.iteration_time_s = now_;
    if (finished_ != n) report_deadlock();
  }

 private:
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
    const HotOp& op = hot_[i];
    const int r = op.rank;
    out_.start_s[i] = now_;
    if (op.alloc_bytes != 0) {
      memory_[r] += op.alloc_bytes;
      if (memory_[r] > out_.peak_activation_bytes[r]) {
        out_.peak_activation_bytes[r] = memory_[r];
        out_.peak_activation_time_s[r] = now_;
      }
      sample(r);
    }
    if (op.duration_s <= 0) {
      zero_.push_back(i);
      return;
    }
    if (!contention_) {
      push(now_ + op.duration_s, i, 0);
      return;
    }
    double slowdown = 1.0;
    if (op.role == kCompute) {
      running_compute_[r] = i;
      if (comm_count_[r] > 0) {
        slowdown = compute_slowdown_;
        retime_comm(r, comm_slowdown_);
      }
    } else if (op.role < kCopy) {
      running_comm_[static_cast<std::size_t>(r) * kCommSlots + op.role - 1] = i;
      if (running_compute_[r] >= 0) {
        slowdown = comm_slowdown_;
        if (comm_count_[r] == 0) retime(running_compute_[r], compute_slowdown_);
      }
      ++comm_count_[r];
    } else {
      const int dir = op.role - kCopy, other = 1 - dir;
      running_copy_[static_cast<std::size_t>(r) * 2 + dir] = i;
      const int peer = running_copy_[static_cast<std::size_t>(r) * 2 + other];
      if (peer >= 0) {
        slowdown = copy_slowdown_[dir];
        retime(peer, copy_slowdown_[other]);
      }
    }
    remaining_[i] = op.duration_s;
    since_[i] = now_;
    slowdown_[i] = slowdown;
    push(now_ + op.duration_s * slowdown, i, version_[i]);
  }

  void finish(int i) {
    const HotOp& op = hot_[i];
    const int r = op.rank;
    out_.end_s[i] = now_;
    ++finished_;
    if (op.free_bytes != 0) {
      memory_[r] -= op.free_bytes;
      sample(r);
    }
    if (contention_ && op.duration_s > 0) {
      if (op.role == kCompute) {
        running_compute_[r] = -1;
        if (comm_count_[r] > 0) retime_comm(r, 1.0);
      } else if (op.role < kCopy) {
        running_comm_[static_cast<std::size_t>(r) * kCommSlots + op.role - 1] = -1;
        if (--comm_count_[r] == 0 && running_compute_[r] >= 0) retime(running_compute_[r], 1.0);
      } else {
        const int dir = op.role - kCopy;
        running_copy_[static_cast<std::size_t>(r) * 2 + dir] = -1;
        const int peer = running_copy_[static_cast<std::size_t>(r) * 2 + (1 - dir)];
        if (peer >= 0) retime(peer, 1.0);
      }
    }
    const std::int32_t* succ = dag_.succs.data();
    for (int j = dag_.succ_begin[i], e = dag_.succ_begin[i + 1]; j < e; ++j) {
      const int s = succ[j];
      if (--pending_[s] == 0) ready_.push_back(s);
    }
    const int next = dag_.stream_next[i];
    if (next >= 0 && --pending_[next] == 0) ready_.push_back(next);
  }

  void retime_comm(int rank, double slowdown) {
    for (int k = 0; k < kCommSlots; ++k) {
      const int op = running_comm_[static_cast<std::size_t>(rank) * kCommSlots + k];
      if (op >= 0) retime(op, slowdown);
    }
  }

  // The fluid model: work done so far at the old rate is subtracted, the rest runs at the new one.
  void retime(int i, double slowdown) {
    if (slowdown_[i] == slowdown) return;
    remaining_[i] -= (now_ - since_[i]) / slowdown_[i];
    if (remaining_[i] < 0) remaining_[i] = 0;
    since_[i] = now_;
    slowdown_[i] = slowdown;
    push(now_ + remaining_[i] * slowdown, i, ++version_[i]);
  }

  void report_deadlock() const {
    check_acyclic(dag_);  // throws naming the ops on the cycle
    std::string stuck;
    int shown = 0;
    for (int i = 0; i < dag_.size() && shown < 8; ++i)
      if (pending_[i] > 0) {
        stuck += (shown ? ", " : "") + op_name(dag_, i);
        ++shown;
      }
    throw InputError("schedule", dag_.schedule, "ops never became ready: " + stuck);
  }

  const Dag& dag_;
  Timeline& out_;
  bool record_ = false;
  bool contention_ = false;
  double compute_slowdown_ = 1.0, comm_slowdown_ = 1.0;
  double copy_slowdown_[2] = {1.0, 1.0};  // D2H, H2D while the other direction runs
  int ranks_ = 0;
  int finished_ = 0;
  double now_ = 0;
  std::vector<HotOp> hot_;
  std::vector<std::int32_t> pending_;
  std::vector<double> remaining_, slowdown_, since_;
  std::vector<std::uint32_t> version_;
  std::vector<std::int32_t> running_compute_, running_comm_, comm_count_;
  std::vector<std::int32_t> running_copy_;  // per rank: D2H, H2D op running (-1 none)
  std::vector<double> memory_;
  std::vector<int> last_sample_;
  std::vector<Event> heap_;
  std::vector<std::int32_t> ready_, zero_;
};

}  // namespace

Timeline simulate(const Dag& dag, const SimOptions& options) {
  Timeline timeline;
  Engine engine(dag, options, timeline);
  engine.run();
  return timeline;
}

}  // namespace braid
