// ZB-H1 (zero-bubble paper, arXiv 2401.10241, "ZB-H1"; PyTorch's looped zero-bubble order with one
// stage per rank): 1F1B with the backward split into B (input gradient) and W (weight gradient).
// Rank r keeps its first r weight gradients back and runs them, oldest first, after its last B —
// the drain bubble that grows with r — so the in-flight activations stay those of 1F1B.
#include "builder.hpp"

namespace braid::detail {

Schedule make_zb_h1(const ScheduleOptions& options) { return one_f_one_b(options, "zb-h1", true); }

}  // namespace braid::detail
