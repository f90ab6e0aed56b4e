// Data-parallel helpers of the cost builder: where a DP group's members sit, the gradient
// buckets of a chunk, the bytes its optimizer step moves. Private to src/cost.
#pragma once

#include <utility>
#include <vector>

#include "braid/cost_model.hpp"

namespace braid::detail {

// Buckets of a chunk whose units (index in the chunk's unit order, parameters on one GPU) are
// `unit_params`, in forward order; `bucketed`: split at the bucket size (else one bucket).
// `group`: the data-parallel group they are reduced over (dp x cp; edp for the experts').
// `fp8_params`: of each entry's parameters, the FP8 ones (training.fp8_param_gather: the linear
// weights, gathered in 1 byte); empty or zeros otherwise.
std::vector<GradBucket> grad_buckets(const Study& study, const Profile& profile,
                                     const std::vector<std::pair<int, double>>& unit_params,
                                     bool bucketed, Group group = Group::DpCp,
                                     const std::vector<double>& fp8_params = {});
// HBM bytes of the optimizer step over `params` (one GPU's parameters of a chunk).
double optimizer_bytes(const TrainingConfig& tr, double params, int dp);

}  // namespace braid::detail
