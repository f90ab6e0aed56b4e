// The layer shapes of a model (LM and ViT) as the cost builder and the parameter counter see them.
// Private to src/cost.
#pragma once

#include "braid/config.hpp"
#include "units.hpp"

namespace braid::detail {

// One LM layer for a microbatch of `samples` sequences of `seq` tokens, each split over `cp`
// GPUs (context parallelism).
LayerShape lm_layer_shape(const ModelConfig& m, double samples, double seq, int cp = 1);
// One ViT layer for a microbatch of `samples` images (attention within each image).
LayerShape vision_layer_shape(const VisionConfig& v, double samples);
double vision_patches_per_sample(const VisionConfig& v);  // tokens_per_sample x merge^2
double vision_patch_inputs(const VisionConfig& v);        // channels x temporal x patch^2
// Parameters of the whole ViT (patch embedding, blocks, merger) on one GPU of a TP group.
double vision_params_per_gpu(const VisionConfig& v, double lm_hidden, int tp);

}  // namespace braid::detail
