// CostModel: for every virtual stage (chunk) of a study, the units it runs and, for each unit and
// phase (F, B, W), the compute time on one GPU of the TP group, the collectives it needs (each on
// its process group: tp, cp, ep, dp), its FLOPs and the activation bytes it allocates and frees.
// A layer is data: its units in forward order and the two halves braided blocks pair; the
// lowering reads that description and knows no layer kind by name. Also parameter counts, static
// memory and model FLOPs. Built from a Study + Profile (roofline, or measured tables where the
// profile has them) or from uniform symbolic costs for theory checks. It knows nothing of
// schedules: the placement of chunks on ranks comes from the caller.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <boost/container/static_vector.hpp>

#include "braid/config.hpp"
#include "braid/profile.hpp"
#include "braid/rank_layout.hpp"

namespace braid {

// The units a layer is made of (DESIGN §2: the dense layer's four), then the non-layer units. A
// name, not a rule: what a unit costs and where its collectives run is in its UnitCost.
enum class UnitKind : std::uint8_t {
  PreAttn,
  Attn,
  PreMLP,
  MLP,
  Embedding,     // token embedding (first virtual stage)
  Head,          // final norm + LM head + loss (last virtual stage)
  VisionPatch,   // ViT patch embedding
  VisionMerger,  // ViT 2x2 merger into the LM width
  // The MoE layer's units after its attention half (DESIGN §4b): the router's GEMM and top-k,
  // the dispatch all-to-all with its permute, the experts' grouped GEMM, the combine all-to-all
  // with its unpermute.
  Router,
  Dispatch,
  Experts,
  Combine,
};
enum class Phase : std::uint8_t { F = 0, B = 1, W = 2 };
// Where a collective runs against its unit's compute: after it (it reduces the unit's output),
// before it (it gathers the unit's input, sequence parallelism), or inside it, overlapped with
// the compute in steps (Collective::steps) as a context-parallel KV ring or Transformer Engine's
// ring-exchange all-gather is: the compute runs in `steps` pieces and the collective in
// steps - 1 transfers; transfer j starts once transfer j - 1 and piece j - 1 are done (the next
// chunk arrives while the current one computes, into the buffer the piece before freed), piece
// j + 1 waits for transfer j; the unit's output is the last piece (InsideOrder::Ring; the
// pipelined reduce-scatter sends what each piece wrote instead: InsideOrder::Pipeline).
enum class CollectivePosition : std::uint8_t { After, Before, Inside };
// How an Inside collective's transfers sit against the compute's pieces.
// Ring: steps - 1 transfers, transfer j brings what piece j + 1 reads (a CP KV ring, Transformer
// Engine's ring-exchange all-gather). Pipeline: steps transfers, transfer j sends what piece j
// wrote and starts once piece j and transfer j - 1 are done; the compute after the pieces'
// segment waits for the last transfer, and the pieces do not wait for any (TE's pipelined
// reduce-scatter, comm_gemm_overlap.cpp CommOverlapBase::split_overlap_rs: each GEMM chunk
// writes its own buffer slot).
enum class InsideOrder : std::uint8_t { Ring, Pipeline };

const char* name(UnitKind k);
const char* name(Phase p);
const char* name(CollectivePosition p);  // "after", "before", "inside"

struct Collective {
  CollectiveKind kind = CollectiveKind::AllReduce;
  Group group = Group::Tp;  // the process group it runs over: its stream and its exposure
  CollectivePosition position = CollectivePosition::After;
  // Megatron runs it synchronously on the compute stream, after the kernels before it (under SP
  // the all-gather of a row-parallel layer's output gradient, mappings.py; Transformer Engine's
  // CP exchanges before and after the attention, context_parallel.py): in a plain backward it
  // starts when the rank's previous compute op ends, is never issued ahead of its unit and, after
  // its unit, holds the rank's next compute op.
  bool from_compute = false;
  Source source = Source::SpecDerived;
  int steps = 1;      // Inside: the pieces the compute runs in (>= 2); 1 otherwise
  double bytes = 0;   // payload per rank, as nccl-tests counts it (all steps together)
  double time_s = 0;  // alone on the link, no contention (all steps together)
  // Inside: the part of the compute its pieces cover, as shares of the phase's time_s
  // [segment_begin, segment_end). What comes before runs as one op ahead of the pieces, what
  // comes after as one op behind them: Transformer Engine's ring exchange overlaps the GEMM, not
  // the norm before it or the kernels after it. The whole compute by default (the CP ring).
  double segment_begin = 0, segment_end = 1;
  // Its transfers run on the copy engines (TE's userbuffers with use_ce, cudaMemcpyAsync between
  // peers): they take no SMs, so the compute beside them is not slowed (simulator contention).
  bool copy_engine = false;
  // Inside: how its transfers sit against the pieces (InsideOrder).
  InsideOrder order = InsideOrder::Ring;
  // After a backward's compute: Transformer Engine's bulk overlap (comm_gemm_overlap.cpp,
  // CommOverlapBase::bulk_overlap). When the unit's W runs right after its B (a full backward),
  // the collective runs on the userbuffers lane beside that W, whose GEMM runs compute_slowdown
  // times slower; with the W split off (TE refuses bulk overlap with a delayed wgrad) it is the
  // plain collective.
  bool bulk = false;
  // Inside (the pieces) or bulk (the W beside it): the GEMM runs this many times slower, on the
  // SMs the collective's kernels leave (TE's userbuffers kernels hold num_sm SMs and launch the
  // GEMM on the rest, CommOverlapCore::initialize's _math_sms). Charged on the compute, so the
  // simulator leaves these transfers out of its contention model (as it does copy-engine ones).
  // 1: none.
  double compute_slowdown = 1;
};

// The transfers an Inside collective runs in: steps - 1 in a ring, steps in a pipeline.
inline int inside_transfers(const Collective& c) {
  return c.order == InsideOrder::Pipeline ? c.steps : c.steps - 1;
}

// The collectives of one unit and phase, in the order they run: those before the compute in list
// order, then the compute with those inside it, then those after it in list order (each after the
// one before: the data flows through them).
inline constexpr std::size_t kMaxCollectivesPerPhase = 4;
using Collectives = boost::container::static_vector<Collective, kMaxCollectivesPerPhase>;

struct PhaseCost {
  double time_s = 0;    // compute time alone on one GPU of the TP group
  double flops = 0;     // model FLOPs on one GPU (no recompute)
  double hw_flops = 0;  // hardware FLOPs (with recompute) on one GPU
  Collectives collectives;
  double alloc_bytes = 0;  // activation bytes allocated when the op starts
  double free_bytes = 0;   // activation bytes freed when the op ends
  Source source = Source::SpecDerived;
  // Time of its collectives, each alone on its link.
  double collective_s() const;
  // The pieces its compute runs in: the steps of its Inside collectives (which must agree, with
  // their segment), else 1.
  int compute_steps() const;
  // Its compute ops: the pieces, plus one op before and one after the segment they cover when
  // that segment is not the whole compute.
  int compute_ops() const;
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
  // Its W runs in the pipeline flush, after the rank's last backward, for the microbatches
  // CostModel::flushes_w names (Megatron's defer_embedding_wgrad_compute on the LM head); false:
  // with its B, or where the schedule puts W.
  bool w_in_flush = false;
  // It runs beside an EP all-to-all, off the pass's data flow (Megatron-Core's shared experts
  // under --moe-shared-expert-overlap, docs/moe.md): in F and B it starts after the compute of
  // the flowing unit before it, whose collectives after it the compute stream then does not wait
  // for, and leaves the pass cursor where that unit put it (the all-to-all's end); the next
  // flowing unit's compute waits for it too. Its W runs as any unit's.
  bool beside_all_to_all = false;
  const PhaseCost& operator[](Phase p) const { return phase[static_cast<int>(p)]; }
  PhaseCost& operator[](Phase p) { return phase[static_cast<int>(p)]; }
};

// One layer as a layer kind describes it: its units in forward order, and where its second half
// begins. Braided blocks pair the halves of two layers (DESIGN §2: the attention half of one
// microbatch's forward beside the MLP half of another's backward); a dense layer is PreAttn, Attn
// | PreMLP, MLP.
struct LayerCost {
  std::vector<UnitCost> units;
  int half = 0;  // units [0, half) are the first half, [half, size) the second
  // An MoE layer's all-to-all cut points (DESIGN §4b), 0 for a layer without them: the unit whose
  // forward ends in the dispatch all-to-all and the unit whose forward begins with the combine
  // all-to-all. An FB block whose two layers both have them runs each as three parts, [0,
  // dispatch], (dispatch, combine) and [combine, size), so that the partner's compute runs between
  // each all-to-all and the unit that waits for it (ChunkCost::to_dispatch).
  int dispatch = 0, combine = 0;
};

// Where one layer's units sit in its chunk's layer_units.
struct LayerSpan {
  int first = 0;  // index in ChunkCost::layer_units
  int units = 0;
  int half = 0;                   // units [first, first + half) are the first half
  int dispatch = 0, combine = 0;  // LayerCost::dispatch and combine
};

// One bucket of a chunk's gradient buffer (Megatron-Core param_and_grad_buffer.py): the
// parameters whose gradients it holds, the unit whose weight gradient completes it, and its
// data-parallel collectives, alone on the links the DP group spans.
struct GradBucket {
  double params = 0;
  // Index in the chunk's unit order (prologue, layer units, epilogue): the bucket is complete when
  // this unit's W of the chunk's last microbatch is done (units above it in the order run their
  // backward first).
  int ready_unit = 0;
  CollectiveKind reduce =
      CollectiveKind::AllReduce;  // ReduceScatter with the distributed optimizer
  double reduce_bytes = 0, reduce_s = 0;
  double gather_bytes = 0, gather_s = 0;  // parameter all-gather (distributed optimizer), else 0
};

// Static memory of a chunk on one GPU by part (weights + gradients + optimizer state).
struct StaticParts {
  double layers_bytes = 0;      // transformer layers (the LM's and a ViT's)
  double embeddings_bytes = 0;  // token (and position) embedding, LM head weight
  double other_bytes = 0;       // final norm, ViT patch embedding and merger
};

// One virtual stage: non-layer units before the layers, the layers, non-layer units after. Its
// unit order (the forward's) is prologue, layer_units, epilogue.
struct ChunkCost {
  int virtual_stage = 0;
  std::vector<UnitCost> prologue;     // embedding, ViT patch embedding (and a folded ViT's layers)
  std::vector<UnitCost> layer_units;  // the layers' units, layer after layer (add_layer)
  std::vector<LayerSpan> layers;      // each layer's units in layer_units
  std::vector<UnitCost> epilogue;     // ViT merger, LM head + loss
  double params = 0;                  // parameters held by one GPU of the TP group
  double static_bytes = 0;            // weights + grads + optimizer state on one GPU
  double activation_bytes = 0;        // M_a: bytes one microbatch's forward saves on this chunk
  double output_bytes = 0;            // activation sent to the next virtual stage, per GPU
  StaticParts parts;                  // static_bytes by part
  bool embeds = false;                // holds the token embedding
  // The last stage's copy of a tied embedding (in parts.embeddings_bytes); a rank that also holds
  // the embedding keeps one copy (Megatron shares the weight when both live on one rank).
  double tied_copy_bytes = 0;
  std::vector<GradBucket> grad_buckets;  // in the order the backward completes them
  // Optimizer step of this chunk's shard: Adam, gradient norm, gradient zeroing (memory-bound).
  double optimizer_s = 0;

