// validate(): proves a schedule complete and deadlock-free and measures its in-flight
// activations, in named steps: the sizes, each pass once and in order on its rank (pass by pass),
// every pass present, then cross-rank order on the wait graph (wait_graph.hpp), in which a cycle
// is a deadlock, then the peak activations.
#include <algorithm>
#include <string>
#include <vector>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/depth_first_search.hpp>

#include "braid/schedule.hpp"
#include "wait_graph.hpp"

namespace braid {

namespace {

std::string pass_text(const char* letter, const Pass& p) {
  return letter + std::to_string(p.chunk) + "." + std::to_string(p.mb);
}

// Context-free text of one instruction (W always names its pass).
std::string instruction_text(const Instruction& in) {
  auto b = [](const Pass& p) { return pass_text("B", p) + (p.defer_w ? "*" : ""); };
  switch (in.op) {
    case InstructionKind::F:
      return pass_text("F", in.a);
    case InstructionKind::B:
      return b(in.a);
    case InstructionKind::W:
      return pass_text("W", in.a);
    case InstructionKind::FB:
      return pass_text("F", in.a) + "&" + b(in.b);
    case InstructionKind::FW:
      return pass_text("F", in.a) + "&" + pass_text("W", in.b);
    case InstructionKind::FF:
      return pass_text("F", in.a) + "+" + pass_text("F", in.b);
    case InstructionKind::Offload:
      return pass_text("OFF", in.a);
    case InstructionKind::Reload:
      return pass_text("REL", in.a);
  }
  return "?";
}

std::string where(const Schedule& s, int r, int k) {
  return "rank " + std::to_string(r) + ", position " + std::to_string(k) + " (" +
         instruction_text(s.ranks[r].instructions[k]) + ")";
}

// Where each pass of one (rank, chunk, microbatch) runs: instruction positions, -1 = not yet.
struct Slots {
  int f = -1, b = -1, w = -1, offload = -1, reload = -1;
  bool defer_w = false;
};

// The slots of every (rank, chunk, microbatch).
class SlotTable {
 public:
  explicit SlotTable(const Schedule& s)
      : v_(s.vpp), m_(s.microbatches), slots_(static_cast<size_t>(s.pp) * v_ * m_) {}
  Slots& at(int r, const Pass& q) {
    return slots_[(static_cast<size_t>(r) * v_ + q.chunk) * m_ + q.mb];
  }

