// validate(): proves a schedule complete and deadlock-free and measures its in-flight
// activations. Completeness and same-rank order are checked pass by pass; cross-rank order is a
// dependency graph (Boost.Graph) over every instruction of every rank — program order on a rank,
// F of stage k after F of stage k-1, B of stage k after B of stage k+1 (after its own F on the last
// stage) — in which a cycle is a deadlock.
#include <algorithm>
#include <string>
#include <vector>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/depth_first_search.hpp>

#include "braid/schedule.hpp"

namespace braid {

namespace {

enum class Kind { F, B, W, Offload, Reload };

struct Part {
  Kind kind;
  Pass pass;
};

// The passes an instruction runs, in the order they are checked.
int parts_of(const Instruction& in, Part out[2]) {
  switch (in.op) {
    case OpCode::F:
      out[0] = {Kind::F, in.a};
      return 1;
    case OpCode::B:
      out[0] = {Kind::B, in.a};
      return 1;
    case OpCode::W:
      out[0] = {Kind::W, in.a};
      return 1;
    case OpCode::FB:
      out[0] = {Kind::F, in.a};
      out[1] = {Kind::B, in.b};
      return 2;
    case OpCode::FW:
      out[0] = {Kind::F, in.a};
      out[1] = {Kind::W, in.b};
      return 2;
    case OpCode::FF:
      out[0] = {Kind::F, in.a};
      out[1] = {Kind::F, in.b};
      return 2;
    case OpCode::Offload:
      out[0] = {Kind::Offload, in.a};
      return 1;
    case OpCode::Reload:
      out[0] = {Kind::Reload, in.a};
      return 1;
  }
  return 0;
}

std::string pass_text(const char* letter, const Pass& p) {
  return letter + std::to_string(p.chunk) + "." + std::to_string(p.mb);
}

// Context-free text of one instruction (W always names its pass).
std::string instruction_text(const Instruction& in) {
  auto b = [](const Pass& p) { return pass_text("B", p) + (p.defer_w ? "*" : ""); };
  switch (in.op) {
    case OpCode::F:
      return pass_text("F", in.a);
    case OpCode::B:
      return b(in.a);
    case OpCode::W:
      return pass_text("W", in.a);
    case OpCode::FB:
      return pass_text("F", in.a) + "&" + b(in.b);
    case OpCode::FW:
      return pass_text("F", in.a) + "&" + pass_text("W", in.b);
    case OpCode::FF:
      return pass_text("F", in.a) + "+" + pass_text("F", in.b);
    case OpCode::Offload:
      return pass_text("OFF", in.a);
    case OpCode::Reload:
      return pass_text("REL", in.a);
  }
  return "?";
}

// Where each pass of one (rank, chunk, microbatch) runs: instruction positions, -1 = not yet.
struct Slots {
  int f = -1, b = -1, w = -1, offload = -1, reload = -1;
  bool defer_w = false;
};

struct Node {
  int rank;
  int position;
};

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

}  // namespace

ValidationResult validate(const Schedule& s) {
  ValidationResult result;
  const int p = s.pp, v = s.vpp, m = s.microbatches;
  auto where = [&](int r, int k) {
    return "rank " + std::to_string(r) + ", position " + std::to_string(k) + " (" +
           instruction_text(s.ranks[r].instructions[k]) + ")";
  };
  if (p < 1 || v < 1 || m < 1) {
    result.error = "schedule sizes must be >= 1 (pp " + std::to_string(p) + ", vpp " +
                   std::to_string(v) + ", microbatches " + std::to_string(m) + ")";
    return result;
  }
  if (s.placement == Placement::V && v != 2) {
    result.error = "the V placement has exactly 2 chunks per rank, not " + std::to_string(v);
    return result;
  }
  if (static_cast<int>(s.ranks.size()) != p) {
    result.error = "schedule has " + std::to_string(s.ranks.size()) + " rank programs, expected " +
                   std::to_string(p);
    return result;
  }

  // 1. Each pass once, in order on its rank.
  std::vector<Slots> slots(static_cast<size_t>(p) * v * m);
  auto slot = [&](int r, const Pass& q) -> Slots& {
    return slots[(static_cast<size_t>(r) * v + q.chunk) * m + q.mb];
  };
  std::vector<int> first_node(p + 1, 0);
  for (int r = 0; r < p; ++r) {
    const RankProgram& prog = s.ranks[r];
    if (prog.rank != r) {
      result.error =
          "rank program " + std::to_string(r) + " says it is rank " + std::to_string(prog.rank);
      return result;
    }
    first_node[r + 1] = first_node[r] + static_cast<int>(prog.instructions.size());
    for (int k = 0; k < static_cast<int>(prog.instructions.size()); ++k) {
      Part parts[2];
      int n = parts_of(prog.instructions[k], parts);
      for (int i = 0; i < n; ++i) {
        const Pass& q = parts[i].pass;
        if (q.chunk < 0 || q.chunk >= v || q.mb < 0 || q.mb >= m) {
          result.error = where(r, k) + ": chunk must be in 0.." + std::to_string(v - 1) +
                         " and microbatch in 0.." + std::to_string(m - 1);
          return result;
        }
        Slots& sl = slot(r, q);
        auto fail = [&](const std::string& why) {
          result.error = where(r, k) + ": " + why;
          return result;
        };
        const std::string id =
            "chunk " + std::to_string(q.chunk) + " microbatch " + std::to_string(q.mb);
        switch (parts[i].kind) {
          case Kind::F:
            if (sl.f >= 0)
              return fail("second F of " + id + " (first at position " + std::to_string(sl.f) +
                          ")");
            sl.f = k;
            break;
          case Kind::B:
            if (sl.b >= 0)
              return fail("second B of " + id + " (first at position " + std::to_string(sl.b) +
                          ")");
            if (sl.f < 0 || sl.f >= k) return fail("B of " + id + " before its F");
            if (sl.offload >= 0 && sl.reload < 0)
              return fail("B of " + id + " while its activations are offloaded (no RELOAD yet)");
            sl.b = k;
            sl.defer_w = q.defer_w;
            break;
          case Kind::W:
            if (sl.w >= 0)
              return fail("second W of " + id + " (first at position " + std::to_string(sl.w) +
                          ")");
            if (sl.b < 0 || sl.b >= k) return fail("W of " + id + " before its B");
            if (!sl.defer_w) return fail("W of " + id + " whose B already ran the weight gradient");
            sl.w = k;
            break;
          case Kind::Offload:
            if (sl.offload >= 0) return fail("second OFFLOAD of " + id);
            if (sl.f < 0 || sl.f >= k) return fail("OFFLOAD of " + id + " before its F");
            if (sl.b >= 0) return fail("OFFLOAD of " + id + " after its B");
            sl.offload = k;
            break;
          case Kind::Reload:
            if (sl.reload >= 0) return fail("second RELOAD of " + id);
            if (sl.offload < 0) return fail("RELOAD of " + id + " that was not offloaded");
            sl.reload = k;
            break;
        }
      }
    }
  }
  for (int r = 0; r < p; ++r)
    for (int c = 0; c < v; ++c)
      for (int i = 0; i < m; ++i) {
        const Slots& sl = slot(r, Pass{c, i, false});
        const std::string id = "rank " + std::to_string(r) + ": chunk " + std::to_string(c) +
                               " microbatch " + std::to_string(i);
        if (sl.f < 0)
          result.error = id + " has no F";
        else if (sl.b < 0)
          result.error = id + " has no B";
        else if (sl.defer_w && sl.w < 0)
          result.error = id + " defers its W but has no W";
        else if (sl.offload >= 0 && sl.reload < 0)
          result.error = id + " is offloaded, never reloaded";
        if (!result.ok()) return result;
      }

  // 2. Cross-rank dependencies; a cycle is a deadlock.
  const int nodes = first_node[p];
  const int stages = p * v;
  Graph g(static_cast<size_t>(nodes));
  std::vector<Node> node_of(static_cast<size_t>(nodes));
  auto node = [&](int r, int k) { return first_node[r] + k; };
  auto f_node = [&](int stage, int mb) {
    int r = s.rank_of(stage);
    return node(r, slot(r, Pass{s.chunk_of(stage), mb, false}).f);
  };
  auto b_node = [&](int stage, int mb) {
    int r = s.rank_of(stage);
    return node(r, slot(r, Pass{s.chunk_of(stage), mb, false}).b);
  };
  for (int r = 0; r < p; ++r) {
    const auto& list = s.ranks[r].instructions;
    for (int k = 0; k < static_cast<int>(list.size()); ++k) {
      const int self = node(r, k);
      node_of[self] = {r, k};
      if (k > 0) boost::add_edge(self - 1, self, g);
      Part parts[2];
      int n = parts_of(list[k], parts);
      for (int i = 0; i < n; ++i) {
        const Pass& q = parts[i].pass;
        const int stage = s.virtual_stage(r, q.chunk);
        int dep = -1;
        if (parts[i].kind == Kind::F && stage > 0) dep = f_node(stage - 1, q.mb);
        if (parts[i].kind == Kind::B)
          dep = stage == stages - 1 ? f_node(stage, q.mb) : b_node(stage + 1, q.mb);
        if (dep < 0) continue;
        if (dep == self) {
          result.error = "deadlock: " + where(r, k) + " waits for a pass of its own instruction";
          return result;
        }
        boost::add_edge(dep, self, g);
      }
    }
  }
  std::vector<int> parent(static_cast<size_t>(nodes), -1);
  CycleVisitor visitor;
  visitor.parent = &parent;
  try {
    boost::depth_first_search(g, boost::visitor(visitor));
  } catch (const CycleFound& cycle) {
    // The back edge from -> to closes to -> ... -> from (tree path) -> to.
    std::vector<int> path;
    for (int x = cycle.from; x != cycle.to && x >= 0; x = parent[x]) path.push_back(x);
    path.push_back(cycle.to);
    std::reverse(path.begin(), path.end());
    // Show the instructions where a wait crosses to another pass; a run of consecutive
    // instructions on one rank (program order) shows only its ends.
    auto program_edge = [&](int a, int b) {
      return node_of[a].rank == node_of[b].rank && node_of[b].position == node_of[a].position + 1;
    };
    const size_t len = path.size();
    std::string text;
    for (size_t i = 0; i < len; ++i) {
      int prev = path[(i + len - 1) % len], cur = path[i], next = path[(i + 1) % len];
      if (len > 2 && program_edge(prev, cur) && program_edge(cur, next)) continue;
      if (!text.empty()) text += " -> ";
      text += where(node_of[cur].rank, node_of[cur].position);
    }
    result.error = "deadlock: these instructions wait on each other in a cycle: " + text;
    return result;
  }

  // 3. Peak in-flight activations, in chunk-microbatches.
  for (int r = 0; r < p; ++r) {
    int in_flight = 0, on_device = 0, peak = 0, peak_device = 0;
    for (const Instruction& in : s.ranks[r].instructions) {
      Part parts[2];
      int n = parts_of(in, parts);
      // Inside a braided block the B's release is counted before the F's allocation: the block
      // frees what its B no longer needs while its F fills in.
      for (int pass = 0; pass < 2; ++pass)
        for (int i = 0; i < n; ++i) {
          Kind kind = parts[i].kind;
          bool release = kind == Kind::B || kind == Kind::Offload;
          if ((pass == 0) != release) continue;
          if (kind == Kind::F) ++in_flight, ++on_device;
          if (kind == Kind::B) --in_flight, --on_device;
          if (kind == Kind::Offload) --on_device;
          if (kind == Kind::Reload) ++on_device;
        }
      peak = std::max(peak, in_flight);
      peak_device = std::max(peak_device, on_device);
    }
    result.peak_in_flight.push_back(peak);
    result.peak_on_device.push_back(peak_device);
  }
  return result;
}

}  // namespace braid
