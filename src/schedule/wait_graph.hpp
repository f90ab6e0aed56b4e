// The wait graph of a schedule: one node per instruction of every rank, an edge from each
// instruction to every instruction that waits for it — program order on a rank, F of stage k after
// F of stage k-1, B of stage k after B of stage k+1 (after its own F on the last stage). A cycle
// is a deadlock. Used by validate() (which reports cycles) and by STP's re-braider (which asks
// whether fusing two instructions would close one). Internal to src/schedule/.
#pragma once

#include <cstddef>
#include <vector>

#include "braid/schedule.hpp"

namespace braid::detail {

struct WaitGraph {
  std::vector<int> first;               // first node of each rank; first[p] = node count
  std::vector<std::vector<int>> out;    // node -> nodes that wait for it, in insertion order
  std::vector<std::vector<int>> waits;  // node -> its cross-rank dependencies (not program order)

  // Requires every F and B of the schedule to be present once and in range (validate()'s pass
  // checks); a dependency on the instruction itself is recorded as a self loop.
  explicit WaitGraph(const Schedule& s);

  int nodes() const { return first.back(); }
  int rank_of(int node) const;
  int position_of(int node) const { return node - first[rank_of(node)]; }

  // Whether fusing consecutive nodes x and x+1 of one rank closes a cycle: it does exactly when
  // one of x+1's cross dependencies is x itself or is reachable from x.
  bool fusing_closes_cycle(int x) const;

 private:
  void add(int from, int to);
};

}  // namespace braid::detail