  int layer_count() const { return static_cast<int>(layers.size()); }
  // Layer l's units in forward order, and its two halves.
  std::span<const UnitCost> layer(int l) const;
  std::span<UnitCost> layer(int l);
  std::span<const UnitCost> first_half(int l) const;
  std::span<const UnitCost> second_half(int l) const;
  // An MoE layer's three parts around its all-to-alls (LayerCost::dispatch): the units up to and
  // with the dispatch, the units between the dispatch and the combine (the experts), the units
  // from the combine on. has_all_to_all_cuts: whether layer l has them.
  bool has_all_to_all_cuts(int l) const;
  std::span<const UnitCost> to_dispatch(int l) const;
  std::span<const UnitCost> between_all_to_alls(int l) const;
  std::span<const UnitCost> from_combine(int l) const;
  // Appends a layer's units and its span.
  void add_layer(const LayerCost& layer);
  // Units in the chunk's order, prologue + layer units + epilogue.
  int unit_count() const {
    return static_cast<int>(prologue.size() + layer_units.size() + epilogue.size());
  }
};

// Calls f(unit) for every unit of the chunk in its order: prologue, layer units, epilogue.
template <typename Chunk, typename F>
requires std::is_same_v<std::remove_const_t<Chunk>, ChunkCost>
void for_each_unit(Chunk& chunk, F&& f) {
  for (auto& u : chunk.prologue) f(u);
  for (auto& u : chunk.layer_units) f(u);
  for (auto& u : chunk.epilogue) f(u);
}

// An MoE study's routing as the cost model applies it (docs/moe.md, "Load imbalance and
// capacity"): the busiest EP rank's tokens relative to balanced, and the shares of the routed
// top-k choices that capacity drops and that padding adds.
struct MoeLoadReport {
  std::string routing;  // name(MoeRouting)
  double busiest_rank_factor = 1;
  int busiest_rank = 0;
  double dropped_fraction = 0, padded_fraction = 0;
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
  bool uniform = false;  // built by uniform_cost_model (theory mode)
  // The step after the last backward (DESIGN §4): data-parallel gradient sync, tied-embedding
  // gradient all-reduce, optimizer step.
  int dp = 1;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  // All-reduce of the tied embedding's gradient between the first and the last stage (when they
  // sit on different ranks), alone on its link; 0 when the embedding is not tied.
  double embedding_sync_bytes = 0, embedding_sync_s = 0;
  // Activations between pipeline ranks: Megatron's scatter/gather (no SP, tp > 1): 1/tp of the
  // tensor crosses the link and an all-gather over NVLink (gather_s per byte sent whole) rebuilds
  // it on the receiver.
  bool p2p_scatter_gather = false;
  // Sends between pipeline ranks as Megatron's batched isend/irecv (P2pMode::Batched under
  // P2pMode::Auto); false: the older blocking model (P2pMode::Blocking).
  bool p2p_batched = true;
  // Megatron's overlap_p2p_comm for its interleaved schedule (TrainingConfig::overlap_p2p_comm).
  bool overlap_p2p_comm = true;
  // Megatron's wgrad_deferral_limit: the first this many microbatches defer the W of a unit with
  // w_in_flush (0: every microbatch).
  int wgrad_deferral_limit = 0;
  double gather_latency_s = 0, gather_Bps = 0;  // the TP group's all-gather (NVLink)
  Recompute recompute = Recompute::None;        // Full: layer units carry a `recompute` forward
  // An MoE study whose routing is not balanced or whose experts have a capacity (none else).
  std::optional<MoeLoadReport> moe_load;