 private:
  int v_, m_;
  std::vector<Slots> slots_;
};

std::string check_sizes(const Schedule& s) {
  const int p = s.pp, v = s.vpp, m = s.microbatches;
  if (p < 1 || v < 1 || m < 1)
    return "schedule sizes must be >= 1 (pp " + std::to_string(p) + ", vpp " + std::to_string(v) +
           ", microbatches " + std::to_string(m) + ")";
  if (s.placement == Placement::V && v != 2)
    return "the V placement has exactly 2 chunks per rank, not " + std::to_string(v);
  if (s.p2p_runtime == P2pRuntime::Megatron && s.placement != Placement::Loop)
    return "p2p_runtime megatron runs loop-placed schedules only (Megatron-Core has no V-shaped "
           "schedule); use posted-ahead";
  if (static_cast<int>(s.ranks.size()) != p)
    return "schedule has " + std::to_string(s.ranks.size()) + " rank programs, expected " +
           std::to_string(p);
  return {};
}

// One pass against what already ran of its (rank, chunk, microbatch); empty when it may run here.
// The text is built only for an error: a valid schedule runs this once per pass.
std::string check_pass(const PassPart& part, int k, Slots& sl) {
  const Pass& q = part.pass;
  const auto id = [&] {
    return "chunk " + std::to_string(q.chunk) + " microbatch " + std::to_string(q.mb);
  };
  auto second = [&](const char* what, int at) {
    return std::string("second ") + what + " of " + id() + " (first at position " +
           std::to_string(at) + ")";
  };
  switch (part.kind) {
    case PassKind::F:
      if (sl.f >= 0) return second("F", sl.f);
      sl.f = k;
      break;
    case PassKind::B:
      if (sl.b >= 0) return second("B", sl.b);
      if (sl.f < 0 || sl.f >= k) return "B of " + id() + " before its F";
      if (sl.offload >= 0 && sl.reload < 0)
        return "B of " + id() + " while its activations are offloaded (no RELOAD yet)";
      sl.b = k;
      sl.defer_w = q.defer_w;
      break;
    case PassKind::W:
      if (sl.w >= 0) return second("W", sl.w);
      if (sl.b < 0 || sl.b >= k) return "W of " + id() + " before its B";
      if (!sl.defer_w) return "W of " + id() + " whose B already ran the weight gradient";
      sl.w = k;
      break;
    case PassKind::Offload:
      if (sl.offload >= 0) return "second OFFLOAD of " + id();
      if (sl.f < 0 || sl.f >= k) return "OFFLOAD of " + id() + " before its F";
      if (sl.b >= 0) return "OFFLOAD of " + id() + " after its B";
      sl.offload = k;
      break;
    case PassKind::Reload:
      if (sl.reload >= 0) return "second RELOAD of " + id();
      if (sl.offload < 0) return "RELOAD of " + id() + " that was not offloaded";
      sl.reload = k;
      break;
  }
  return {};
}

// Each rank program in rank order, each of its passes in range, once and in order on its rank.
std::string check_rank_order(const Schedule& s, SlotTable& slots) {
  const int v = s.vpp, m = s.microbatches;
  for (int r = 0; r < s.pp; ++r) {
    const RankProgram& prog = s.ranks[r];
    if (prog.rank != r)
      return "rank program " + std::to_string(r) + " says it is rank " + std::to_string(prog.rank);
    for (int k = 0; k < static_cast<int>(prog.instructions.size()); ++k) {
      PassPart parts[2];
      const int n = parts_of(prog.instructions[k], parts);
      for (int i = 0; i < n; ++i) {
        const Pass& q = parts[i].pass;
        if (q.chunk < 0 || q.chunk >= v || q.mb < 0 || q.mb >= m)
          return where(s, r, k) + ": chunk must be in 0.." + std::to_string(v - 1) +
                 " and microbatch in 0.." + std::to_string(m - 1);
        const std::string why = check_pass(parts[i], k, slots.at(r, q));
        if (!why.empty()) return where(s, r, k) + ": " + why;
      }
    }
  }
  return {};
}

// Every (rank, chunk, microbatch) has its F, its B, its W when deferred and its RELOAD when
// offloaded.
std::string check_complete(const Schedule& s, SlotTable& slots) {
  for (int r = 0; r < s.pp; ++r)
    for (int c = 0; c < s.vpp; ++c)
      for (int i = 0; i < s.microbatches; ++i) {
        const Slots& sl = slots.at(r, Pass{c, i, false});
        const auto id = [&] {
          return "rank " + std::to_string(r) + ": chunk " + std::to_string(c) + " microbatch " +
                 std::to_string(i);
        };
        if (sl.f < 0) return id() + " has no F";
        if (sl.b < 0) return id() + " has no B";
        if (sl.defer_w && sl.w < 0) return id() + " defers its W but has no W";
        if (sl.offload >= 0 && sl.reload < 0) return id() + " is offloaded, never reloaded";
      }
  return {};
}

struct CycleFound {
  int from;  // the back edge from -> to closes the cycle
  int to;
};

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

struct CycleVisitor : boost::default_dfs_visitor {
  std::vector<int>* parent;
  template <class Edge, class G>
  void tree_edge(Edge e, const G& g) const {
    (*parent)[boost::target(e, g)] = static_cast<int>(boost::source(e, g));
  }
  template <class Edge, class G>
  void back_edge(Edge e, const G& g) const {
    throw CycleFound{static_cast<int>(boost::source(e, g)), static_cast<int>(boost::target(e, g))};
  }
};

// The instructions of the cycle closed by the back edge from -> to: to -> ... -> from (tree
// path) -> to. Shown are those where a wait crosses to another pass; a run of consecutive
// instructions on one rank (program order) shows only its ends.
std::string cycle_text(const Schedule& s, const detail::WaitGraph& graph,
                       const std::vector<int>& parent, const CycleFound& cycle) {
  std::vector<int> path;
  for (int x = cycle.from; x != cycle.to && x >= 0; x = parent[x]) path.push_back(x);
  path.push_back(cycle.to);
  std::reverse(path.begin(), path.end());
  auto program_edge = [&](int a, int b) {
    return graph.rank_of(a) == graph.rank_of(b) && b == a + 1;
  };
  const size_t len = path.size();
  std::string text;
  for (size_t i = 0; i < len; ++i) {
    int prev = path[(i + len - 1) % len], cur = path[i], next = path[(i + 1) % len];
    if (len > 2 && program_edge(prev, cur) && program_edge(cur, next)) continue;
    if (!text.empty()) text += " -> ";
    text += where(s, graph.rank_of(cur), graph.position_of(cur));
  }
  return text;
}

// Cross-rank order: an instruction that waits for itself, or a cycle of waits, is a deadlock.
std::string check_deadlock(const Schedule& s) {
  const detail::WaitGraph graph(s);
  const int nodes = graph.nodes();
  for (int x = 0; x < nodes; ++x)
    if (std::find(graph.waits[x].begin(), graph.waits[x].end(), x) != graph.waits[x].end())
      return "deadlock: " + where(s, graph.rank_of(x), graph.position_of(x)) +
             " waits for a pass of its own instruction";
  Graph g(static_cast<size_t>(nodes));
  for (int x = 0; x < nodes; ++x)
    for (int y : graph.out[x]) boost::add_edge(x, y, g);
  std::vector<int> parent(static_cast<size_t>(nodes), -1);
  CycleVisitor visitor;
  visitor.parent = &parent;
  try {
    boost::depth_first_search(g, boost::visitor(visitor));
  } catch (const CycleFound& cycle) {
    return "deadlock: these instructions wait on each other in a cycle: " +
           cycle_text(s, graph, parent, cycle);
  }
  return {};
}

// Peak in-flight activations per rank, in chunk-microbatches.
void measure_peaks(const Schedule& s, ValidationResult& result) {
  for (int r = 0; r < s.pp; ++r) {
    int in_flight = 0, on_device = 0, peak = 0, peak_device = 0;
    for (const Instruction& in : s.ranks[r].instructions) {
      PassPart parts[2];
      int n = parts_of(in, parts);
      // Inside a braided block the B's release is counted before the F's allocation: the block
      // frees what its B no longer needs while its F fills in.
      for (int pass = 0; pass < 2; ++pass)
        for (int i = 0; i < n; ++i) {
          PassKind kind = parts[i].kind;
          bool release = kind == PassKind::B || kind == PassKind::Offload;
          if ((pass == 0) != release) continue;
          if (kind == PassKind::F) ++in_flight, ++on_device;
          if (kind == PassKind::B) --in_flight, --on_device;
          if (kind == PassKind::Offload) --on_device;
          if (kind == PassKind::Reload) ++on_device;
        }
      peak = std::max(peak, in_flight);
      peak_device = std::max(peak_device, on_device);
    }
    result.peak_in_flight.push_back(peak);
    result.peak_on_device.push_back(peak_device);
  }
}

}  // namespace

std::string pass_order_error(const Schedule& s) {
  std::string error = check_sizes(s);
  if (!error.empty()) return error;
  SlotTable slots(s);
  error = check_rank_order(s, slots);
  if (!error.empty()) return error;
  return check_complete(s, slots);
}

ValidationResult validate(const Schedule& s) {
  ValidationResult result;
  result.error = pass_order_error(s);
  if (result.ok()) result.error = check_deadlock(s);
  if (result.ok()) measure_peaks(s, result);
  return result;
}

}  // namespace braid
