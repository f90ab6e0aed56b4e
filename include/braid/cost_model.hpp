// CostModel: for every virtual stage (chunk) of a study, the units it runs and, for each unit and
// phase (F, B, W), the compute time on one GPU of the TP group, the TP collective it needs, its
// FLOPs and the activation bytes it allocates and frees. Also parameter counts, static memory and
// model FLOPs. Built from a Study + Profile (roofline, or measured tables where the profile has
// them) or from uniform symbolic costs for theory checks. It knows nothing of schedules: the
// placement of chunks on ranks comes from the caller.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/config.hpp"
#include "braid/profile.hpp"

namespace braid {

// The four units of a transformer layer (DESIGN §2), then the non-layer units.
enum class UnitKind : std::uint8_t {
  PreAttn,
  Attn,
  PreMLP,
  MLP,
  Embedding,     // token embedding (first virtual stage)
  Head,          // final norm + LM head + loss (last virtual stage)
  VisionPatch,   // ViT patch embedding
  VisionMerger,  // ViT 2x2 merger into the LM width
};
enum class Phase : std::uint8_t { F = 0, B = 1, W = 2 };
enum class CollectiveKind : std::uint8_t { None, AllReduce, AllGather, ReduceScatter };
// A collective runs after the unit's compute (it reduces the unit's output) or before it (it
// gathers the unit's input, sequence parallelism).
enum class CollectivePosition : std::uint8_t { After, Before };

const char* name(UnitKind k);
const char* name(Phase p);
const char* name(CollectiveKind k);

struct Collective {
  CollectiveKind kind = CollectiveKind::None;
  CollectivePosition position = CollectivePosition::After;
  double bytes = 0;   // payload per rank, as nccl-tests counts it
  double time_s = 0;  // alone on the link, no contention
  Source source = Source::SpecDerived;
};

struct PhaseCost {
  double time_s = 0;       // compute time alone on one GPU of the TP group
  double flops = 0;        // model FLOPs on one GPU (no recompute)
  double hw_flops = 0;     // hardware FLOPs (with recompute) on one GPU
  Collective collective;   // at most one TP collective per unit and phase
  double alloc_bytes = 0;  // activation bytes allocated when the op starts
  double free_bytes = 0;   // activation bytes freed when the op ends
  Source source = Source::SpecDerived;
};

struct UnitCost {
  UnitKind kind = UnitKind::PreAttn;
  int layer = -1;       // global layer index (vision layers are numbered separately); -1 if none
  bool vision = false;  // a ViT layer unit
  std::array<PhaseCost, 3> phase;  // indexed by Phase
  // Full recomputation (training.recompute: full): this unit's forward run again before its
  // layer's backward — time, collective and the activations it saves again (B and W then free
  // them). flops = 0 (not model FLOPs); hw_flops = the forward's. All zero otherwise.
  PhaseCost recompute;
  const PhaseCost& operator[](Phase p) const { return phase[static_cast<int>(p)]; }
  PhaseCost& operator[](Phase p) { return phase[static_cast<int>(p)]; }
};

// One transformer layer: its four units in DESIGN §2 order.
using LayerCost = std::array<UnitCost, 4>;

// One virtual stage: non-layer units before the layers, the layers, non-layer units after.
struct ChunkCost {
  int virtual_stage = 0;
  std::vector<UnitCost> prologue;  // embedding, ViT patch embedding
  std::vector<LayerCost> layers;
  std::vector<UnitCost> epilogue;  // ViT merger, LM head + loss
  double params = 0;               // parameters held by one GPU of the TP group
  double static_bytes = 0;         // weights + grads + optimizer state on one GPU
  double activation_bytes = 0;     // M_a: bytes one microbatch's forward saves on this chunk
  double output_bytes = 0;         // activation sent to the next virtual stage, per GPU
};

struct CostModel {
  std::vector<ChunkCost> chunks;  // indexed by virtual stage
  int tp = 1;
  int gpus = 1;           // all GPUs of the job (tp * pp * dp)
  double peak_flops = 0;  // per GPU, dense bf16
  double hbm_bytes = 0;   // device memory per GPU
  double fixed_overhead_bytes = 0;
  Contention contention;
  CopyContention copy_contention;  // D2H against H2D on one GPU (the profile's)
  double model_flops = 0;          // per iteration, whole job, forward + backward, no recompute
  double hardware_flops = 0;       // the same with recompute
  double tokens_per_iteration = 0;
  double samples_per_iteration = 0;
  bool uniform = false;                   // built by uniform_cost_model (theory mode)
  Recompute recompute = Recompute::None;  // Full: layer units carry a `recompute` forward

