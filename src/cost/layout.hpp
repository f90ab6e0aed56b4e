// Layer layout: how many layers of the combined sequence (the ViT's layers first, then the LM's)
// each virtual stage holds — an explicit list (validated), the contiguous split that minimises
// the slowest virtual stage (exact dynamic programme over split points), or uniform. Private to
// src/cost; the rules are in docs/multimodal.md.
#pragma once

#include <vector>

#include "braid/cost_model.hpp"

namespace braid::detail {

// What a stage costs, per microbatch, for the layout: per-layer and per-non-layer-unit times
// (F + B + W compute and collectives, unit_time_s).
struct LayoutCosts {
  int vision_layers = 0;     // D: ViT depth (0 for a text model)
  int lm_layers = 0;         // L
  bool first_stage = false;  // the ViT folded into virtual stage 0
  double vision_layer_s = 0, lm_layer_s = 0;
  double patch_s = 0, merger_s = 0, embedding_s = 0, head_s = 0;
};

// F + B + W compute plus the TP collectives of one unit, alone.
double unit_time_s(const UnitCost& u);

// Layers per virtual stage over the combined sequence (size `stages`, sum D + L). Throws
// InputError naming `where` and the layout field when the split is impossible.
std::vector<int> split_layers(const Study& study, int stages, const LayerSplit& split,
                              const LayoutCosts& costs);

// Time of the stage holding combined layers [a, b) of n, per LayoutCosts.
double range_time_s(const LayoutCosts& c, int a, int b);

}  // namespace braid::detail
