// Unit costs (units.hpp). Notation, per microbatch on one GPU of the TP group: T tokens, t TP size,
// Ts = T/t with sequence parallelism else T (tokens of the hidden-size tensors a GPU holds), e
// bytes per element, h hidden, q = heads x head_dim, k = kv_heads x head_dim, f ffn. Saved
// activations (F alloc) follow Korthikanti et al. (arXiv 2205.05198): for a GPT layer (GELU 4h,
// MHA, dropout, unfused attention) exactly their 34 sbh + 5 a s^2 b per layer; for Qwen2 the same
// derivation without dropout masks, with FlashAttention (no s^2 score matrix), GQA (K, V of width
// k) and SwiGLU (gate and up saved, FC2 input saved). The backward phase B allocates the output
// gradient its W needs and frees what W does not need; W frees the rest (GEMM inputs + that
// gradient).
#include "units.hpp"

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "braid/error.hpp"

namespace braid::detail {

Source collective_source(const LinkProfile& link, CollectiveKind kind, int ranks) {
  if (!has_measured_rows(link, kind, ranks)) return Source::SpecDerived;
  return link.published ? Source::Published : Source::Measured;
}

void add_group_collective(PhaseCost& p, Group group, int ranks, const LinkProfile& link,
                          CollectiveKind kind, CollectivePosition position, double bytes,
                          bool from_compute) {
  if (ranks <= 1) return;
  Collective c;
  c.kind = kind;
  c.group = group;
  c.position = position;
  c.from_compute = from_compute;
  c.source = collective_source(link, kind, ranks);
  c.bytes = bytes;
  c.time_s = collective_time_s(link, kind, ranks, bytes);
  p.collectives.push_back(c);
}

namespace {

// A collective of the TP group in phase `p`; none for a TP group of one.
void add_tp_collective(PhaseCost& p, const TpSetup& tp, CollectiveKind kind,
                       CollectivePosition position, double bytes, bool from_compute = false) {
  if (tp.tp <= 1) return;  // no link is looked at for a group of one
  add_group_collective(p, Group::Tp, tp.tp, *tp.link, kind, position, bytes, from_compute);
}

// The KV exchanges of context parallelism inside a phase's compute: cp - 1 transfers of
// `step_bytes` to the ring's next GPU, each hidden behind one of the cp steps of the attention
// (lowered as pieces beside the transfers: DagOp Inside). None for a ring of one.
// The ring has `ranks` members: cp, or cp / A under a2a+p2p (its ring over the A-groups).
void add_cp_ring(PhaseCost& p, const TpSetup& tp, int ranks, double step_bytes) {
  if (ranks <= 1) return;
  Collective c;
  c.kind = CollectiveKind::P2P;
  c.group = Group::Cp;
  c.position = CollectivePosition::Inside;
  c.steps = ranks;
  c.source = collective_source(*tp.cp_link, CollectiveKind::P2P, 2);
  c.bytes = (ranks - 1) * step_bytes;
  c.time_s = (ranks - 1) * collective_time_s(*tp.cp_link, CollectiveKind::P2P, 2, step_bytes);
  p.collectives.push_back(c);
}

// A collective of the context-parallel group before or after a phase's compute (the all-gather
// type's exposed KV gather and dKV reduce-scatter). None for a group of one. On the compute path
// (Collective::from_compute): Transformer Engine's gather_along_first_dim and
// reduce_scatter_along_first_dim inside the attention function are synchronous.
void add_cp_collective(PhaseCost& p, const TpSetup& tp, CollectiveKind kind,
                       CollectivePosition position, double bytes) {
  if (tp.cp <= 1) return;
  add_group_collective(p, Group::Cp, tp.cp, *tp.cp_link, kind, position, bytes,
                       /*from_compute=*/true);
}

// An exposed all-to-all of the context-parallel group before or after a phase's compute, one call
// per tensor of `tensors` (each its bytes per rank, the nccl-tests size) as Transformer Engine
// issues them (flash_attn_a2a_communicate in attention/dot_product_attention/context_parallel.py:
// one all_to_all_single per tensor, back to back): one collective of their bytes and the sum of
// their times. The group is the whole cp group (a2a) or a2a+p2p's group of A ranks over its own
// link. None for a group of one. On the compute path (Collective::from_compute): the function
// ends with the compute stream waiting for cp_stream (current_stream().wait_stream), so in a
// backward no weight gradient runs under them: TE's Linear backward computes the out-projection's
// before the attention's backward starts.
void add_cp_all_to_all(PhaseCost& p, const TpSetup& tp, CollectivePosition position,
                       std::initializer_list<double> tensors) {
  const bool hierarchical = tp.cp_comm == CpCommType::A2AP2P;
  const int ranks = hierarchical ? tp.cp_a2a : tp.cp;
  const LinkProfile& link = hierarchical ? *tp.cp_a2a_link : *tp.cp_link;
  if (ranks <= 1) return;
  Collective c;
  c.kind = CollectiveKind::AllToAll;
  c.group = Group::Cp;
  c.position = position;
  c.from_compute = true;
  c.source = collective_source(link, CollectiveKind::AllToAll, ranks);
  for (double bytes : tensors) {
    c.bytes += bytes;
    c.time_s += collective_time_s(link, CollectiveKind::AllToAll, ranks, bytes);
  }
  p.collectives.push_back(c);
}

// What a unit's SP all-gather carries: its bytes (bf16, or Transformer Engine's FP8 data and
// scales, fp8_gather_bytes) and, under current scaling, the TP all-reduce of the tensor's amax the
// quantizer runs first (the whole tensor's amax sets the scale every shard is cast with).
struct SpGather {
  double bytes = 0;
  bool amax = false;
};

// Current scaling's amax all-reduce before an FP8 all-gather under SP (pytorch/module/_common.py
// set_quantizer_amax_reduction_group, set by linear.py and layernorm_linear.py for a column
// layer's input and a row layer's output gradient; csrc/quantizer.cpp
// Float8CurrentScalingQuantizer: one FP32 amax, reduced with MAX over the TP group).
constexpr double kAmaxBytes = 4;

void add_sp_gather(PhaseCost& p, const TpSetup& tp, SpGather gather, bool from_compute) {
  if (gather.amax)
    add_tp_collective(p, tp, CollectiveKind::AllReduce, CollectivePosition::Before, kAmaxBytes,
                      from_compute);
  add_tp_collective(p, tp, CollectiveKind::AllGather, CollectivePosition::Before, gather.bytes,
                    from_compute);
}

// The two collective patterns of DESIGN §2. Column units (PreAttn, PreMLP, LM head): no SP -> B
// All-Reduce of the input gradient; SP -> F All-Gather before, B Reduce-Scatter after. Row units
// (Attn, MLP): no SP -> F All-Reduce of the output; SP -> F Reduce-Scatter after, B All-Gather
// before. `bytes` is the bf16 activation; the all-gather carries `gather`.
void column_collectives(UnitCost& u, const TpSetup& tp, double bytes, SpGather gather) {
  if (tp.sp) {
    add_sp_gather(u[Phase::F], tp, gather, /*from_compute=*/false);
    add_tp_collective(u[Phase::B], tp, CollectiveKind::ReduceScatter, CollectivePosition::After,
                      bytes);
  } else {
    add_tp_collective(u[Phase::B], tp, CollectiveKind::AllReduce, CollectivePosition::After, bytes);
  }
}

void row_collectives(UnitCost& u, const TpSetup& tp, double bytes, SpGather gather) {
  if (tp.sp) {
    add_tp_collective(u[Phase::F], tp, CollectiveKind::ReduceScatter, CollectivePosition::After,
                      bytes);
    // The backward of _ReduceScatterToSequenceParallelRegion (core/tensor_parallel/mappings.py)
    // all-gathers the output gradient synchronously, once the norm and residual backward before
    // it have produced it.
    add_sp_gather(u[Phase::B], tp, gather, /*from_compute=*/true);
  } else {
    add_tp_collective(u[Phase::F], tp, CollectiveKind::AllReduce, CollectivePosition::After, bytes);
  }
}

// A bf16 unit's collectives: its all-gather carries the activation.
void column_collectives(UnitCost& u, const TpSetup& tp, double bytes) {
  column_collectives(u, tp, bytes, {.bytes = bytes});
}
void row_collectives(UnitCost& u, const TpSetup& tp, double bytes) {
  row_collectives(u, tp, bytes, {.bytes = bytes});
}

}  // namespace

// A layer unit's collectives. Under an FP8 recipe Transformer Engine all-gathers the GEMM
// operand it has already quantized: a column layer's input (the norm's FP8 output before QKV and
// FC1: layernorm_linear.py _LayerNormLinear.forward passes input_quantizer, row-wise usage only,
// to gather_along_first_dim or, with TP-communication overlap, to
// fill_userbuffers_buffer_for_all_gather) and a row layer's output gradient (base.py
// grad_output_preprocess, both paths again, with the layouts its dgrad and wgrad read).
void tp_collectives(TpSplit split, UnitCost& u, const TpSetup& tp, double bytes) {
  const double elements = bytes / tp.dtype_bytes;
  const bool amax = tp.precision == Precision::Fp8Current;
  if (split == TpSplit::Column)
    column_collectives(
        u, tp, bytes,
        {.bytes = elements * fp8_gather_bytes(tp.precision, tp.dtype_bytes, 1), .amax = amax});
  else
    row_collectives(
        u, tp, bytes,
        {.bytes = elements * fp8_gather_bytes(tp.precision, tp.dtype_bytes, 2), .amax = amax});
}

namespace {

// Where a phase's TP GEMM sits in its compute: the time before it and its own time.
struct GemmSpan {
  double begin_s = 0, gemm_s = 0;
};

// The phase's TP collective of `kind` at `position` that a userbuffers overlap moves inside the
// GEMM `span`, or end(): none when the phase has no such collective, no time or GEMM, or already
// runs a collective inside (one compute runs one ring or pipeline here).
Collectives::iterator overlappable_tp(PhaseCost& p, CollectiveKind kind,
                                      CollectivePosition position, GemmSpan span) {
  const auto end = p.collectives.end();
  const auto found = std::find_if(p.collectives.begin(), end, [&](const Collective& c) {
    return c.group == Group::Tp && c.kind == kind && c.position == position;
  });
  if (found == end || p.time_s <= 0 || span.gemm_s <= 0) return end;
  if (std::any_of(p.collectives.begin(), end,
                  [](const Collective& c) { return c.position == CollectivePosition::Inside; }))
    return end;
  return found;
}

// Puts `inside` in the phase's compute over the GEMM `span`, in place of `replaced`.
void place_inside(PhaseCost& p, Collective inside, const Collectives::iterator& replaced,
                  GemmSpan span) {
  inside.segment_begin = std::clamp(span.begin_s / p.time_s, 0.0, 1.0);
  inside.segment_end =
      std::clamp((span.begin_s + span.gemm_s) / p.time_s, inside.segment_begin, 1.0);
  p.collectives.erase(replaced);
  p.collectives.push_back(inside);
}

// Transformer Engine's ring-exchange all-gather (comm_gemm_overlap.cpp,
// CommOverlapP2PBase::split_overlap_ag; the default method of qkv_fprop, fc1_fprop, proj_dgrad
// and fc2_dgrad in pytorch/module/base.py initialize_ub): the GEMM runs in tp chunks, chunk 0 on
// the GPU's own shard; while chunk i computes, the shard it read goes to the ring's next GPU, so
// tp - 1 point-to-point transfers of bytes / tp, by the copy engines (use_ce: no SMs). The
// phase's all-gather before its compute becomes this ring inside it. A phase that already runs a
// ring inside (the CP ring of attention's backward) keeps its all-gather before: one compute runs
// one ring here.
void add_tp_ring_gather(PhaseCost& p, const TpSetup& tp, GemmSpan span) {
  const auto gather =
      overlappable_tp(p, CollectiveKind::AllGather, CollectivePosition::Before, span);
  if (gather == p.collectives.end()) return;
  Collective c;
  c.kind = CollectiveKind::P2P;
  c.group = Group::Tp;
  c.position = CollectivePosition::Inside;
  c.steps = tp.tp;
  c.copy_engine = true;
  c.source = collective_source(*tp.link, CollectiveKind::P2P, 2);
  const double chunk_bytes = gather->bytes / tp.tp;
  c.bytes = (tp.tp - 1) * chunk_bytes;
  c.time_s = (tp.tp - 1) * collective_time_s(*tp.link, CollectiveKind::P2P, 2, chunk_bytes);
  place_inside(p, c, gather, span);
}

// Transformer Engine's pipelined reduce-scatter (comm_gemm_overlap.cpp,
// CommOverlapBase::split_overlap_rs; the default method of proj_fprop and fc2_fprop in
// pytorch/module/base.py initialize_ub): the GEMM runs in kTeRsSplits chunks and each chunk's
// output is reduce-scattered on the userbuffers stream once it is written, by kernels on
// kTeUbCommSms SMs while the GEMM runs on the others. The phase's reduce-scatter after its compute
// becomes this pipeline inside it; the kernels after the GEMM (bias, dropout and residual add on
// the scattered output) wait for the last chunk's. A phase that already runs a ring inside (the
// CP ring of attention's forward) keeps its reduce-scatter after.
void add_tp_pipelined_rs(PhaseCost& p, const TpSetup& tp, GemmSpan span) {
  const auto scatter =
      overlappable_tp(p, CollectiveKind::ReduceScatter, CollectivePosition::After, span);
  if (scatter == p.collectives.end()) return;
  Collective c;
  c.kind = CollectiveKind::ReduceScatter;
  c.group = Group::Tp;
  c.position = CollectivePosition::Inside;
  c.order = InsideOrder::Pipeline;
  c.steps = kTeRsSplits;
  c.compute_slowdown = tp.ub_sm_slowdown;
  c.source = collective_source(*tp.link, CollectiveKind::ReduceScatter, tp.tp);
  c.bytes = scatter->bytes;
  c.time_s = kTeRsSplits * collective_time_s(*tp.link, CollectiveKind::ReduceScatter, tp.tp,
                                             scatter->bytes / kTeRsSplits);
  place_inside(p, c, scatter, span);
}

// The sequence-parallel re-gather of a column-parallel layer's saved input in its backward: the
// forward saved only the GPU's sequence shard, and the weight gradient needs every token, so the
// backward all-gathers it again (`gather_bytes`: what the forward's all-gather carries).
// - Megatron-Core (core/tensor_parallel/layers.py,
//   LinearWithGradAccumulationAndAsyncCommunication.backward; the LM head's ColumnParallelLinear):
//   the all-gather is issued async_op=True, the dgrad GEMM runs, then handle.wait() before the
//   input gradient's reduce-scatter and the wgrad GEMM.
// - Transformer Engine (pytorch/module/linear.py and layernorm_linear.py, backward with
//   backward_input_needs_gather; QKV and FC1 under Megatron's TE layer spec):
//   gather_along_first_dim with async_op=True beside the dgrad GEMM, waited for before the wgrad.
//   Under an FP8 recipe it gathers the input as the forward saved it, quantized (the
//   input_quantizer passed to the gather; set_quantizer_usage_for_wgrad_all_gather), so it carries
//   the forward gather's bytes. With TP-communication overlap (ub_bulk_dgrad, column layers with
//   SP) it is TE's bulk all-gather into the userbuffers (fill_userbuffers_buffer_for_all_gather,
//   then the dgrad GEMM with bulk_overlap: comm_gemm_overlap.cpp CommOverlapBase::bulk_overlap),
//   its kernels on kTeUbCommSms SMs and the GEMM on the rest (compute_slowdown), off the NCCL
//   stream and out of the simulator's contention (Collective::copy_engine routes it to the
//   userbuffers lane).
// The compute stream waits for the gather after the dgrad whether the wgrad runs now or later
// (TE waits on the gather's handle before its wgrad_store.delay_wgrad_compute() branch), so it
// runs inside the phase's compute over the dgrad `span`: the dgrad in kRegatherPieces pieces, the
// gather beside the first, the last piece and the kernels after the dgrad (the norm's backward,
// which Megatron runs after the wgrad) waiting for it. The gathered input is allocated by the B
// and freed by the W: held until a split-off W (TE's wgrad_store.put keeps inputmat_total).
void add_sp_regather(UnitCost& u, const TpSetup& tp, double gather_bytes, GemmSpan span) {
  PhaseCost& b = u[Phase::B];
  if (!tp.sp || tp.tp <= 1 || b.time_s <= 0 || span.gemm_s <= 0) return;
  if (std::any_of(b.collectives.begin(), b.collectives.end(),
                  [](const Collective& c) { return c.position == CollectivePosition::Inside; }))
    return;
  Collective c;
  c.kind = CollectiveKind::AllGather;
  c.group = Group::Tp;
  c.position = CollectivePosition::Inside;
  c.steps = kRegatherPieces;
  c.source = collective_source(*tp.link, CollectiveKind::AllGather, tp.tp);
  c.bytes = gather_bytes;
  c.time_s = collective_time_s(*tp.link, CollectiveKind::AllGather, tp.tp, gather_bytes);
  if (tp.tp_comm_overlap) {
    c.copy_engine = true;
    c.compute_slowdown = tp.ub_sm_slowdown;
  }
  c.segment_begin = std::clamp(span.begin_s / b.time_s, 0.0, 1.0);
  c.segment_end = std::clamp((span.begin_s + span.gemm_s) / b.time_s, c.segment_begin, 1.0);
  b.collectives.push_back(c);
  b.alloc_bytes += gather_bytes;
  u[Phase::W].free_bytes += gather_bytes;
}

// What a column layer's SP all-gather carries for a bf16 activation of `bytes` (the forward's
// gather: tp_collectives).
double column_gather_bytes(const TpSetup& tp, double bytes) {
  return bytes / tp.dtype_bytes * fp8_gather_bytes(tp.precision, tp.dtype_bytes, 1);
}

// A lookup of the roofline without logging its kernel again (the phase's timing logged it).
template <typename F>
GemmSpan unlogged(const Roofline& roof, F&& time) {
  std::vector<KernelCall>* log = roof.log;
  roof.log = nullptr;
  const GemmSpan span = time();
  roof.log = log;
  return span;
}

UnitCost make_unit(UnitKind kind, int layer, bool vision, Source source) {
  UnitCost u;
  u.kind = kind;
  u.layer = layer;
  u.vision = vision;
  for (auto& p : u.phase) p.source = source;
  return u;
}

void set_flops(PhaseCost& p, double flops) {
  p.flops = flops;
  p.hw_flops = flops;
}

// What the four units of a layer share: the notation of the file header, the TP collective
// payload, and the backward kernels Megatron runs besides the GEMMs (docs/cost-model.md):
// autograd's add of the residual path's gradient to the norm backward's (read 2, write 1, per
// layer input), the norm's weight (and bias) gradient pass re-reading its input and output
// gradient, the bias-gradient reductions (read the output gradient once) and the main-gradient
// traffic of each W GEMM.
struct LayerTerms {
  const LayerShape& s;
  const TpSetup& tp;
  const Roofline& roof;
  double t = 0, e = 0, T = 0, Ts = 0, h = 0, q = 0, k = 0, f = 0, fc1_width = 0;
  double o = 0;  // attention output width (the out-projection's input): q, or heads x v_head_dim
  double hidden_bytes = 0;  // one full activation: the TP collective payload
  double residual_grad_s = 0, norm_param_grad_s = 0;
  // Dropout backward on the hidden state: read the gradient and the 1-byte mask, write the
  // gradient.
  double dropout_bwd_bytes = 0;
  // FP8 (tp.precision not bf16): the linear layers' GEMMs run at the FP8 peak.
  bool fp8 = false;
  // Bytes per element of a linear layer's saved input (saved_input_bytes): e in bf16.
  double saved_e = 0;