  // P2P transfer time of `bytes` between pipeline ranks (they may sit on different nodes).
  double p2p_time_s(int from_rank, int to_rank, double bytes) const;
  double d2h_time_s(double bytes) const;
  double h2d_time_s(double bytes) const;

  // Filled by the builders; used by the functions above.
  std::vector<int> node_of_rank;  // node of each pipeline rank's first GPU
  double intra_p2p_Bps = 0, inter_p2p_Bps = 0, p2p_latency_s = 0;
  double d2h_Bps = 0, h2d_Bps = 0;
};

// Parameter counts of a model on one GPU group of size 1 (all weights, biases and norms).
struct ParameterCount {
  double per_layer = 0;      // one LM transformer layer
  double layers = 0;         // all LM layers
  double embedding = 0;      // token embedding (vocab x hidden)
  double head = 0;           // final norm + LM head (the head weight is not counted again if tied)
  double vision = 0;         // ViT: patch embedding + blocks + merger (0 for text models)
  double total = 0;          // everything
  double non_embedding = 0;  // layers + vision: the convention of the STP paper's model names
};
ParameterCount count_parameters(const ModelConfig& model);

// Time of one collective of `bytes` (payload per rank, as nccl-tests counts it: the full buffer of
// an all-reduce, the gathered output of an all-gather, the input of a reduce-scatter) among
// `ranks` GPUs on `link`, alone on the link. A measured table for that collective and group size
// takes precedence (interpolated log-log in bytes); otherwise latency + factor * bytes / bus
// bandwidth with factor 2(n-1)/n for all-reduce and (n-1)/n for all-gather / reduce-scatter.
// 0 for a group of one.
double collective_time_s(const LinkProfile& link, CollectiveKind kind, int ranks, double bytes);

// How layers are assigned to virtual stages.
struct LayerSplit {
  // Empty: the study's layout (study.layout: explicit list, balance by cost, or uniform with the
  // remainder on earlier stages). With a ViT the list counts its layers first, then the LM's.
  std::vector<int> layers_per_stage;
};

// Forward + backward work of one microbatch on one virtual stage: the F, B and W compute of every
// unit and their TP collectives, each alone and added up (no overlap, no contention, no P2P). The
// measure --balance cost minimises the largest of, and what `info` / `simulate` print per stage.
struct StageTime {
  int virtual_stage = 0;
  int vision_layers = 0;  // ViT layers on the stage
  int layers = 0;         // LM layers on the stage
  double compute_s = 0;
  double collective_s = 0;
  double total_s() const { return compute_s + collective_s; }
};
std::vector<StageTime> stage_times(const CostModel& cost);
// A fixed-width table of stage_times with the slowest / mean ratio (for the CLI).
std::string stage_times_table(const std::vector<StageTime>& stages);

// Builds the cost model of `study` on `profile` for `virtual_stages` chunks (pp * chunks per
// rank). Throws InputError when the split is impossible (fewer layers than virtual stages).
CostModel build_cost_model(const Study& study, const Profile& profile, int virtual_stages,
                           const LayerSplit& split = {});

// Uniform symbolic costs (theory mode, DESIGN §4): every chunk is one layer whose four units take
// a quarter of tf, tb, tw; the forward has two collectives of tar/2 (after Attn and MLP), the
// backward two (after PreMLP and PreAttn B); M_a = ma per chunk, freed by B; no P2P time, no
// contention, non-layer units cost nothing.
struct UniformCosts {
  double tf = 1, tb = 1, tw = 1, tar = 0, ma = 1;
};
CostModel uniform_cost_model(const UniformCosts& costs, int virtual_stages);

}  // namespace braid
