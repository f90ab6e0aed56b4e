// Text helpers shared by the explorer's renderings (sweep table, search text, SVG). Internal.
#pragma once

#include <string>
#include <vector>

#include "../util/text_table.hpp"
#include "braid/explore.hpp"

namespace braid::explore {

// "stp tp 8 pp 2 vpp 2 seq 6144 mbs 1 m 64 sp off recompute none"
std::string describe(const Configuration& c);
// The columns of one evaluated layout in the sweep and search tables (schedule .. margin GiB),
// the margin against a cap of `cap_gib` for model state + activations.
const std::vector<std::string>& layout_header();
std::vector<std::string> layout_cells(const Evaluation& e, double cap_gib);
// The shared table renderer and percentage format (src/util/text_table.hpp).
using util::percent;
using util::text_table;

}  // namespace braid::explore