  // Transformer Engine's FP8 cast of one GEMM operand of `elements` values (fp8_cast_s); 0
  // without FP8.
  double cast_s(double elements) const {
    return fp8 ? fp8_cast_s(roof, tp.precision, elements, 1) : 0;
  }
  double linear_s(double tokens, double in, double out, Phase phase) const {
    return roof.linear_s(tokens, in, out, phase, fp8);
  }

  // The measured RMSNorm kernel stands for the LM's norms (the ViT's LayerNorm is not measured);
  // backward norms use it at their byte count.
  double norm_s(double bytes) const {
    return s.norm_params == 1 ? roof.kernel_s(ElementwiseKernel::RmsNorm, bytes)
                              : roof.memory_s(bytes);
  }
  // In the GEMM's epilogue with gradient-accumulation fusion (traffic, no kernel of its own);
  // without, one add kernel.
  double main_grad_s(double weights) const {
    return roof.memory_s(tp.main_grad_bytes * weights, tp.main_grad_fused ? 0 : 1);
  }
};

LayerTerms layer_terms(const LayerShape& s, const TpSetup& tp, const Roofline& roof) {
  LayerTerms L{s, tp, roof};  // the rest below
  L.t = tp.tp;
  L.e = tp.dtype_bytes;
  L.T = s.tokens;
  L.Ts = tp.sp ? L.T / L.t : L.T;
  L.h = s.hidden;
  L.q = s.heads * s.head_dim;
  L.k = s.kv_heads * s.head_dim;
  L.o = s.mla ? s.heads * s.mla->v_head_dim : L.q;
  L.f = s.ffn;
  L.fc1_width = s.gated ? 2 * L.f : L.f;
  L.hidden_bytes = L.T * L.h * L.e;
  L.residual_grad_s = roof.memory_s(3 * L.Ts * L.h * L.e);
  L.norm_param_grad_s = roof.memory_s(2 * L.Ts * L.h * L.e);
  L.dropout_bwd_bytes = s.dropout ? L.Ts * L.h * (2 * L.e + 1) : 0;
  L.fp8 = tp.precision != Precision::Bf16;
  L.saved_e = saved_input_bytes(tp.precision, L.e);
  return L;
}

// A norm, then a column-parallel GEMM of `g.width` output columns per GPU: PreAttn (QKV) and
// PreMLP (FC1). `extra_s` times the unit's own elementwise work (RoPE) after the GEMM in F and
// before it in B; it is called inside the phase's timing, which logs the kernels it runs.
struct NormColumnGemm {
  double width = 0, flops = 0;
  double weights = 0;   // the GEMM's weights per GPU (main-gradient traffic)
  double grad_out = 0;  // bytes of the GEMM's output gradient
  bool bias = false;
};

template <typename Extra>
void norm_column_gemm_cost(UnitCost& u, const LayerTerms& L, const NormColumnGemm& g,
                           Extra extra_s) {
  const Roofline& roof = L.roof;
  const double e = L.e, T = L.T, Ts = L.Ts, h = L.h;
  // The norm's bf16 input and the GEMM's input as TE saves it (FP8 under an FP8 recipe: the
  // norm wrote it quantized; sharded under SP, gathered again in the backward).
  const double norm_in = Ts * h * e, gemm_in = Ts * h * L.saved_e;
  timed(u[Phase::F], roof, [&] {
    // With FP8 the norm writes its output in FP8 itself (TE's LayerNormLinear quantizes in the
    // normalization kernel, pytorch/module/layernorm_linear.py): no cast kernel of its own.
    return L.norm_s(2 * Ts * h * e) + L.linear_s(T, h, g.width, Phase::F) + extra_s();
  });
  set_flops(u[Phase::F], g.flops);
  u[Phase::F].alloc_bytes = norm_in + gemm_in;
  timed(u[Phase::B], roof, [&] {
    return extra_s() + L.cast_s(g.grad_out / e) + L.linear_s(T, h, g.width, Phase::B) +
           L.norm_s(3 * Ts * h * e) + L.residual_grad_s;
  });
  set_flops(u[Phase::B], g.flops);
  u[Phase::B].alloc_bytes = g.grad_out;
  u[Phase::B].free_bytes = norm_in;
  timed(u[Phase::W], roof, [&] {
    return L.linear_s(T, h, g.width, Phase::W) + L.norm_param_grad_s + L.main_grad_s(g.weights) +
           (g.bias ? roof.memory_s(g.grad_out) : 0);
  });
  set_flops(u[Phase::W], g.flops);
  u[Phase::W].free_bytes = gemm_in + g.grad_out;
}

// The widths of multi-head latent attention's projections (multi_latent_attention.py,
// MLASelfAttention): the duplicated down-projection's output (q latent, kv latent and the
// shared rotary key), and per GPU the up-projections' outputs.
struct MlaWidths {
  double q_in = 0;      // the q up-projection's input: q_lora_rank, or hidden (no q compression)
  double down = 0;      // duplicated down-projection outputs: [q_lora_rank +] kv_lora_rank + rope
  double latent = 0;    // latents normed (q_layernorm, kv_layernorm): [q_lora_rank +] kv_lora_rank
  double gathered = 0;  // what the column-parallel up-projections gather under SP
  double q_up = 0, kv_up = 0;  // per GPU: heads / t x (qk + rope), heads / t x (qk + v)
};
MlaWidths mla_widths(const LayerTerms& L) {
  const MlaConfig& a = *L.s.mla;
  MlaWidths w;
  const double q_lora = a.q_lora_rank, kv_lora = a.kv_lora_rank, rope = a.qk_pos_emb_head_dim;
  w.q_in = q_lora > 0 ? q_lora : L.h;
  w.down = q_lora + kv_lora + rope;
  w.latent = q_lora + kv_lora;
  w.gathered = w.q_in + kv_lora + rope;
  w.q_up = L.q / L.t;
  w.kv_up = L.s.heads * (a.qk_head_dim + a.v_head_dim) / L.t;
  return w;
}

// PreAttn with multi-head latent attention (MLASelfAttention.get_query_key_value_tensors): the
// input norm, the down-projections duplicated on every GPU of the TP group over the GPU's own
// tokens (parallel_mode 'duplicated'; under SP the sequence shard), the norms of the latents
// (memory-bound), the column-parallel up-projections over all tokens, RoPE on q and the shared
// k_pos_emb. Its TP collectives carry the latents, not the hidden state (layer_cost).
void pre_attn_mla_cost(UnitCost& u, const LayerTerms& L) {
  const Roofline& roof = L.roof;
  const double e = L.e, T = L.T, Ts = L.Ts, h = L.h;
  const MlaWidths w = mla_widths(L);
  const double q_lora = L.s.mla->q_lora_rank, kv_lora = L.s.mla->kv_lora_rank;
  const double rope_bytes =
      2 * T * (L.s.heads / L.t + 1) * L.s.mla->qk_pos_emb_head_dim * e;  // q's and k's rope
  auto rope_s = [&] { return roof.kernel_s(ElementwiseKernel::Rope, rope_bytes); };
  auto gemms_s = [&](Phase phase) {
    return L.linear_s(Ts, h, w.down, phase) + L.linear_s(T, w.q_in, w.q_up, phase) +
           L.linear_s(T, kv_lora, w.kv_up, phase);
  };
  const double flops = 2 * Ts * h * w.down + 2 * T * (w.q_in * w.q_up + kv_lora * w.kv_up);
  const double weights = h * w.down + w.q_in * w.q_up + kv_lora * w.kv_up;
  const double norm_in = Ts * (h + w.latent) * e, gemm_in = Ts * (h + w.latent) * L.saved_e;
  const double grad_out = T * (w.q_up + w.kv_up) * e;
  timed(u[Phase::F], roof, [&] {
    return L.norm_s(2 * Ts * h * e) + L.norm_s(2 * Ts * w.latent * e) + gemms_s(Phase::F) +
           rope_s();
  });
  set_flops(u[Phase::F], flops);
  u[Phase::F].alloc_bytes = norm_in + gemm_in;
  timed(u[Phase::B], roof, [&] {
    return rope_s() + L.cast_s(grad_out / e) + gemms_s(Phase::B) +
           L.norm_s(3 * Ts * (h + w.latent) * e) + L.residual_grad_s;
  });
  set_flops(u[Phase::B], flops);
  u[Phase::B].alloc_bytes = grad_out;
  u[Phase::B].free_bytes = norm_in;
  timed(u[Phase::W], roof, [&] {
    return gemms_s(Phase::W) + L.norm_param_grad_s +
           roof.memory_s(2 * Ts * (q_lora + kv_lora) * e) + L.main_grad_s(weights);
  });
  set_flops(u[Phase::W], flops);
  u[Phase::W].free_bytes = gemm_in + grad_out;
}

// PreAttn: norm, QKV GEMM (column-parallel), RoPE on q and k.
void pre_attn_cost(UnitCost& u, const LayerTerms& L) {
  const LayerShape& s = L.s;
  if (s.mla) return pre_attn_mla_cost(u, L);
  const Roofline& roof = L.roof;
  const double t = L.t, e = L.e, T = L.T, h = L.h, q = L.q, k = L.k;
  // Read + write q and k; learned positions (GPT) are added at the embedding instead.
  const double rope_bytes = s.rope ? 2 * T * (q + k) / t * e : 0;
  auto rope_s = [&] { return s.rope ? roof.kernel_s(ElementwiseKernel::Rope, rope_bytes) : 0.0; };
  const double qkv_width = (q + 2 * k) / t;
  norm_column_gemm_cost(u, L,
                        {.width = qkv_width,
                         .flops = 2 * T * h * (q + 2 * k) / t,
                         .weights = h * qkv_width,
                         .grad_out = T * (q + 2 * k) / t * e,
                         .bias = s.qkv_bias},
                        rope_s);
}

// W of a row-parallel GEMM from `in_width` columns per GPU to the hidden size (Attn's
// out-projection, MLP's FC2): the weight GEMM, its main gradient and the bias gradient; it frees
// `freed_bytes` (the GEMM's saved input and the output gradient).
void row_gemm_weight_grad(UnitCost& u, const LayerTerms& L, double in_width, double flops,
                          double freed_bytes) {
  const Roofline& roof = L.roof;
  const double e = L.e, T = L.T, Ts = L.Ts, h = L.h;
  timed(u[Phase::W], roof, [&] {
    return L.linear_s(T, in_width, h, Phase::W) + L.main_grad_s(in_width * h) +
           (L.s.proj_bias ? roof.memory_s(Ts * h * e) : 0);
  });
  set_flops(u[Phase::W], flops);
  u[Phase::W].free_bytes = freed_bytes;
}

// The all-to-alls of the attention's Q, K (kv heads), V and output, as the a2a and a2a+p2p types
// send them (Q and the output: q / tp wide, K and V: k / tp, over the GPU's tokens `T`): before
// the forward, after it, and the backward's mirror. `rerun`: selective recomputation runs the
// forward's again ahead of dO's.
struct AttentionAllToAlls {
  double q = 0, k = 0, out = 0;
};
AttentionAllToAlls attention_all_to_alls(const LayerTerms& L) {
  return {L.T * L.q / L.t * L.e, L.T * L.k / L.t * L.e, L.T * L.q / L.t * L.e};
}
void add_attention_all_to_alls(UnitCost& u, const TpSetup& tp, const AttentionAllToAlls& a,
                               bool rerun, bool before_ring) {
  if (before_ring) {
    add_cp_all_to_all(u[Phase::F], tp, CollectivePosition::Before, {a.q, a.k, a.k});
    if (rerun)
      add_cp_all_to_all(u[Phase::B], tp, CollectivePosition::Before, {a.q, a.k, a.k, a.out, a.out});
    else
      add_cp_all_to_all(u[Phase::B], tp, CollectivePosition::Before, {a.out});
    return;
  }
  add_cp_all_to_all(u[Phase::F], tp, CollectivePosition::After, {a.out});
  add_cp_all_to_all(u[Phase::B], tp, CollectivePosition::After, {a.q, a.k, a.k});
}

// a2a+p2p's exchanges (attn_cost): all-to-alls before, the ring of `ring_ranks` inside (KV of
// `kv_bytes` per step; KV and dKV backward), all-to-alls after, in that order per phase.
// Their streams in Transformer Engine (attention/dot_product_attention/context_parallel.py): the
// all-to-alls are async all_to_all_single calls on the a2a group's NCCL stream that
// flash_attn_a2a_communicate makes cp_stream, then the compute stream, wait for, so they are on
// the compute path (the attention waits for Q, K, V; what follows for the output); the ring's
// isend / irecv (flash_attn_p2p_communicate) run on the p2p group's own NCCL streams, issued by
// AttnFuncWithCPAndKVP2P's step i and waited for by step i + 1 (forward) or after step i
// (backward). The lowering keeps both on the rank's cp stream: the all-to-alls have ended before
// any later transfer is issued, there and in TE (Collective::from_compute, add_cp_all_to_all).
void hierarchical_cp_comm(UnitCost& u, const LayerTerms& L, int ring_ranks, double kv_bytes,
                          bool rerun) {
  const AttentionAllToAlls a = attention_all_to_alls(L);
  add_attention_all_to_alls(u, L.tp, a, rerun, /*before_ring=*/true);
  add_cp_ring(u[Phase::F], L.tp, ring_ranks, kv_bytes);
  add_cp_ring(u[Phase::B], L.tp, ring_ranks, 2 * kv_bytes);
  add_attention_all_to_alls(u, L.tp, a, rerun, /*before_ring=*/false);
}

// Attn: core attention, out-projection (row-parallel), residual add (with the hidden dropout
// of GPT models fused into it).
void attn_cost(UnitCost& u, const LayerTerms& L) {
  const LayerShape& s = L.s;
  const Roofline& roof = L.roof;
  const double t = L.t, e = L.e, T = L.T, Ts = L.Ts, h = L.h, q = L.q, k = L.k, o = L.o;
  // Scores QK^T and P.V: 2 x 2 x q FLOPs per token and key it attends to: seq keys, half of them
  // when causal (model FLOPs), at most the window's with sliding-window attention
  // (causal_keys_per_query). MLA: QK^T at the query/key width q, P.V at the value width o (heads x
  // v_head_dim).
  const bool windowed = s.window > 0 && s.window < s.seq;
  const double keys = s.causal ? causal_keys_per_query(s.seq, windowed ? s.window : 0) : s.seq;
  const double core = s.mla ? 2 * T * keys * (q + o) / t : 4 * T * keys * q / t;
  const double proj = 2 * T * o * h / t;
  const double qkv = s.mla ? T * (q + k + o) / t * e : T * (q + 2 * k) / t * e;
  const double out = T * o / t * e;
  const double grad_out = T * h * e;  // the output gradient arrives whole (gathered under SP)
  const double mask = s.dropout ? Ts * h : 0;  // hidden dropout mask, 1 byte per element
  const double residual_s = roof.memory_s(3 * Ts * h * e + mask);
  // With context parallelism the GPU's queries meet the keys of every chunk in cp steps, one per
  // KV chunk of the ring (Transformer Engine, AttnFuncWithCPAndKVP2P in
  // attention/dot_product_attention/context_parallel.py). Under its causal load balancing (each
  // GPU holds chunks i and 2cp-1-i) every step does the FLOPs of causal attention over seq / cp
  // tokens: the diagonal step is that kernel, the others half blocks of the same size. So the
  // core attention is cp kernels of that shape (cp 1: one kernel over the sequence).
  // The all-gather type (AttnFuncWithCPAndKVAllGather) gathers the whole KV first and runs two
  // kernels, one per local chunk (seq / 2cp queries against the keys up to the chunk's end: on
  // average half the sequence), timed at the attention rows' rate for seq / 2.
  // The a2a type (Ulysses; AttnFuncWithCPAndQKVOA2A) trades the sequence split for a head split
  // before the attention: one kernel over the whole sequence with heads / cp (and kv heads / cp)
  // of the GPU's heads, the same FLOPs; no load-balanced steps.
  // a2a+p2p (AttnFuncWithCPAndKVP2P with cp_group [a2a, p2p]) does both: the all-to-all over A
  // ranks leaves each GPU seq / P tokens (its A-group's chunks, reordered for the ring's load
  // balance) with heads / A, then the ring of P = cp / A steps runs as p2p's over them.
  const bool gather = s.cp > 1 && L.tp.cp_comm == CpCommType::AllGather;
  const bool ulysses = s.cp > 1 && L.tp.cp_comm == CpCommType::A2A;
  const bool hierarchical = s.cp > 1 && L.tp.cp_comm == CpCommType::A2AP2P;
  const int cp = static_cast<int>(s.cp);
  const int a2a_ranks = ulysses ? cp : hierarchical ? L.tp.cp_a2a : 1;
  const int ring_ranks = cp / a2a_ranks;
  const double steps = gather ? 2 : ring_ranks;
  double kernel_seq = gather ? s.seq / 2.0 : s.seq / static_cast<double>(ring_ranks);
  const double head_split = t * a2a_ranks;
  const double samples = T * s.cp / s.seq;
  // A windowed layer's kernel (Transformer Engine's window_size (w - 1, 0), passed by
  // Megatron-Core's TEDotProductAttention when is_layer_window_attention holds) is timed as the
  // causal kernel with the same mean keys per query, 2w long, over seq / 2w times the samples:
  // the same tokens, the same short per-query loop over keys (the attention rows have no
  // windowed kernel). Its FLOPs are the window's exact count (core). Context parallelism with a
  // window runs only as the a2a type, whose kernel sees the whole sequence (cost_model's refusal).
  double kernel_samples = samples;
  if (windowed && 2 * s.window < kernel_seq) {
    kernel_samples = samples * kernel_seq / (2 * s.window);
    kernel_seq = 2 * s.window;
  }
  auto attention = [&](bool backward, double flops) {
    return steps * roof.attention_s(kernel_samples, kernel_seq, s.heads / head_split,
                                    s.kv_heads / head_split, s.head_dim, s.causal, backward,
                                    flops / steps, s.attention_impl);
  };
  // The core attention forward (also its rerun) and backward: time, hardware FLOPs, and the
  // s x s bytes it saves. Times are computed inside `timed` so measured tables tag the phase.
  std::function<double()> core_fwd_s, core_bwd_s;
  double core_hw = 0, core_bwd_hw = 0, scores_saved = 0;
  if (s.flash) {
    // FlashAttention skips the masked half and stores no s x s matrix; its backward recomputes
    // QK^T (2.5 x the forward FLOPs).
    core_fwd_s = [&] { return attention(false, core); };
    core_bwd_s = [&] { return attention(true, 2.5 * core); };
    core_hw = core;
    core_bwd_hw = 2.5 * core;
  } else {
    // Megatron's unfused attention: QK^T and P.V as batched GEMMs over the full s x s (the
    // causal mask is applied in the softmax), elementwise passes over the scores. Per score
    // element (heads/t x seq x tokens of them): forward writes QK^T (2 B), softmax reads and
    // writes (4 B), dropout reads, writes and stores its mask (5 B), P.V reads (2 B); backward
    // writes dP (2 B), reads P for dV (2 B), dropout backward (5 B), softmax backward reads
    // dP and P and writes dS (6 B), dQ and dK read dS (4 B). Saved: softmax output (2 B), and
    // with dropout its mask (1 B) and output (2 B) — Korthikanti et al.'s 5as^2b.
    // The batched GEMMs, one per head and sample: QK^T (seq x seq x head_dim) and P.V (seq x
    // head_dim x seq) forward; dP = dO.V^T (seq x seq x head_dim), dV, dQ and dK (seq x head_dim
    // x seq) backward. Kernels: softmax (+ dropout) forward, their backwards.
    const double scores = s.heads / t * s.seq * T;
    const double full = 4 * T * s.seq * q / t;
    const double drop = s.dropout ? 5 : 0;
    const double kernels = s.dropout ? 2 : 1;
    const GemmDims qk{s.seq, s.seq, s.head_dim, samples * s.heads / t};
    const GemmDims pv{s.seq, s.head_dim, s.seq, samples * s.heads / t};
    core_fwd_s = [&roof, qk, pv, drop, scores, kernels] {
      return roof.gemms_s({qk, pv}) + roof.memory_s((8 + drop) * scores, kernels);
    };
    core_bwd_s = [&roof, qk, pv, drop, scores, kernels] {
      return roof.gemms_s({qk, pv, pv, pv}) + roof.memory_s((14 + drop) * scores, kernels);
    };
    core_hw = full;
    core_bwd_hw = 2 * full;
    scores_saved = (s.dropout ? 5 : 2) * scores;
  }
  // Unfused attention: the context is permuted back to [s, b, h] with a copy (.contiguous());
  // its backward copies the gradient the other way. Both paths concatenate the q, k, v
  // gradients into the fused QKV gradient (the backward of the split).
  const double permute_bytes = s.flash ? 0 : 2 * out;
  const double qkv_cat_bytes = 2 * qkv;
  timed(u[Phase::F], roof, [&] {
    return core_fwd_s() + roof.memory_s(permute_bytes) + L.cast_s(T * o / t) +
           L.linear_s(T, o / t, h, Phase::F) + residual_s;
  });
  u[Phase::F].flops = core + proj;
  u[Phase::F].hw_flops = core_hw + proj;
  // Selective recomputation (Megatron: core attention) keeps no s x s scores: the backward runs
  // the core attention forward again, holding its scores only while it runs. With
  // FlashAttention it saves no memory (no scores are stored), so it only costs time.
  const bool rerun = L.tp.recompute_attention;
  // The out-projection's saved input: in bf16 the attention output itself (with FlashAttention
  // also the output O the attention backward reads: one tensor). With FP8 TE's Linear saves its
  // own FP8 copy instead, freed after the wgrad, while FlashAttention still keeps its bf16 O
  // until the attention backward in B (the unfused path's permuted copy is saved by no one else).
  const double proj_in = T * o / t * L.saved_e;
  const double flash_out = L.fp8 && s.flash ? out : 0;
  u[Phase::F].alloc_bytes = qkv + flash_out + proj_in + mask + (rerun ? 0 : scores_saved);
  timed(u[Phase::B], roof, [&] {
    return roof.memory_s(L.dropout_bwd_bytes) + L.cast_s(T * h) +
           L.linear_s(T, o / t, h, Phase::B) + roof.memory_s(permute_bytes) +
           (rerun ? core_fwd_s() : 0) + core_bwd_s() + roof.memory_s(qkv_cat_bytes);
  });
  u[Phase::B].flops = 2 * core + proj;  // model FLOPs: backward = 2 x forward
  u[Phase::B].hw_flops = core_bwd_hw + (rerun ? core_hw : 0) + proj;
  u[Phase::B].alloc_bytes = grad_out + (rerun ? scores_saved : 0);
  u[Phase::B].free_bytes = qkv + flash_out + mask + scores_saved;
  row_gemm_weight_grad(u, L, o / t, proj, proj_in + grad_out);
  // The ring: while step j computes, the KV chunk of step j + 1 arrives (K and V of the GPU's
  // tokens, kv heads / t). The backward passes KV and the accumulated dKV around the ring.
  // MLA: K at the query/key width, V at the value width (both per head, from the latent).
  const double kv_bytes = s.mla ? T * (k + o) / t * e : 2 * T * k / t * e;
  if (hierarchical) {
    // a2a+p2p: the a2a type's all-to-alls over the A-group (flash_attn_a2a_communicate with
    // cp_group_a2a: Q, K, V before, the output after; dO before, dQ, dK, dV after; the same bytes
    // per rank), around p2p's ring over the P-group. After the all-to-all a GPU holds A x its
    // tokens at kv heads / (tp x A): the ring's step moves the same KV bytes as p2p's. The rerun
    // of selective recomputation repeats the forward's all-to-alls (as a2a's); its ring, as p2p's,
    // is not charged again.
    hierarchical_cp_comm(u, L, ring_ranks, kv_bytes, rerun);
    return;
  }
  if (ulysses) {
    // The a2a type, exposed (TE runs it on the compute path: the attention waits for it): Q, K
    // (kv heads) and V from sequence- to head-split before the attention, the output back after
    // it; the backward sends dO before and dQ, dK, dV after. Each tensor's bytes per rank are
    // the GPU's share (nccl-tests' alltoall size). The rerun of selective recomputation repeats
    // the forward's all-to-alls (Megatron checkpoints TE's whole attention function), ahead of
    // dO's. The output's exchange runs before the out-projection in TE; here it follows the
    // unit's compute: all of it is serial, so the unit's span is the same.
    const AttentionAllToAlls a = attention_all_to_alls(L);
    add_attention_all_to_alls(u, L.tp, a, rerun, /*before_ring=*/true);
    add_attention_all_to_alls(u, L.tp, a, rerun, /*before_ring=*/false);
    return;
  }
  if (!gather) {
    add_cp_ring(u[Phase::F], L.tp, cp, kv_bytes);
    add_cp_ring(u[Phase::B], L.tp, cp, 2 * kv_bytes);
    return;
  }
  // The all-gather type, exposed: the forward gathers K and V of the whole sequence before the
  // attention; the backward gathers them again (only the local KV is saved) and reduce-scatters
  // the whole-sequence dK and dV after. Bytes are the gathered buffer (nccl-tests' size).
  add_cp_collective(u[Phase::F], L.tp, CollectiveKind::AllGather, CollectivePosition::Before,
                    s.cp * kv_bytes);
  add_cp_collective(u[Phase::B], L.tp, CollectiveKind::AllGather, CollectivePosition::Before,
                    s.cp * kv_bytes);
  add_cp_collective(u[Phase::B], L.tp, CollectiveKind::ReduceScatter, CollectivePosition::After,
                    s.cp * kv_bytes);
}

// PreMLP: norm, FC1 (gate + up for SwiGLU; column-parallel).
void pre_mlp_cost(UnitCost& u, const LayerTerms& L) {
  const double t = L.t, e = L.e, T = L.T, h = L.h, fc1_width = L.fc1_width;
  norm_column_gemm_cost(u, L,
                        {.width = fc1_width / t,
                         .flops = 2 * T * h * fc1_width / t,
                         .weights = h * fc1_width / t,
                         .grad_out = T * fc1_width / t * e,
                         .bias = L.s.mlp_bias},
                        [] { return 0.0; });
}

// MLP: activation (SwiGLU or GELU), FC2 (row-parallel), residual add.
void mlp_cost(UnitCost& u, const LayerTerms& L) {
  const LayerShape& s = L.s;
  const Roofline& roof = L.roof;
  const double t = L.t, e = L.e, T = L.T, Ts = L.Ts, h = L.h, f = L.f, fc1_width = L.fc1_width;
  const double gemm = 2 * T * f * h / t;
  const double act_in = T * fc1_width / t * e, fc2_in = T * f / t * e;
  // FC2's input as TE saves it (FP8 under an FP8 recipe); the activation saves its bf16 input.
  const double fc2_saved = T * f / t * L.saved_e;
  const double grad_out = T * h * e;
  // Activation kernel: read its inputs, write f; backward reads dy and the inputs, writes their
  // gradients.
  const double act_fwd_bytes = act_in + fc2_in;
  const double act_bwd_bytes = fc2_in + 2 * act_in;
  const double mask = s.dropout ? Ts * h : 0;  // hidden dropout mask, 1 byte per element
  // The measured SwiGLU kernel stands for the gated activation (GELU is not measured).
  auto act_s = [&](double bytes) {
    return s.gated ? roof.kernel_s(ElementwiseKernel::SwiGLU, bytes) : roof.memory_s(bytes);
  };
  timed(u[Phase::F], roof, [&] {
    return act_s(act_fwd_bytes) + L.cast_s(T * f / t) + L.linear_s(T, f / t, h, Phase::F) +
           roof.memory_s(3 * Ts * h * e + mask);
  });
  set_flops(u[Phase::F], gemm);
  u[Phase::F].alloc_bytes = act_in + fc2_saved + mask;
  timed(u[Phase::B], roof, [&] {
    return roof.memory_s(L.dropout_bwd_bytes) + L.cast_s(T * h) +
           L.linear_s(T, f / t, h, Phase::B) + act_s(act_bwd_bytes);
  });
  set_flops(u[Phase::B], gemm);
  u[Phase::B].alloc_bytes = grad_out;
  u[Phase::B].free_bytes = act_in + mask;
  row_gemm_weight_grad(u, L, f / t, gemm, fc2_saved + grad_out);
}

// Full recomputation (Megatron --recompute-granularity full, one layer per checkpoint): the
// forward saves only the layer input (PreAttn's norm input, sharded under SP); the backward
// first runs the whole forward again, with its collectives, saving what B and W then free.
// The rerun's norm input is the kept layer input itself, not a second copy.
// The layer's input is its first unit's forward input (the norm input of a dense layer).
void recompute_whole_layer(LayerCost& c, const LayerTerms& L) {
  const double layer_input = L.Ts * L.h * L.e;
  bool first = true;
  for (UnitCost& u : c.units) {
    PhaseCost& f = u[Phase::F];
    u.recompute = f;
    u.recompute.flops = 0;  // not model FLOPs
    const double kept = first ? layer_input : 0;
    u.recompute.alloc_bytes = f.alloc_bytes - kept;
    f.alloc_bytes = kept;
    first = false;
  }
}

// The formulas of one unit kind of the dense layer.
void dense_unit_cost(UnitCost& u, const LayerTerms& L) {
  switch (u.kind) {
    case UnitKind::PreAttn:
      return pre_attn_cost(u, L);
    case UnitKind::Attn:
      return attn_cost(u, L);
    case UnitKind::PreMLP:
      return pre_mlp_cost(u, L);
    case UnitKind::MLP:
      return mlp_cost(u, L);
    case UnitKind::Embedding:
    case UnitKind::Head:
    case UnitKind::VisionPatch:
    case UnitKind::VisionMerger:
    case UnitKind::Router:
    case UnitKind::Dispatch:
    case UnitKind::Experts:
    case UnitKind::Combine:
      break;
  }
  throw InternalError(std::string("the dense layer has no unit ") + name(u.kind));
}

// TP-communication overlap of a dense layer's unit: the ring all-gather over the GEMM of the
// column units' forward (the norm runs first, on the GPU's shard) and of the row units' dgrad
// (the dropout backward runs first), and the pipelined reduce-scatter of the row units' forward,
// timed as the phase's own formulas time them.
void ring_gathers(UnitCost& u, const LayerTerms& L) {
  const Roofline& roof = L.roof;
  const double t = L.t, e = L.e, T = L.T, Ts = L.Ts, h = L.h;
  if (u.kind == UnitKind::PreAttn && L.s.mla) return;  // the latents' gather: not overlapped
  if (u.kind == UnitKind::PreAttn || u.kind == UnitKind::PreMLP) {
    const double width = u.kind == UnitKind::PreAttn ? (L.q + 2 * L.k) / t : L.fc1_width / t;
    add_tp_ring_gather(
        u[Phase::F], L.tp, unlogged(roof, [&] {
          return GemmSpan{L.norm_s(2 * Ts * h * e), roof.linear_s(T, h, width, Phase::F)};
        }));
  } else if (u.kind == UnitKind::Attn || u.kind == UnitKind::MLP) {
    const double width = u.kind == UnitKind::Attn ? L.o / t : L.f / t;
    add_tp_ring_gather(
        u[Phase::B], L.tp, unlogged(roof, [&] {
          return GemmSpan{roof.memory_s(L.dropout_bwd_bytes), roof.linear_s(T, width, h, Phase::B)};
        }));
    // The forward's out-projection / FC2 and its reduce-scatter: the GEMM ends where the
    // residual kernels after it begin (attn_cost, mlp_cost: 3 Ts h e bytes and the mask).
    const PhaseCost& f = u[Phase::F];
    add_tp_pipelined_rs(u[Phase::F], L.tp, unlogged(roof, [&] {
                          const double gemm_s = L.linear_s(T, width, h, Phase::F);
                          const double tail_s =
                              roof.memory_s(3 * Ts * h * e + (L.s.dropout ? Ts * h : 0));
                          return GemmSpan{f.time_s - tail_s - gemm_s, gemm_s};
                        }));
  }
}

// Transformer Engine's bulk overlap of a column layer's backward (comm_gemm_overlap.cpp,
// CommOverlapBase::bulk_overlap; qkv_wgrad and fc1_wgrad in pytorch/module/base.py
// initialize_ub): the reduce-scatter of the dgrad's output runs on kTeUbCommSms SMs beside the
// wgrad GEMM (Collective::bulk: the lowering puts it beside the unit's W when the W follows its
// B). The bulk all-gather of the saved input beside the dgrad (qkv_dgrad, fc1_dgrad) is
// add_sp_regather's.
void bulk_wgrad_scatters(UnitCost& u, const TpSetup& tp) {
  if (u.kind != UnitKind::PreAttn && u.kind != UnitKind::PreMLP) return;
  for (Collective& c : u[Phase::B].collectives) {
    if (c.group != Group::Tp || c.kind != CollectiveKind::ReduceScatter ||
        c.position != CollectivePosition::After)
      continue;
    c.bulk = true;
    c.compute_slowdown = tp.ub_sm_slowdown;
  }
}

// The Attn backward of the a2a type receives its output gradient in the TP all-gather (under
// SP) and sends dO to the CP group only after the out-projection's dgrad: TP collectives before
// the compute run ahead of the CP all-to-all there, as they do in TE and Megatron.
void tp_gathers_first(PhaseCost& p) {
  std::stable_partition(p.collectives.begin(), p.collectives.end(), [](const Collective& c) {
    return c.group == Group::Tp && c.position == CollectivePosition::Before;
  });
}

// The SP re-gather of a dense layer's column unit (add_sp_regather), over the dgrad GEMM of QKV
// or FC1, which comes after RoPE's backward and the output gradient's cast and before the norm's
// backward (norm_column_gemm_cost). Under multi-head latent attention the column-parallel
// up-projections gather their inputs, the q and kv latents (the hidden state itself without q
// compression), again; k_pos_emb was gathered by gather_from_sequence_parallel_region, whose
// backward is a reduce-scatter (multi_latent_attention.py, MLASelfAttention). One re-gather of
// both stands for the two, over the two up-projections' dgrads, which come before the
// duplicated down-projections' (pre_attn_mla_cost).
void regather(UnitCost& u, const LayerTerms& L, double bytes) {
  const Roofline& roof = L.roof;
  const double T = L.T, h = L.h, e = L.e;
  double gathered = bytes;
  const GemmSpan span = unlogged(roof, [&] {
    if (u.kind == UnitKind::PreAttn && L.s.mla) {
      const MlaWidths w = mla_widths(L);
      const double kv_lora = L.s.mla->kv_lora_rank;
      gathered = T * (w.q_in + kv_lora) * e;
      const double rope_bytes = 2 * T * (L.s.heads / L.t + 1) * L.s.mla->qk_pos_emb_head_dim * e;
      return GemmSpan{
          roof.kernel_s(ElementwiseKernel::Rope, rope_bytes) + L.cast_s(T * (w.q_up + w.kv_up)),
          L.linear_s(T, w.q_in, w.q_up, Phase::B) + L.linear_s(T, kv_lora, w.kv_up, Phase::B)};
    }
    const bool qkv = u.kind == UnitKind::PreAttn;
    const double width = qkv ? (L.q + 2 * L.k) / L.t : L.fc1_width / L.t;
    const double rope_s =
        qkv && L.s.rope ? roof.kernel_s(ElementwiseKernel::Rope, 2 * T * (L.q + L.k) / L.t * e) : 0;
    return GemmSpan{rope_s + L.cast_s(T * width), L.linear_s(T, h, width, Phase::B)};
  });
  // MLA's latents go through NCCL in the forward too (ring_gathers leaves them out).
  TpSetup tp = L.tp;
  if (L.s.mla && u.kind == UnitKind::PreAttn) tp.tp_comm_overlap = false;
  add_sp_regather(u, tp, column_gather_bytes(tp, gathered), span);
}

constexpr UnitRole kDenseUnits[] = {{UnitKind::PreAttn, TpSplit::Column},
                                    {UnitKind::Attn, TpSplit::Row},
                                    {UnitKind::PreMLP, TpSplit::Column},
                                    {UnitKind::MLP, TpSplit::Row}};

}  // namespace

// A column unit whose backward is its dgrad GEMM alone (the shared experts' fc1): the SP re-gather
// of its saved input over the whole B (add_sp_regather), on NCCL in both TP-overlap modes as its
// forward all-gather is (ring_gathers overlaps the dense layer's QKV and FC1 only).
void sp_regather_dgrad(UnitCost& u, const TpSetup& tp, double bytes) {
  TpSetup nccl = tp;
  nccl.tp_comm_overlap = false;
  add_sp_regather(u, nccl, column_gather_bytes(tp, bytes), GemmSpan{0, u[Phase::B].time_s});
}

const LayerKind& dense_layer() {
  static constexpr LayerKind kDense{kDenseUnits, 2};
  return kDense;
}

LayerCost layer_cost(const LayerShape& s, const TpSetup& tp, const Roofline& roof, int layer,
                     bool vision) {
  const LayerTerms L = layer_terms(s, tp, roof);
  const LayerKind& kind = dense_layer();
  LayerCost c;
  c.half = kind.half;
  c.units.reserve(kind.units.size());
  for (const UnitRole& role : kind.units) {
    UnitCost u = make_unit(role.kind, layer, vision, tp.source);
    dense_unit_cost(u, L);
    // MLA's PreAttn gathers (SP) or all-reduces the gradient of (no SP) the up-projections'
    // inputs, the latents and k_pos_emb, not the hidden state (MLASelfAttention: the
    // down-projections' outputs scattered back to the sequence shard, k_pos_emb gathered).
    const double bytes = s.mla && role.kind == UnitKind::PreAttn
                             ? L.T * mla_widths(L).gathered * L.e
                             : L.hidden_bytes;
    tp_collectives(role.tp, u, L.tp, bytes);
    if (role.tp == TpSplit::Column) regather(u, L, bytes);
    if (tp.cp > 1 && (tp.cp_comm == CpCommType::A2A || tp.cp_comm == CpCommType::A2AP2P))
      tp_gathers_first(u[Phase::B]);
    if (tp.tp_comm_overlap) {
      ring_gathers(u, L);
      bulk_wgrad_scatters(u, L.tp);
    }
    c.units.push_back(std::move(u));
  }
  if (tp.recompute_full) recompute_whole_layer(c, L);
  return c;
}

namespace {
// Multi-head latent attention's weights on one GPU of a TP group of `tp`.
double mla_attention_params(const LayerShape& s, int tp) {
  const MlaConfig& a = *s.mla;
  const double t = tp, h = s.hidden, heads = s.heads;
  const double qk = a.qk_head_dim + a.qk_pos_emb_head_dim;
  // Duplicated on every GPU of the TP group (parallel_mode 'duplicated' in
  // multi_latent_attention.py MLASelfAttention.__init__): the down-projections and the norms on
  // their latents. Column-parallel: the up-projections; row-parallel: the out-projection.
  double duplicated = h * (a.kv_lora_rank + a.qk_pos_emb_head_dim) + a.kv_lora_rank;
  double sharded =
      a.kv_lora_rank * heads * (a.qk_head_dim + a.v_head_dim) + heads * a.v_head_dim * h;
  if (a.q_lora_rank > 0) {
    duplicated += h * a.q_lora_rank + a.q_lora_rank;
    sharded += a.q_lora_rank * heads * qk;
  } else {
    sharded += h * heads * qk;  // linear_q_proj, column-parallel
  }
  return duplicated + sharded / t;
}
}  // namespace

double causal_keys_per_query(double seq, double window) {
  if (window <= 0 || window >= seq) return seq / 2;
  return (window * (window + 1) / 2 + (seq - window) * window) / seq;
}

double layer_params_per_gpu(const LayerShape& s, int tp) {
  const double t = tp;
  const double h = s.hidden;
  const double q = s.heads * s.head_dim;
  const double k = s.kv_heads * s.head_dim;
  const double fc1_width = s.gated ? 2 * s.ffn : s.ffn;
  double sharded = h * fc1_width + s.ffn * h;
  if (s.mla) {
    // MLA has no biases on its projections (DeepSeek's attention_bias false).
    sharded += mla_attention_params(s, tp) * t;
  } else {
    sharded += h * (q + 2 * k) + q * h;
    if (s.qkv_bias) sharded += q + 2 * k;
  }
  if (s.mlp_bias) sharded += fc1_width;
  double replicated = 2 * s.norm_params * h;
  if (s.proj_bias) replicated += 2 * h;  // row-parallel biases are added after the reduction
  return sharded / t + replicated;
}

double saved_input_bytes(Precision precision, double dtype_bytes) {
  switch (precision) {
    case Precision::Bf16:
      return dtype_bytes;
    case Precision::Fp8Delayed:
    case Precision::Fp8Current:
      return 1;
    case Precision::Fp8Blockwise:
      return 1 + 4.0 / 128;
    case Precision::Mxfp8:
      return 1 + 1.0 / 32;
  }
  return dtype_bytes;
}

double fp8_gather_bytes(Precision precision, double dtype_bytes, int layouts) {
  switch (precision) {
    case Precision::Bf16:
      return dtype_bytes;
    case Precision::Fp8Delayed:
    case Precision::Fp8Current:
      return 1;  // the row-wise data only; the transpose is made after the gather
    case Precision::Fp8Blockwise:
    case Precision::Mxfp8:
      return layouts * saved_input_bytes(precision, dtype_bytes);
  }
  return dtype_bytes;
}

double fp8_cast_s(const Roofline& roof, Precision precision, double elements, int tensors) {
  if (precision == Precision::Bf16 || elements <= 0) return 0;
  const bool current = precision == Precision::Fp8Current;
  return roof.memory_s((current ? 6 : 4) * elements, (current ? 2 : 1) * tensors);
}

double linear_weights_per_gpu(const LayerShape& s, int tp) {
  const double h = s.hidden;
  const double q = s.heads * s.head_dim;
  const double k = s.kv_heads * s.head_dim;
  const double fc1_width = s.gated ? 2 * s.ffn : s.ffn;
  return (h * (q + 2 * k) + q * h + h * fc1_width + s.ffn * h) / tp;
}

UnitCost embedding_cost(double tokens, double hidden, const TpSetup& tp, const Roofline& roof,
                        bool learned_positions, bool dropout) {
  const double e = tp.dtype_bytes;
  const double bytes = tokens * hidden * e;
  UnitCost u = make_unit(UnitKind::Embedding, -1, false, tp.source);
  // Lookup: read the rows of this GPU's vocabulary shard, write the (masked) output. No saved
  // activations: the backward needs only the token ids (and the dropout mask). Learned
  // positions (Megatron's LanguageModelEmbedding.forward): a second lookup and the add (read 2,
  // write 1); dropout on the sum (read, write, 1-byte mask), on the sequence shard under SP.
  const double shard = tp.sp ? tokens / tp.tp * hidden : tokens * hidden;
  const double positions = learned_positions ? 2 * bytes + 3 * bytes : 0;
  const double drop_fwd = dropout ? shard * (2 * e + 1) : 0;
  // Kernels: the lookup, with learned positions theirs and the add, the dropout.
  const double kernels = 1 + (learned_positions ? 2 : 0) + (dropout ? 1 : 0);
  u[Phase::F].time_s = roof.memory_s(2 * bytes + positions + drop_fwd, kernels);
  // W: scatter-add of the output gradient into the embedding gradient (read grad, read + write
  // the gradient rows), again for the position embedding; before them the dropout backward.
  u[Phase::W].time_s = roof.memory_s(3 * bytes + (learned_positions ? 3 * bytes : 0) + drop_fwd,
                                     1 + (learned_positions ? 1 : 0) + (dropout ? 1 : 0));
  if (dropout) u[Phase::F].alloc_bytes = u[Phase::W].free_bytes = shard;  // the mask
  // Vocab-parallel: partial outputs are reduced like a row-parallel unit's.
  row_collectives(u, tp, bytes);
  return u;
}

UnitCost head_cost(double tokens, double hidden, double vocab_per_gpu, const TpSetup& tp,
                   const Roofline& roof, bool wgrad_deferred) {
  const double t = tp.tp;
  const double e = tp.dtype_bytes;
  const double T = tokens;
  const double Ts = tp.sp ? T / t : T;
  const double h = hidden;
  const double Vt = vocab_per_gpu;
  UnitCost u = make_unit(UnitKind::Head, -1, false, tp.source);
  const double gemm = 2 * T * h * Vt;
  const double norm_in = Ts * h * e, lm_in = Ts * h * e;
  const double logits_fp32 = 4 * T * Vt;  // the vocab-parallel cross-entropy keeps fp32 softmax
  const double grad_logits = T * Vt * e;
  // Cross-entropy: read bf16 logits, write and re-read fp32 exp (10 B per logit); backward reads
  // the fp32 softmax and writes the bf16 gradient (6 B per logit).
  timed(u[Phase::F], roof, [&] {
    return roof.kernel_s(ElementwiseKernel::RmsNorm, 2 * Ts * h * e) +
           roof.linear_s(T, h, Vt, Phase::F) + roof.memory_s(10 * T * Vt);
  });
  set_flops(u[Phase::F], gemm);
  u[Phase::F].alloc_bytes = norm_in + lm_in + logits_fp32;
  timed(u[Phase::B], roof, [&] {
    return roof.memory_s(6 * T * Vt) + roof.linear_s(T, h, Vt, Phase::B) +
           roof.kernel_s(ElementwiseKernel::RmsNorm, 3 * Ts * h * e);
  });
  set_flops(u[Phase::B], gemm);
  u[Phase::B].alloc_bytes = grad_logits;
  u[Phase::B].free_bytes = norm_in + logits_fp32;
  timed(u[Phase::W], roof, [&] { return roof.linear_s(T, h, Vt, Phase::W); });
  set_flops(u[Phase::W], gemm);
  u[Phase::W].free_bytes = lm_in + grad_logits;
  column_collectives(u, tp, T * h * e);
  // Megatron's output layer (ColumnParallelLinear: no userbuffers) gathers its saved input again
  // beside the dgrad, which follows the cross-entropy's backward. With its wgrad deferred to the
  // flush (wgrad_compute false in LinearWithGradAccumulationAndAsyncCommunication.backward) the
  // backward gathers nothing; the drain's own gathers are not modelled (docs/simulator.md).
  if (wgrad_deferred) return u;
  TpSetup nccl = tp;
  nccl.tp_comm_overlap = false;
  add_sp_regather(u, nccl, T * h * e, unlogged(roof, [&] {
                    return GemmSpan{roof.memory_s(6 * T * Vt), roof.linear_s(T, h, Vt, Phase::B)};
                  }));
  return u;
}

UnitCost vision_patch_cost(double patches, double patch_inputs, double vision_hidden,
                           const TpSetup& tp, const Roofline& roof) {
  const double e = tp.dtype_bytes;
  UnitCost u = make_unit(UnitKind::VisionPatch, -1, true, tp.source);
  const double gemm = 2 * patches * patch_inputs * vision_hidden;
  const double pixels = patches * patch_inputs * e;
  timed(u[Phase::F], roof,
        [&] { return roof.linear_s(patches, patch_inputs, vision_hidden, Phase::F); });
  set_flops(u[Phase::F], gemm);
  u[Phase::F].alloc_bytes = pixels;  // W needs the pixels; no input gradient is computed
  timed(u[Phase::W], roof,
        [&] { return roof.linear_s(patches, patch_inputs, vision_hidden, Phase::W); });
  set_flops(u[Phase::W], gemm);
  u[Phase::W].free_bytes = pixels;
  return u;
}

UnitCost vision_merger_cost(double patches, double merge_area, double vision_hidden, double hidden,
                            const TpSetup& tp, const Roofline& roof) {
  const double t = tp.tp;
  const double e = tp.dtype_bytes;
  const double P = patches;
  const double merged = P / merge_area;             // LM tokens
  const double width = merge_area * vision_hidden;  // 4 x 1280 = 5120 for Qwen2-VL
  UnitCost u = make_unit(UnitKind::VisionMerger, -1, true, tp.source);
  const double fc1 = 2 * merged * width * width / t;
  const double fc2 = 2 * merged * width * hidden / t;
  const double ln_in = P * vision_hidden * e, fc1_in = P * vision_hidden * e;
  const double gelu_in = merged * width / t * e, fc2_in = gelu_in;
  const double grad_fc1 = merged * width / t * e, grad_fc2 = merged * hidden * e;
  timed(u[Phase::F], roof, [&] {
    return roof.memory_s(2 * ln_in) + roof.linear_s(merged, width, width / t, Phase::F) +
           roof.memory_s(2 * gelu_in) + roof.linear_s(merged, width / t, hidden, Phase::F);
  });
  set_flops(u[Phase::F], fc1 + fc2);
  u[Phase::F].alloc_bytes = ln_in + fc1_in + gelu_in + fc2_in;
  timed(u[Phase::B], roof, [&] {
    return roof.linear_s(merged, width / t, hidden, Phase::B) + roof.memory_s(3 * gelu_in) +
           roof.linear_s(merged, width, width / t, Phase::B) + roof.memory_s(3 * ln_in);
  });
  set_flops(u[Phase::B], fc1 + fc2);
  u[Phase::B].alloc_bytes = grad_fc1 + grad_fc2;
  u[Phase::B].free_bytes = ln_in + gelu_in;
  timed(u[Phase::W], roof, [&] {
    return roof.linear_s(merged, width, width / t, Phase::W) +
           roof.linear_s(merged, width / t, hidden, Phase::W);
  });
  set_flops(u[Phase::W], fc1 + fc2);
  u[Phase::W].free_bytes = fc1_in + fc2_in + grad_fc1 + grad_fc2;
  // Column-parallel FC1, row-parallel FC2 (no SP inside the ViT): forward All-Reduce of the
  // merged output, backward All-Reduce of the input gradient.
  add_tp_collective(u[Phase::F], tp, CollectiveKind::AllReduce, CollectivePosition::After,
                    merged * hidden * e);
  add_tp_collective(u[Phase::B], tp, CollectiveKind::AllReduce, CollectivePosition::After,
                    P * vision_hidden * e);
  return u;
}

}  // namespace braid::detail
