// The Megatron-LM flags that carry one setting of a study each way, in one list: megatron_args.cpp
// reads them into StudyOverrides (or the model), launch_args.cpp writes them from a Study. A flag
// with a rule of its own (defaults derived from other flags, several flags for one setting) is
// written out in both files; the round trip test (tests/launch_args_test.cpp) holds them together.
#pragma once

#include <optional>

#include "braid/config.hpp"

namespace braid::detail {

// A positive integer of the model: --num-layers N sets ModelConfig::*field.
struct MegatronModelSize {
  const char* flag;
  int ModelConfig::*field;
};
inline constexpr MegatronModelSize kMegatronModelSizes[] = {
    {"--num-layers", &ModelConfig::layers},
    {"--hidden-size", &ModelConfig::hidden},
    {"--num-attention-heads", &ModelConfig::heads},
};

// A switch of the model: the flag given sets the field to `given`, its absence to !given.
struct MegatronModelSwitch {
  const char* flag;
  bool ModelConfig::*field;
  bool given;
};
inline constexpr MegatronModelSwitch kMegatronModelSwitches[] = {
    {"--untie-embeddings-and-output-weights", &ModelConfig::tied_embeddings, false},
    {"--add-qkv-bias", &ModelConfig::qkv_bias, true},
};

// A positive integer of the layout or the training: the override it sets, the study value it is.
struct MegatronSize {
  const char* flag;
  std::optional<int> StudyOverrides::*override;
  int (*of)(const Study&);
};
inline constexpr MegatronSize kMegatronSizes[] = {
    {"--tensor-model-parallel-size", &StudyOverrides::tp,
     [](const Study& s) { return s.parallel.tp; }},
    {"--pipeline-model-parallel-size", &StudyOverrides::pp,
     [](const Study& s) { return s.parallel.pp; }},
    {"--context-parallel-size", &StudyOverrides::cp, [](const Study& s) { return s.parallel.cp; }},
    {"--seq-length", &StudyOverrides::seq, [](const Study& s) { return s.training.seq; }},
    {"--micro-batch-size", &StudyOverrides::mbs,
     [](const Study& s) { return s.training.micro_batch_size; }},
};

// A switch: the flag given sets the setting to `given`, its absence leaves Megatron's default
// (!given, as in braid's study); written back when the study's value is `given`.
struct MegatronSwitch {
  const char* flag;
  std::optional<bool> StudyOverrides::*override;
  bool (*of)(const Study&);
  bool given = true;
};
inline constexpr MegatronSwitch kMegatronSwitches[] = {
    {"--sequence-parallel", &StudyOverrides::sequence_parallel,
     [](const Study& s) { return s.parallel.sequence_parallel; }},
    {"--use-distributed-optimizer", &StudyOverrides::distributed_optimizer,
     [](const Study& s) { return s.training.distributed_optimizer; }},
    {"--overlap-grad-reduce", &StudyOverrides::overlap_grad_reduce,
     [](const Study& s) { return s.training.overlap_grad_reduce; }},
    {"--overlap-param-gather", &StudyOverrides::overlap_param_gather,
     [](const Study& s) { return s.training.overlap_param_gather; }},
    {"--tp-comm-overlap", &StudyOverrides::tp_comm_overlap,
     [](const Study& s) { return s.training.tp_comm_overlap; }},
    {"--moe-shared-expert-overlap", &StudyOverrides::moe_shared_expert_overlap,
     [](const Study& s) { return s.training.moe_shared_expert_overlap; }},
    {"--fp8-param-gather", &StudyOverrides::fp8_param_gather,
     [](const Study& s) { return s.training.fp8_param_gather; }},
    {"--no-gradient-accumulation-fusion", &StudyOverrides::gradient_accumulation_fusion,
     [](const Study& s) { return s.training.gradient_accumulation_fusion; }, false},
    // Megatron uses it with a virtual pipeline size only (arguments.py turns it off otherwise),
    // as braid does.
    {"--no-overlap-p2p-communication", &StudyOverrides::overlap_p2p_comm,
     [](const Study& s) { return s.training.overlap_p2p_comm; }, false},
    {"--defer-embedding-wgrad-compute", &StudyOverrides::defer_embedding_wgrad_compute,
     [](const Study& s) { return s.training.defer_embedding_wgrad_compute; }},
};

}  // namespace braid::detail
