// Graph algorithms on the Dag through Boost.Graph: the dependency + stream-order graph is viewed
// as a compressed_sparse_row_graph; cycles are found with depth-first search (a back edge closes
// one), the critical path with the DAG longest path (dag_shortest_paths with a max-plus algebra).
#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/dag_shortest_paths.hpp>
#include <boost/graph/depth_first_search.hpp>

#include "braid/dag.hpp"
#include "braid/error.hpp"

namespace braid {

namespace {

using Graph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, double>;
using Vertex = boost::graph_traits<Graph>::vertex_descriptor;
using Edge = boost::graph_traits<Graph>::edge_descriptor;

// Every dependency and every stream-order link as an edge; with `source`, an extra vertex n
// feeding every op that has no predecessor. Edge weight: the weight of its source op.
Graph make_graph(const Dag& dag, const std::vector<double>* weight, bool source) {
  const int n = dag.size();
  std::vector<std::pair<int, int>> edges;
  std::vector<double> w;
  edges.reserve(dag.preds.size() + n);
  w.reserve(edges.capacity());
  for (int v = 0; v < n; ++v) {
    const bool root = dag.pred_begin[v] == dag.pred_begin[v + 1] && dag.stream_prev[v] < 0;
    if (source && root) {
      edges.emplace_back(n, v);
      w.push_back(0.0);
    }
    for (int j = dag.pred_begin[v]; j < dag.pred_begin[v + 1]; ++j) {
      edges.emplace_back(dag.preds[j], v);
      w.push_back(weight ? (*weight)[dag.preds[j]] : 0.0);
    }
    if (dag.stream_prev[v] >= 0) {
      edges.emplace_back(dag.stream_prev[v], v);
      w.push_back(weight ? (*weight)[dag.stream_prev[v]] : 0.0);
    }
  }
  return {boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(), w.begin(),
          static_cast<std::size_t>(n + (source ? 1 : 0))};
}

// Records the DFS tree and the first back edge.
struct CycleVisitor : boost::default_dfs_visitor {
  std::vector<Vertex>* parent;
  std::pair<Vertex, Vertex>* back;
  bool* found;
  void tree_edge(Edge e, const Graph& g) const { (*parent)[target(e, g)] = source(e, g); }
  void back_edge(Edge e, const Graph& g) const {
    if (!*found) {
      *found = true;
      *back = {source(e, g), target(e, g)};
    }
  }
};

}  // namespace

std::vector<int> find_cycle(const Dag& dag) {
  const Graph g = make_graph(dag, nullptr, false);
  const std::size_t n = num_vertices(g);
  std::vector<Vertex> parent(n);
  for (std::size_t i = 0; i < n; ++i) parent[i] = i;
  std::pair<Vertex, Vertex> back{0, 0};
  bool found = false;
  CycleVisitor visitor;
  visitor.parent = &parent;
  visitor.back = &back;
  visitor.found = &found;
  std::vector<boost::default_color_type> color(n);
  boost::depth_first_search(g, boost::visitor(visitor).color_map(boost::make_iterator_property_map(
                                   color.begin(), get(boost::vertex_index, g))));
  if (!found) return {};
  // back = (u, v): v is an ancestor of u, so v -> ... -> u follows the tree, then u -> v closes.
  std::vector<int> cycle;
  for (Vertex x = back.first;; x = parent[x]) {
    cycle.push_back(static_cast<int>(x));
    if (x == back.second || parent[x] == x) break;
  }
  std::reverse(cycle.begin(), cycle.end());
  return cycle;
}

void check_acyclic(const Dag& dag) {
  const std::vector<int> cycle = find_cycle(dag);
  if (cycle.empty()) return;
  // One entry per instruction the cycle passes through (its first op on the cycle), plus every
  // send: enough to see which instructions wait on each other.
  std::vector<int> shown;
  for (std::size_t i = 0; i < cycle.size(); ++i) {
    const DagOp& op = dag.ops[cycle[i]];
    const DagOp* prev = i ? &dag.ops[cycle[i - 1]] : nullptr;
    if (!prev || op.kind == OpKind::P2P || prev->kind == OpKind::P2P || op.rank != prev->rank ||
        op.instruction != prev->instruction)
      shown.push_back(cycle[i]);
  }
  std::string text = "dependency cycle (the schedule deadlocks): ";
  const std::size_t limit = std::min<std::size_t>(shown.size(), 16);
  for (std::size_t i = 0; i < limit; ++i) {
    const int op = shown[i];
    text += op_name(dag, op) + " [rank " + std::to_string(dag.ops[op].rank) + " instruction " +
            std::to_string(dag.ops[op].instruction) + "] -> ";
  }
  if (limit < shown.size()) text += "... -> ";
  text += op_name(dag, cycle.front());
  throw InputError("schedule", dag.schedule.empty() ? "schedule" : dag.schedule, text);
}

std::vector<int> longest_path(const Dag& dag, const std::vector<double>& weight_s) {
  const int n = dag.size();
  if (n == 0) return {};
  const Graph g = make_graph(dag, &weight_s, true);
  std::vector<double> dist(n + 1);
  std::vector<Vertex> pred(n + 1);
  for (int i = 0; i <= n; ++i) pred[i] = static_cast<Vertex>(i);
  const auto index = get(boost::vertex_index, g);
  boost::dag_shortest_paths(
      g, static_cast<Vertex>(n),
      boost::weight_map(get(boost::edge_bundle, g))
          .distance_map(boost::make_iterator_property_map(dist.begin(), index))
          .predecessor_map(boost::make_iterator_property_map(pred.begin(), index))
          .distance_compare(std::greater<>())
          .distance_inf(-std::numeric_limits<double>::infinity())
          .distance_zero(0.0));
  // The path ends at the op that ends last (start distance + its own weight); ties: lowest index.
  int last = 0;
  double best = -std::numeric_limits<double>::infinity();
  for (int v = 0; v < n; ++v) {
    const double end = dist[v] + weight_s[v];
    if (end > best) {
      best = end;
      last = v;
    }
  }
  std::vector<int> path;
  for (auto v = static_cast<Vertex>(last); v != static_cast<Vertex>(n); v = pred[v]) {
    path.push_back(static_cast<int>(v));
    if (pred[v] == v) break;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace braid