  // Whether microbatch `mb`'s W of `unit` waits for the pipeline flush (UnitCost::w_in_flush).
  bool flushes_w(const UnitCost& unit, int mb) const {
    return unit.w_in_flush && (wgrad_deferral_limit == 0 || mb < wgrad_deferral_limit);
  }
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
  // Mixture-of-Experts models (0 for dense ones): one MoE layer (attention, norms, router, every
  // routed and shared expert), and the parameters one token passes through (total less the
  // routed experts it is not sent to: experts - top_k of them in every MoE layer).
  double per_moe_layer = 0;
  double active = 0;
};
// `per_layer` is a dense layer's count (`ffn` wide), `layers` sums dense and MoE layers.
ParameterCount count_parameters(const ModelConfig& model);

// Time of one collective of `bytes` (payload per rank, as nccl-tests counts it: the full buffer of
// an all-reduce, the gathered output of an all-gather, the input of a reduce-scatter) among
// `ranks` GPUs on `link`, alone on the link. Rows for the collective (measured or published) take
// precedence: those of the group size interpolated log-log in bytes, or, for a group size without
// rows, those of the nearest listed group size at the same bus bandwidth (measured.hpp:
// comm_rows_time). Otherwise latency + bus_factor * bytes / bus bandwidth (profile.hpp: 2(n-1)/n
// for all-reduce, (n-1)/n for all-gather / reduce-scatter). 0 for a group of one.
double collective_time_s(const LinkProfile& link, CollectiveKind kind, int ranks, double bytes);
// Whether rows of `link` answer for `kind` (collective_time_s then uses them: the collective's
// Source is Measured, or Published for a link's published rows). `ranks` > 1.
bool has_measured_rows(const LinkProfile& link, CollectiveKind kind, int ranks);

// Time of a data-parallel collective of `bytes` (nccl-tests convention) over the DP group of a
// study: NVLink when the group sits inside a node, else the inter-node network, whose NIC
// bandwidth is shared by the `nic_users` GPUs of the node that sync at the same time
// (docs/cost-model.md). `group` is the collective's size (dp x cp, or 2 for the tied-embedding
// all-reduce) and `members_per_node` how many of its members share a node (the rank layout's).
// 0 for a group of one.
double dp_collective_time_s(const Study& study, const Profile& profile, CollectiveKind kind,
                            int group, int members_per_node, int nic_users, double bytes);

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

// `braid info`'s views of a cost model: a fixed-width text table and a JSON document (fields in
// docs/cost-model.md): parameter counts, FLOPs, per-chunk memory, per-stage work and the cost of
// every distinct unit; an MoE model's experts, router and active parameters besides.
// Deterministic text.
std::string cost_model_table(const Study& study, const Profile& profile, const CostModel& cost,
                             const ParameterCount& params);
std::string cost_model_json(const Study& study, const Profile& profile, const CostModel& cost,
                            const ParameterCount& params);

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

// Static memory (weights + gradients + optimizer state) of one GPU of a rank holding the chunks
// `virtual_stages`, by part, without the profile's fixed overhead. A rank holding both the token
// embedding and the last stage's copy of a tied embedding keeps one copy (Megatron shares the
// weight when both live on one rank). The one rule for a rank's static memory: the report's
// static_gib and the explorer's check against the memory cap both read it.
StaticParts rank_static_parts(const CostModel& cost, std::span<const int> virtual_stages);
inline double total(const StaticParts& p) {
  return p.layers_bytes + p.embeddings_bytes + p.other_bytes;
}
// The one reader of --unit-costs (simulate, design, theory): "tf,tb,tw,tar[,ma]", 4 or 5 finite
// numbers separated by single commas, no trailing comma (tf > 0, ma > 0, the others >= 0; ma
// defaults to 1). Throws InputError naming `option` and what is allowed.
UniformCosts parse_unit_costs(std::string_view text, const std::string& option = "--unit-costs");

}  // namespace braid
