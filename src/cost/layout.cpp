// Layer layout (layout.hpp). Rules, with D ViT layers and L LM layers in one sequence (ViT first):
//   - every virtual stage holds at least one layer of the sequence;
//   - separate placement (default): no stage mixes ViT and LM layers (a stage boundary falls at
//     D); uniform puts the whole ViT alone on virtual stage 0 and splits the LM evenly over the
//     rest (earlier stages take the remainder);
//   - first-stage placement: virtual stage 0 holds the whole ViT plus zero or more LM layers;
//     uniform splits the LM evenly over all stages and adds the ViT to stage 0;
//   - balance cost: among the splits these rules allow, the one whose slowest stage (range_time_s)
//     is fastest, found exactly by dynamic programming over the split points (O(S N^2)); among
//     those, the one with the least sum of squared stage times (a second exact pass), ties to
//     earlier boundaries. Uniform is one of the allowed splits, so the result is never slower
//     than it.
#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include "braid/error.hpp"
#include "layout.hpp"

namespace braid::detail {

double unit_time_s(const UnitCost& u) {
  double t = 0;
  for (const PhaseCost& p : u.phase) t += p.time_s + p.collective_s();
  return t;
}

double range_time_s(const LayoutCosts& c, int a, int b) {
  const int D = c.vision_layers, N = c.vision_layers + c.lm_layers;
  const int va = std::min(a, D), vb = std::min(b, D);
  double t = (vb - va) * c.vision_layer_s + ((b - a) - (vb - va)) * c.lm_layer_s;
  if (D > 0 && a == 0) t += c.patch_s;
  if (D > 0 && a <= D - 1 && D - 1 < b) t += c.merger_s;
  // The embedding joins the text tokens to the image tokens: on stage 0 for a text model or a
  // folded ViT, else on the first LM stage.
  if ((D == 0 || c.first_stage) ? a == 0 : (a <= D && D < b)) t += c.embedding_s;
  if (b == N) t += c.head_s;
  return t;
}

namespace {

std::string text(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

// Whether the stage [a, b) is allowed as stage `k` (the caller guarantees a < b).
bool allowed(const LayoutCosts& c, int k, int a, int b) {
  const int D = c.vision_layers;
  if (D == 0) return true;
  if (c.first_stage) return k == 0 ? b >= D : a >= D;
  return !(a < D && D < b);
}

}  // namespace

std::vector<int> split_layers(const Study& study, int stages, const LayerSplit& split,
                              const LayoutCosts& c) {
  const std::string where = study.file;
  const int D = c.vision_layers, L = c.lm_layers, N = D + L;
  const std::string model = study.model.name;
  if (stages <= 0)
    throw InputError(where, "virtual_stages", "must be 1 or more, got " + std::to_string(stages));
  const std::vector<int>& explicit_list =
      split.layers_per_stage.empty() ? study.layout.layers_per_stage : split.layers_per_stage;
  const std::string vit = D > 0 ? " (" + std::to_string(D) + " ViT + " + std::to_string(L) +
                                      " LM layers, the ViT's first)"
                                : "";
  if (!explicit_list.empty()) {
    const char* field = "layout.layers_per_stage";
    if (static_cast<int>(explicit_list.size()) != stages)
      throw InputError(where, field,
                       "has " + std::to_string(explicit_list.size()) + " entries (" +
                           text(explicit_list) + "); one per virtual stage (" +
                           std::to_string(stages) + ") is required");
    for (int n : explicit_list)
      if (n < 1)
        throw InputError(where, field,
                         text(explicit_list) + ": every virtual stage needs 1 or more layers");
    const int sum = std::accumulate(explicit_list.begin(), explicit_list.end(), 0);
    if (sum != N)
      throw InputError(where, field,
                       text(explicit_list) + " sums to " + std::to_string(sum) + "; model " +
                           model + " has " + std::to_string(N) + " layers" + vit);
    int a = 0;
    for (int k = 0; k < stages; ++k) {
      const int b = a + explicit_list[k];
      if (!allowed(c, k, a, b))
        throw InputError(
            where, field,
            text(explicit_list) + ": " +
                (c.first_stage
                     ? "with vision_placement first-stage virtual stage 0 must hold "
                       "all " +
                           std::to_string(D) + " ViT layers (entry 0 >= " + std::to_string(D) + ")"
                     : "with vision_placement separate no virtual stage may mix ViT "
                       "and LM layers (the first entries must add up to the ViT's " +
                           std::to_string(D) + " layers)"));
      a = b;
    }
    return explicit_list;
  }
  // Stages the layout needs at least: one per layer, and a separate ViT takes one of its own.
  const int lm_stages = (D > 0 && !c.first_stage) ? stages - 1 : stages;
  if (lm_stages < 1)
    throw InputError(where, "layout.vision_placement",
                     "separate needs 2 or more virtual stages (the ViT's and the LM's); model " +
                         model + " runs on " + std::to_string(stages) +
                         "; allowed with 1: first-stage");
  if (L < lm_stages)
    throw InputError(
        where, "parallel.pp",
        "model " + model + " has " + std::to_string(L) + " LM layers, fewer than the " +
            std::to_string(lm_stages) + " virtual stages that hold them" +
            (lm_stages != stages
                 ? " (the ViT has one of the " + std::to_string(stages) + " of its own)"
                 : "") +
            "; each virtual stage needs at least one layer");
  std::vector<int> out;
  if (study.layout.balance == StageBalance::Uniform) {
    std::vector<int> lm(lm_stages, L / lm_stages);
    for (int v = 0; v < L % lm_stages; ++v) ++lm[v];
    if (D > 0 && !c.first_stage) out.push_back(D);
    out.insert(out.end(), lm.begin(), lm.end());
    if (D > 0 && c.first_stage) out[0] += D;
    return out;
  }
  // Balance by cost, two exact passes over the split points. 1: best[k][j] = the smallest
  // possible slowest stage when stages 0..k-1 hold layers [0, j). 2: among the splits whose every
  // stage is within that optimum, the one with the least sum of squared stage times (the
  // minimax alone has many optima when one stage, such as a folded ViT, dominates; this picks
  // the evenest of them).
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(N + 1, kInf));
  best[0][0] = 0;
  for (int k = 1; k <= stages; ++k)
    for (int j = k; j <= N - (stages - k); ++j)
      for (int i = k - 1; i < j; ++i) {
        if (best[k - 1][i] == kInf || !allowed(c, k - 1, i, j)) continue;
        best[k][j] = std::min(best[k][j], std::max(best[k - 1][i], range_time_s(c, i, j)));
      }
  const double optimum = best[stages][N];
  if (optimum == kInf)
    throw InputError(where, "layout.balance",
                     "no split of model " + model + "'s " + std::to_string(N) + " layers" + vit +
                         " over " + std::to_string(stages) + " virtual stages fits the placement");
  const double limit = optimum * (1 + 1e-12);
  std::vector<std::vector<double>> squares(stages + 1, std::vector<double>(N + 1, kInf));
  std::vector<std::vector<int>> from(stages + 1, std::vector<int>(N + 1, -1));
  squares[0][0] = 0;
  for (int k = 1; k <= stages; ++k)
    for (int j = k; j <= N - (stages - k); ++j)
      for (int i = k - 1; i < j; ++i) {
        if (squares[k - 1][i] == kInf || !allowed(c, k - 1, i, j)) continue;
        const double t = range_time_s(c, i, j);
        if (t > limit) continue;
        if (squares[k - 1][i] + t * t < squares[k][j]) {
          squares[k][j] = squares[k - 1][i] + t * t;
          from[k][j] = i;
        }
      }
  out.assign(stages, 0);
  for (int k = stages, j = N; k > 0; --k) {
    const int i = from[k][j];
    out[k - 1] = j - i;
    j = i;
  }
  return out;
}

}  // namespace braid::detail
