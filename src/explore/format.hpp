// Text helpers shared by the explorer's renderings (sweep table, search text, SVG). Internal.
#pragma once

#include <string>
#include <vector>

#include "braid/explore.hpp"

namespace braid::explore {

std::string fmt(const char* format, double v);
// A rate as a percentage with `digits` decimals; rounding noise below zero prints as 0.
std::string percent(double rate, int digits = 2);
// "stp tp 8 pp 2 vpp 2 seq 6144 mbs 1 m 64 sp off recompute none"
std::string describe(const Configuration& c);
// The columns of one evaluated layout in the sweep and search tables (schedule .. margin GiB),
// the margin against a cap of `cap_gib` for model state + activations.
const std::vector<std::string>& layout_header();
std::vector<std::string> layout_cells(const Evaluation& e, double cap_gib);
// Rows of cells -> aligned text; the first column left-aligned, the rest right-aligned.
std::string text_table(const std::vector<std::vector<std::string>>& rows);

}  // namespace braid::explore
