// The wait graph (wait_graph.hpp): the dependency rules of DESIGN §3 as edges between instructions.
#include "wait_graph.hpp"

#include <algorithm>

namespace braid::detail {

WaitGraph::WaitGraph(const Schedule& s) {
  const int p = s.pp, stages = s.virtual_stages(), m = s.microbatches;
  first.assign(p + 1, 0);
  for (int r = 0; r < p; ++r)
    first[r + 1] = first[r] + static_cast<int>(s.ranks[r].instructions.size());
  out.assign(first[p], {});
  waits.assign(first[p], {});
  // The node running each (stage, microbatch)'s F and B.
  std::vector<int> f_node(static_cast<std::size_t>(stages) * m, -1), b_node(f_node);
  auto key = [&](int stage, int mb) { return static_cast<std::size_t>(stage) * m + mb; };
  for (int r = 0; r < p; ++r)
    for (int k = 0; k < static_cast<int>(s.ranks[r].instructions.size()); ++k) {
      PassPart parts[2];
      const int n = parts_of(s.ranks[r].instructions[k], parts);
      for (int i = 0; i < n; ++i) {
        const Pass& q = parts[i].pass;
        if (parts[i].kind == PassKind::F)
          f_node[key(s.virtual_stage(r, q.chunk), q.mb)] = first[r] + k;
        if (parts[i].kind == PassKind::B)
          b_node[key(s.virtual_stage(r, q.chunk), q.mb)] = first[r] + k;
      }
    }
  for (int r = 0; r < p; ++r)
    for (int k = 0; k < static_cast<int>(s.ranks[r].instructions.size()); ++k) {
      const int self = first[r] + k;
      if (k > 0) out[self - 1].push_back(self);
      PassPart parts[2];
      const int n = parts_of(s.ranks[r].instructions[k], parts);
      for (int i = 0; i < n; ++i) {
        const Pass& q = parts[i].pass;
        const int stage = s.virtual_stage(r, q.chunk);
        int dep = -1;
        if (parts[i].kind == PassKind::F && stage > 0) dep = f_node[key(stage - 1, q.mb)];
        if (parts[i].kind == PassKind::B)
          dep = stage == stages - 1 ? f_node[key(stage, q.mb)] : b_node[key(stage + 1, q.mb)];
        if (dep >= 0) add(dep, self);
      }
    }
}

int WaitGraph::rank_of(int node) const {
  return static_cast<int>(std::upper_bound(first.begin(), first.end(), node) - first.begin()) - 1;
}

void WaitGraph::add(int from, int to) {
  out[from].push_back(to);
  waits[to].push_back(from);
}

bool WaitGraph::fusing_closes_cycle(int x) const {
  const auto& targets = waits[x + 1];
  if (targets.empty()) return false;
  std::vector<char> seen(out.size(), 0);
  std::vector<int> stack{x};
  seen[x] = 1;
  while (!stack.empty()) {
    const int u = stack.back();
    stack.pop_back();
    if (std::find(targets.begin(), targets.end(), u) != targets.end()) return true;
    for (int w : out[u])
      if (!seen[w] && !(u == x && w == x + 1)) {
        seen[w] = 1;
        stack.push_back(w);
      }
  }
  return false;
}

}  // namespace braid::detail
