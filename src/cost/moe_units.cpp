// The Mixture-of-Experts layer's units (units.hpp: moe_layer_cost; DESIGN §4b; docs/moe.md), as
// Megatron-Core's MoELayer runs them with the all-to-all dispatcher
// (megatron/core/transformer/moe/: moe_layer.py MoELayer.forward, router.py TopKRouter,
// token_dispatcher.py MoEAlltoAllTokenDispatcher, experts.py TEGroupedMLP / GroupedMLP), or with
// the all-gather one (MoEAllGatherTokenDispatcher: allgather_dispatch_cost,
// allgather_combine_cost). Notation per microbatch on one GPU: x tokens enter the MoE block (the
// layer's tokens, sharded by tp under sequence parallelism), k = top_k, E experts, ep and etp the
// expert groups, El = E / ep local experts, f = expert ffn / etp per GPU, h hidden, e bytes per
// element. Balanced routing: every rank sends x k / ep tokens to every EP rank and receives as
// many, so its experts see N = x k etp tokens (etp gathers its group's tokens), N / El each. Under
// another routing (MoeSetup::busiest_loads) the busiest EP rank sets the layer: its experts see N b
// tokens, b = MoeSetup::busiest, expert i N / El x load_i, and it receives b times a balanced
// rank's bytes in each all-to-all (docs/moe.md, "Load imbalance and capacity").
#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>
#include <utility>

#include "units.hpp"

namespace braid::detail {

namespace {

// Bytes of one routing count (int64 torch tensors in the dispatcher's preprocess).
constexpr double kCountBytes = 8;
// Bytes of one routing probability sent beside its token (fp32 probs in the dispatcher).
constexpr double kProbBytes = 4;

struct MoeTerms {
  double x = 0, k = 0, E = 0, El = 0, f = 0, h = 0, e = 0, N = 0;
  double fc1_width = 0;  // 2 f gated (SwiGLU), else f
  double sent = 0;       // bytes one rank sends in a dispatch (and receives in a combine)
  double received = 0;   // bytes the busiest EP rank receives in a dispatch (sends in a combine)
  double busiest = 1;    // received / sent
  double saved_e = 0;    // bytes per element of a GEMM input saved for the weight gradient
  bool fp8 = false;
  // Bytes per element of the tokens DeepEP's dispatch kernel sends (MoeConfig::fp8_dispatch:
  // FP8 with an FP32 scale per 128 values, fp8-blockwise's 1 + 4/128); e otherwise.
  double dispatch_e = 0;
};

MoeTerms moe_terms(const LayerShape& s, const TpSetup& tp, const MoeSetup& moe) {
  MoeTerms m;
  m.x = tp.sp ? s.tokens / tp.tp : s.tokens;
  m.k = moe.top_k;
  m.E = moe.experts;
  m.El = moe.experts / moe.ep;
  m.f = moe.expert_ffn / moe.etp;
  m.h = s.hidden;
  m.e = tp.dtype_bytes;
  m.N = m.x * m.k * moe.etp;
  m.fc1_width = s.gated ? 2 * m.f : m.f;
  m.sent = m.x * m.k * m.h * m.e;
  m.busiest = moe.busiest;
  m.received = m.sent * moe.busiest;
  m.saved_e = saved_input_bytes(tp.precision, m.e);
  m.fp8 = tp.precision != Precision::Bf16;
  m.dispatch_e = moe.fp8_dispatch ? fp8_gather_bytes(Precision::Fp8Blockwise, m.e, 1) : m.e;
  return m;
}

// One more NCCL call of the last collective's kind, group and ranks right after it (a tensor of
// `bytes` sent beside the first): the calls run one after another, so their bytes and times add
// in one record.
void add_next_call(PhaseCost& p, const LinkProfile& link, int ranks, double bytes) {
  Collective& c = p.collectives.back();
  c.bytes += bytes;
  c.time_s += collective_time_s(link, c.kind, ranks, bytes);
}

void set_gemm_flops(PhaseCost& p, double flops) {
  p.flops = flops;
  p.hw_flops = flops;
}

// The EP all-to-all of the tokens and, beside them, their routing probabilities
// (MoEAlltoAllTokenDispatcher.token_dispatch: two all_to_all calls, tokens then probs; the
// combine sends the tokens only, token_combine). Bytes per rank as nccl-tests' alltoall counts
// them: what one rank sends, here the busiest rank's receive (the all-to-all ends when it does;
// a balanced rank's sends otherwise). DeepEP's dispatch carries the probabilities in the same
// fused kernel (fused_a2a.py FusedDispatch: the top-k weights beside the tokens): one transfer.
// `wire`: bytes per element of the tokens sent (m.e, or m.dispatch_e through DeepEP's dispatch
// kernel).
void add_all_to_all(PhaseCost& p, const MoeSetup& moe, const MoeTerms& m,
                    CollectivePosition position, bool with_probs, double wire) {
  if (moe.ep <= 1) return;
  const double probs = with_probs ? m.x * m.k * kProbBytes * m.busiest : 0;
  const double received = wire == m.e ? m.received : m.received / m.e * wire;
  // The bytes that cross the network under DeepEP (docs/moe.md): one copy per remote node.
  const double remote = m.x * moe.remote_nodes * m.h * wire * m.busiest;
  const double remote_probs = m.x * moe.remote_nodes * m.k * kProbBytes * m.busiest;
  if (moe.dispatcher == MoeDispatcher::DeepEp) {
    // DeepEP's buffer: one copy per GPU the token's experts are on (MoeSetup::target_gpus of
    // its k copies), each with the token's k weights (intranode.cu / internode.cu dispatch:
    // a token row per destination rank, with recv_topk_weights beside it).
    const double copies = moe.target_gpus / m.k;  // per routed copy
    const double weights = with_probs ? m.x * moe.target_gpus * m.k * kProbBytes * m.busiest : 0;
    Collective c;
    c.kind = CollectiveKind::AllToAll;
    c.group = Group::Ep;
    c.position = position;
    c.bytes = copies * received + weights;
    const auto [time_s, source] =
        ep_all_to_all_s(moe, c.bytes, remote + (with_probs ? remote_probs : 0));
    c.time_s = time_s;
    c.source = source;
    p.collectives.push_back(c);
    return;
  }
  if (moe.ep_per_node >= moe.ep) {  // inside a node: the all-to-all of ep ranks on its link
    add_group_collective(p, Group::Ep, moe.ep, *moe.ep_link, CollectiveKind::AllToAll, position,
                         received);
    if (with_probs) add_next_call(p, *moe.ep_link, moe.ep, probs);
    return;
  }
  Collective c;
  c.kind = CollectiveKind::AllToAll;
  c.group = Group::Ep;
  c.position = position;
  c.bytes = received;
  std::tie(c.time_s, c.source) = ep_all_to_all_s(moe, received, 0);
  if (with_probs) {
    c.bytes += probs;
    c.time_s += ep_all_to_all_s(moe, probs, 0).first;
  }
  p.collectives.push_back(c);
}

// The expert-TP gather after the dispatch (dispatch_postprocess:
// gather_from_sequence_parallel_region over the expert TP group) and its mirror, the
// reduce-scatter before the combine (combine_preprocess); nccl-tests' size: the gathered buffer.
void add_etp(PhaseCost& p, const MoeSetup& moe, const MoeTerms& m, CollectiveKind kind,
             CollectivePosition position) {
  add_group_collective(p, Group::Etp, moe.etp, *moe.etp_link, kind, position, moe.etp * m.received);
}

// Megatron-Core's all-gather dispatcher (token_dispatcher.py MoEAllGatherTokenDispatcher;
// docs/moe.md, "The all-gather dispatcher"). Its collectives span the expert TP x EP group
// (tp_ep_group), G = etp x ep ranks; the expert layers number etp fastest, then ep (RankLayout),
// so that group is the EP group's consecutive ranks with their etp partners and spans nodes when
// the EP group does: the EP group's link, the expert-TP group's at ep 1. Each collective is timed
// as add_group_collective times a group on its link. X = G x tokens after the gather.
struct GatherTerms {
  int G = 1;
  double X = 0;
  const LinkProfile* link = nullptr;
};

GatherTerms gather_terms(const MoeTerms& m, const MoeSetup& moe) {
  GatherTerms g;
  g.G = moe.etp * moe.ep;
  g.X = g.G * m.x;
  g.link = moe.ep > 1 ? moe.ep_link : moe.etp_link;
  return g;
}

// One collective over the tp x ep group of the tensors of `bytes` each: NCCL calls one after
// another, so their times add.
void add_tp_ep_collective(PhaseCost& p, const GatherTerms& g, CollectiveKind kind,
                          CollectivePosition position, std::initializer_list<double> bytes) {
  if (g.G <= 1) return;
  add_group_collective(p, Group::Ep, g.G, *g.link, kind, position, *bytes.begin());
  for (const double* b = bytes.begin() + 1; b != bytes.end(); ++b)
    add_next_call(p, *g.link, g.G, *b);
}

// Bytes of one routing-map entry (a torch.bool per token and expert).
constexpr double kMapBytes = 1;

// Dispatch: the routing map (no gradient), the probabilities and the tokens all-gathered over
// tp x ep (token_dispatch: three gather_from_sequence_parallel_region calls; the tokens into
// Megatron's global memory buffer), the host sync of the local experts' token counts
// (dispatch_postprocess: tokens_per_expert brought to the host), then the permute of the copies
// routed to the local experts, in expert order (permute: read and write N b rows). The slices of
// the map and probabilities for the local experts are small and left out. Backward: the
// permute's backward (the gathered gradient zeroed and the rows added in), then the
// reduce-scatter of the tokens' and probabilities' gradients (the gather's backward). The
// gathered tensors are held while the unit runs.
void allgather_dispatch_cost(UnitCost& u, const MoeTerms& m, const MoeSetup& moe,
                             const Roofline& roof) {
  const GatherTerms g = gather_terms(m, moe);
  const double rows = m.N * m.busiest * m.h * m.e;
  const double tokens = g.X * m.h * m.e, map = g.X * m.E * kMapBytes,
               probs = g.X * m.E * kProbBytes;
  add_tp_ep_collective(u[Phase::F], g, CollectiveKind::AllGather, CollectivePosition::Before,
                       {map, probs, tokens});
  if (g.G > 1) u[Phase::F].collectives.back().time_s += moe.host_sync_s;
  timed(u[Phase::F], roof, [&] { return roof.memory_s(2 * rows); });
  u[Phase::F].alloc_bytes = map + probs + tokens;
  u[Phase::F].free_bytes = map + probs + tokens;
  timed(u[Phase::B], roof, [&] { return roof.memory_s(rows + tokens); });
  add_tp_ep_collective(u[Phase::B], g, CollectiveKind::ReduceScatter, CollectivePosition::After,
                       {probs, tokens});
  u[Phase::B].alloc_bytes = probs + tokens;
  u[Phase::B].free_bytes = probs + tokens;
}

// Combine: the unpermute of the expert outputs into the gathered shape (combine_preprocess:
// unpermute, read N b rows, write X rows), their cast to the probabilities' dtype (fp32) and the
// reduce-scatter over tp x ep in it (token_combine: reduce_scatter_to_sequence_parallel_region),
// the cast back of the rank's x rows and the residual add. Backward: the all-gather of the fp32
// gradient (the reduce-scatter's backward) between its casts, then the unpermute's backward
// (read and write N b rows).
void allgather_combine_cost(UnitCost& u, const MoeTerms& m, const MoeSetup& moe,
                            const Roofline& roof) {
  const GatherTerms g = gather_terms(m, moe);
  const double rows = m.N * m.busiest * m.h * m.e, tokens = m.x * m.h * m.e;
  const double gathered = g.X * m.h * m.e, wide = g.X * m.h * kProbBytes;
  const double mine = m.x * m.h * (m.e + kProbBytes);  // the rank's rows cast, fp32 and bf16
  timed(u[Phase::F], roof, [&] {
    return roof.memory_s(rows + gathered) + roof.memory_s(gathered + wide) + roof.memory_s(mine) +
           roof.memory_s(3 * tokens);
  });
  add_tp_ep_collective(u[Phase::F], g, CollectiveKind::ReduceScatter, CollectivePosition::After,
                       {wide});
  u[Phase::F].alloc_bytes = gathered + wide;
  u[Phase::F].free_bytes = gathered + wide;
  add_tp_ep_collective(u[Phase::B], g, CollectiveKind::AllGather, CollectivePosition::Before,
                       {wide});
  timed(u[Phase::B], roof, [&] {
    return roof.memory_s(mine) + roof.memory_s(wide + gathered) + roof.memory_s(2 * rows);
  });
  u[Phase::B].alloc_bytes = gathered + wide;
  u[Phase::B].free_bytes = gathered + wide;
}

// Router: the MoE block's norm, the router GEMM (h x E, replicated on the TP group) and the
// score function with top-k (TopKRouter.forward: gating, routing).
void router_cost(UnitCost& u, const MoeTerms& m, const TpSetup& tp, const Roofline& roof) {
  const double x = m.x, h = m.h, e = m.e, E = m.E;
  const double in = x * h * e;
  const double logits = x * E * e;
  // Softmax (or sigmoid) and top-k read the logits, write the scores and the k choices with
  // their probabilities; the backward reads the saved scores and writes the logits' gradient.
  const double topk_bytes = 2 * logits + x * m.k * (kCountBytes + kProbBytes);
  const double gemm = 2 * x * h * E;
  const double main_grad = tp.main_grad_bytes * h * E;
  timed(u[Phase::F], roof, [&] {
    return roof.kernel_s(ElementwiseKernel::RmsNorm, 2 * in) + roof.linear_s(x, h, E, Phase::F) +
           roof.memory_s(topk_bytes, 2);
  });
  set_gemm_flops(u[Phase::F], gemm);
  u[Phase::F].alloc_bytes = in + in + logits;  // norm input, router GEMM input, scores
  timed(u[Phase::B], roof, [&] {
    return roof.memory_s(3 * logits) + roof.linear_s(x, h, E, Phase::B) +
           roof.kernel_s(ElementwiseKernel::RmsNorm, 3 * in) + roof.memory_s(3 * in);
  });
  set_gemm_flops(u[Phase::B], gemm);
  u[Phase::B].alloc_bytes = logits;  // the logits' gradient, for the weight gradient
  u[Phase::B].free_bytes = in + logits;
  timed(u[Phase::W], roof, [&] {
    return roof.linear_s(x, h, E, Phase::W) + roof.memory_s(2 * in) +
           roof.memory_s(main_grad, tp.main_grad_fused ? 0 : 1);
  });
  set_gemm_flops(u[Phase::W], gemm);
  u[Phase::W].free_bytes = in + logits;
}

// FP8 dispatch's cast of the x tokens (or their gradient) before DeepEP's dispatch kernel sends
// them: one memory-bound pass, reading bf16 and writing FP8 with its scales.
double fp8_quantize_s(const MoeTerms& m, const Roofline& roof) {
  return roof.memory_s(m.x * m.h * (m.e + m.dispatch_e));
}

// Dispatch: the counts all-gathered over the expert TP x EP group and brought to the host
// (preprocess: gather_from_sequence_parallel_region over tp_ep_group, then the device-to-host
// copy the split sizes need, synchronised "before_ep_alltoall"), the permute of the tokens into
// expert order (dispatch_preprocess: permute), the all-to-all over ep (token_dispatch), the
// expert-TP all-gather. Backward: the mirror, a reduce-scatter and a combine all-to-all before
// the permute's backward (a scatter-add of the k copies).
void dispatch_cost(UnitCost& u, const MoeTerms& m, const MoeSetup& moe, const Roofline& roof) {
  const double tokens = m.x * m.h * m.e;
  const int tp_ep = moe.etp * moe.ep;
  add_group_collective(u[Phase::F], Group::Ep, tp_ep, *moe.ep_link, CollectiveKind::AllGather,
                       CollectivePosition::Before, tp_ep * m.E * kCountBytes);
  if (tp_ep > 1) u[Phase::F].collectives.back().time_s += moe.host_sync_s;
  timed(u[Phase::F], roof, [&] {
    if (!moe.fp8_dispatch) return roof.memory_s(tokens + m.sent);
    // FP8 dispatch: the tokens cast to FP8 with their scales first, then permuted in FP8.
    const double wire = m.dispatch_e / m.e;
    return fp8_quantize_s(m, roof) + roof.memory_s((tokens + m.sent) * wire);
  });
  add_all_to_all(u[Phase::F], moe, m, CollectivePosition::After, true, m.dispatch_e);
  add_etp(u[Phase::F], moe, m, CollectiveKind::AllGather, CollectivePosition::After);
  add_etp(u[Phase::B], moe, m, CollectiveKind::ReduceScatter, CollectivePosition::Before);
  add_all_to_all(u[Phase::B], moe, m, CollectivePosition::Before, false, m.e);
  timed(u[Phase::B], roof, [&] { return roof.memory_s(m.sent + tokens); });
}

// Experts: the sort by local expert (permute 2 in dispatch_postprocess, with El > 1), the grouped
// GEMM of the El local experts on N / El tokens each (TEGroupedMLP: fc1, the activation, fc2),
// the sort back (combine_preprocess). F, B (dgrad) and W (wgrad) as the dense MLP splits them.
// The busiest EP rank's: N b tokens, expert i on N / El x load_i of them. Under an FP8 recipe
// the grouped GEMMs run at the FP8 peak after Transformer Engine's casts: _GroupedLinear.forward
// quantizes its input's splits (grouped_linear.py: split_quantize, one kernel for all of them),
// fc1's and fc2's, and its backward fc2's and fc1's output gradients, each cast as the dense
// layers' (fp8_cast_s). With DeepEP's FP8 dispatch the tokens arrive in FP8 and so does fc2's
// output gradient (the combine's backward sends it through the dispatch kernel): those two feed the
// grouped GEMMs as they are (DeepSeek-V3 report 3.3.3), after the dispatch's own cast
// (fp8_quantize_s).
void experts_cost(UnitCost& u, const MoeTerms& m, const MoeSetup& moe, const TpSetup& tp,
                  const LayerShape& s, const Roofline& roof) {
  const double N = m.N * m.busiest, h = m.h, e = m.e, f = m.f, El = m.El, w1 = m.fc1_width;
  const double per_expert = m.N / El;
  const std::vector<double>& loads = moe.busiest_loads;
  const bool even =
      std::all_of(loads.begin(), loads.end(), [&](double l) { return l == loads.front(); });
  const double even_load = loads.empty() ? 1.0 : loads.front();
  // The all-gather dispatcher's permute already orders the copies by local expert, and its
  // unpermute restores the token order: no sort of their own.
  const bool sorts = El > 1 && moe.dispatcher != MoeDispatcher::AllGather;
  const double sort_s = sorts ? roof.memory_s(2 * N * h * e) : 0;
  // The grouped GEMM as El GEMMs, one after another, each of its expert's tokens (an expert
  // with none launches no GEMM).
  auto grouped = [&](double in, double out, Phase phase) {
    if (even)
      return even_load > 0 ? El * roof.linear_s(per_expert * even_load, in, out, phase, m.fp8)
                           : 0.0;
    double t = 0;
    for (const double l : loads)
      if (l > 0) t += roof.linear_s(per_expert * l, in, out, phase, m.fp8);
    return t;
  };
  const double act_in = N * w1 * e, fc2_in = N * f * e;
  auto act_s = [&](double bytes) {
    return s.gated ? roof.kernel_s(ElementwiseKernel::SwiGLU, bytes) : roof.memory_s(bytes);
  };
  // Model FLOPs: the tokens kept, a mean over the EP ranks (count_iteration multiplies one GPU's
  // by the GPUs); hardware FLOPs: the tokens computed, padding included.
  const double flops = (2 * m.N * h * w1 + 2 * m.N * f * h) * moe.kept;
  const double hw_flops = (2 * m.N * h * w1 + 2 * m.N * f * h) * moe.computed;
  auto set_flops = [&](PhaseCost& p) {
    p.flops = flops;
    p.hw_flops = hw_flops;
  };
  const double fc1_saved = N * h * m.saved_e, fc2_saved = N * f * m.saved_e;
  const double grad_fc2 = N * h * e, grad_fc1 = N * w1 * e;
  auto cast_s = [&](double elements) { return fp8_cast_s(roof, tp.precision, elements, 1); };
  // fc1's input and fc2's output gradient: N h values each, already FP8 when DeepEP's FP8
  // dispatch delivered them.
  auto routed_cast_s = [&] { return moe.fp8_dispatch ? 0.0 : cast_s(N * h); };
  timed(u[Phase::F], roof, [&] {
    return sort_s + routed_cast_s() + grouped(h, w1, Phase::F) + act_s(act_in + fc2_in) +
           cast_s(N * f) + grouped(f, h, Phase::F) + sort_s;
  });
  set_flops(u[Phase::F]);
  u[Phase::F].alloc_bytes = fc1_saved + act_in + fc2_saved;
  timed(u[Phase::B], roof, [&] {
    return sort_s + routed_cast_s() + grouped(f, h, Phase::B) + act_s(fc2_in + 2 * act_in) +
           cast_s(N * w1) + grouped(h, w1, Phase::B) + sort_s;
  });
  set_flops(u[Phase::B]);
  u[Phase::B].alloc_bytes = grad_fc2 + grad_fc1;
  u[Phase::B].free_bytes = act_in;
  const double weights = El * (h * w1 + f * h);
  timed(u[Phase::W], roof, [&] {
    return grouped(h, w1, Phase::W) + grouped(f, h, Phase::W) +
           roof.memory_s(tp.main_grad_bytes * weights, tp.main_grad_fused ? 0 : 1);
  });
  set_flops(u[Phase::W]);
  u[Phase::W].free_bytes = fc1_saved + fc2_saved + grad_fc2 + grad_fc1;
}

// Combine: the expert-TP reduce-scatter, the all-to-all back over ep (token_combine), the
// unpermute that weighs the k copies by their probabilities and sums them (combine_postprocess:
// unpermute), the residual add. Backward: the unpermute's backward, then a dispatch all-to-all
// and the expert-TP all-gather.
void combine_cost(UnitCost& u, const MoeTerms& m, const MoeSetup& moe, const Roofline& roof) {
  const double tokens = m.x * m.h * m.e;
  add_etp(u[Phase::F], moe, m, CollectiveKind::ReduceScatter, CollectivePosition::Before);
  add_all_to_all(u[Phase::F], moe, m, CollectivePosition::Before, false, m.e);
  timed(u[Phase::F], roof,
        [&] { return roof.memory_s(m.sent + tokens) + roof.memory_s(3 * tokens); });
  u[Phase::F].alloc_bytes = m.sent;  // the expert outputs, for the probabilities' gradient
  // The output gradient goes to the experts through DeepEP's dispatch kernel: in FP8 with
  // fp8_dispatch, cast first.
  timed(u[Phase::B], roof, [&] {
    return roof.memory_s(tokens + 2 * m.sent) + (moe.fp8_dispatch ? fp8_quantize_s(m, roof) : 0);
  });
  u[Phase::B].free_bytes = m.sent;
  add_all_to_all(u[Phase::B], moe, m, CollectivePosition::After, false, m.dispatch_e);
  add_etp(u[Phase::B], moe, m, CollectiveKind::AllGather, CollectivePosition::After);
}

// The shared experts (shared_experts.py SharedExpertMLP: a dense MLP of width S = count x width,
// column-parallel fc1 and row-parallel fc2 over the dense tp), run on the block's normed input,
// their output added to the routed one: by default serially, before the routed path
// (MoELayer.forward: shared_experts_compute before route); with --moe-shared-expert-overlap on a
// stream of their own (token_dispatcher.py MoEAlltoAllTokenDispatcher: fc1 and its activation
// launched right after the tokens' all-to-all in token_dispatch, fc2 and its reduction after the
// combine's all-to-all in token_combine, the output added after the unpermute in
// combine_postprocess; the flex dispatcher alike in its dispatch and combine), the units then
// placed Dispatch, PreMLP, Experts, MLP, Combine, each beside its all-to-all (UnitCost::
// beside_all_to_all). The backward mirrors it: autograd runs the combine's all-to-all backward
// first and fc2's backward beside it, and fc1's backward beside the dispatch's all-to-all
// backward after the routed experts' (SharedExpertMLP.linear_fc1_forward_and_act and
// linear_fc2_forward order the backward by the tensors' sequence numbers). Two units, PreMLP (fc1)
// and MLP (the activation, fc2 and the add), with the dense MLP's TP collectives (tp_collectives:
// TE's column and row linears, FP8 gathers included): under SP the input's all-gather before fc1
// and the output's reduce-scatter after fc2, else an all-reduce of fc2's output and of fc1's input
// gradient; under SP fc1's backward gathers its saved input again beside its dgrad
// (sp_regather_dgrad).
void shared_fc1_cost(UnitCost& u, const MoeTerms& m, const TpSetup& tp, const LayerShape& s,
                     const Roofline& roof, double width) {
  const double t = tp.tp, T = tp.sp ? m.x * t : m.x, h = m.h, e = m.e;
  const double w1 = (s.gated ? 2 * width : width) / t;  // gate and up under SwiGLU
  const double in_saved = m.x * h * m.saved_e, grad_out = T * w1 * e;
  const double gemm = 2 * T * h * w1;
  timed(u[Phase::F], roof, [&] { return roof.linear_s(T, h, w1, Phase::F, m.fp8); });
  set_gemm_flops(u[Phase::F], gemm);
  u[Phase::F].alloc_bytes = in_saved;
  timed(u[Phase::B], roof, [&] { return roof.linear_s(T, h, w1, Phase::B, m.fp8); });
  set_gemm_flops(u[Phase::B], gemm);
  u[Phase::B].alloc_bytes = grad_out;
  timed(u[Phase::W], roof, [&] {
    return roof.linear_s(T, h, w1, Phase::W, m.fp8) +
           roof.memory_s(tp.main_grad_bytes * h * w1, tp.main_grad_fused ? 0 : 1);
  });
  set_gemm_flops(u[Phase::W], gemm);
  u[Phase::W].free_bytes = in_saved + grad_out;
  tp_collectives(TpSplit::Column, u, tp, T * h * e);
  sp_regather_dgrad(u, tp, T * h * e);
}

void shared_fc2_cost(UnitCost& u, const MoeTerms& m, const TpSetup& tp, const LayerShape& s,
                     const Roofline& roof, double width) {
  const double t = tp.tp, T = tp.sp ? m.x * t : m.x, h = m.h, e = m.e;
  const double f = width / t, w1 = s.gated ? 2 * f : f;
  const double act_in = T * w1 * e, fc2_in = T * f * e, fc2_saved = T * f * m.saved_e;
  const double grad_out = T * h * e, add = 3 * m.x * h * e;
  auto act_s = [&](double bytes) {
    return s.gated ? roof.kernel_s(ElementwiseKernel::SwiGLU, bytes) : roof.memory_s(bytes);
  };
  const double gemm = 2 * T * f * h;
  timed(u[Phase::F], roof, [&] {
    return act_s(act_in + fc2_in) + roof.linear_s(T, f, h, Phase::F, m.fp8) + roof.memory_s(add);
  });
  set_gemm_flops(u[Phase::F], gemm);
  u[Phase::F].alloc_bytes = act_in + fc2_saved;
  timed(u[Phase::B], roof,
        [&] { return roof.linear_s(T, f, h, Phase::B, m.fp8) + act_s(fc2_in + 2 * act_in); });
  set_gemm_flops(u[Phase::B], gemm);
  u[Phase::B].alloc_bytes = grad_out;
  u[Phase::B].free_bytes = act_in;
  timed(u[Phase::W], roof, [&] {
    return roof.linear_s(T, f, h, Phase::W, m.fp8) +
           roof.memory_s(tp.main_grad_bytes * f * h, tp.main_grad_fused ? 0 : 1);
  });
  set_gemm_flops(u[Phase::W], gemm);
  u[Phase::W].free_bytes = fc2_saved + grad_out;
  tp_collectives(TpSplit::Row, u, tp, T * h * e);
}

// Full recomputation: the MoE units' forward runs again before the layer's backward, saving
// what B and W then free; the layer keeps only its input (on its first unit, PreAttn).
void recompute_units(LayerCost& c, std::size_t from) {
  for (std::size_t i = from; i < c.units.size(); ++i) {
    PhaseCost& f = c.units[i][Phase::F];
    c.units[i].recompute = f;
    c.units[i].recompute.flops = 0;
    f.alloc_bytes = f.free_bytes;  // what the unit frees itself (a buffer held while it runs)
  }
}

}  // namespace

LayerCost moe_layer_cost(const LayerShape& s, const TpSetup& tp, const MoeSetup& moe,
                         const Roofline& roof, int layer) {
  // The attention half is the dense layer's (PreAttn, Attn), timed first as layer_cost times it.
  LayerCost dense = layer_cost(s, tp, roof, layer, false);
  LayerCost c;
  c.half = 2;
  c.units.assign(dense.units.begin(), dense.units.begin() + 2);
  const MoeTerms m = moe_terms(s, tp, moe);
  const bool shared = moe.shared_ffn > 0;
  // Serial: the shared experts before the routed path. Overlapped: fc1 beside the dispatch's
  // all-to-all, fc2 beside the combine's, each off the data flow (UnitCost::beside_all_to_all).
  static constexpr std::array<UnitKind, 6> serial = {UnitKind::Router,  UnitKind::PreMLP,
                                                     UnitKind::MLP,     UnitKind::Dispatch,
                                                     UnitKind::Experts, UnitKind::Combine};
  static constexpr std::array<UnitKind, 6> overlapped = {UnitKind::Router, UnitKind::Dispatch,
                                                         UnitKind::PreMLP, UnitKind::Experts,
                                                         UnitKind::MLP,    UnitKind::Combine};
  const bool gather = moe.dispatcher == MoeDispatcher::AllGather;
  for (const UnitKind kind : moe.shared_overlap ? overlapped : serial) {
    if ((kind == UnitKind::PreMLP || kind == UnitKind::MLP) && !shared) continue;
    UnitCost u;
    u.kind = kind;
    u.layer = layer;
    u.beside_all_to_all = moe.shared_overlap && (kind == UnitKind::PreMLP || kind == UnitKind::MLP);
    for (auto& p : u.phase) p.source = tp.source;
    if (kind == UnitKind::Router) router_cost(u, m, tp, roof);
    if (kind == UnitKind::PreMLP) shared_fc1_cost(u, m, tp, s, roof, moe.shared_ffn);
    if (kind == UnitKind::MLP) shared_fc2_cost(u, m, tp, s, roof, moe.shared_ffn);
    if (kind == UnitKind::Dispatch && gather) allgather_dispatch_cost(u, m, moe, roof);
    if (kind == UnitKind::Dispatch && !gather) dispatch_cost(u, m, moe, roof);
    if (kind == UnitKind::Experts) experts_cost(u, m, moe, tp, s, roof);
    if (kind == UnitKind::Combine && gather) allgather_combine_cost(u, m, moe, roof);
    if (kind == UnitKind::Combine && !gather) combine_cost(u, m, moe, roof);
    if (kind == UnitKind::Dispatch) c.dispatch = static_cast<int>(c.units.size());
    if (kind == UnitKind::Combine) c.combine = static_cast<int>(c.units.size());
    c.units.push_back(std::move(u));
  }
  if (tp.recompute_full) recompute_units(c, 2);
  return c;
}

namespace {

// The expected bins (nodes or GPUs) that a token's k distinct choices reach, drawn from `bins`
// bins of `per_bin` experts each, C = bins x per_bin candidates: a bin is missed with probability
// C(C - per_bin, k) / C(C, k), a product of k ratios, 0 once the other bins hold fewer than k.
double bins_reached(double bins, double per_bin, double top_k) {
  const double C = bins * per_bin;
  double missed = 1;
  for (int i = 0; i < static_cast<int>(top_k); ++i)
    missed *= std::max(0.0, (C - per_bin - i) / (C - i));
  return bins * (1 - missed);
}

// The nodes a token may use: `limit` of them under node-limited routing, else all.
double nodes_allowed(int nodes, int limit) { return limit > 0 && limit < nodes ? limit : nodes; }

}  // namespace

double ep_remote_nodes(double experts, double top_k, int nodes, int limit) {
  if (nodes <= 1) return 0;
  const double n = nodes;
  return (n - 1) / n * bins_reached(nodes_allowed(nodes, limit), experts / n, top_k);
}

double ep_target_gpus(double experts, double top_k, int ep, int nodes, int limit) {
  const int n = std::max(1, nodes);
  const double gpus_per_node = static_cast<double>(ep) / n;
  return bins_reached(nodes_allowed(n, limit) * gpus_per_node, experts / ep, top_k);
}

std::pair<double, Source> ep_all_to_all_s(const MoeSetup& moe, double bytes, double remote_bytes) {
  const int g = std::min(moe.ep_per_node, moe.ep), nodes = moe.ep / g;
  const LinkProfile& intra = *moe.ep_intra_link;
  const LinkProfile& inter = *moe.ep_inter_link;
  // NVLink: an all-to-all of `ranks` GPUs on a buffer of `size` moves (ranks - 1) / ranks of it,
  // timed as inside a node (collective_time_s).
  auto nvlink = [&](int ranks, double size) {
    return std::pair{collective_time_s(intra, CollectiveKind::AllToAll, ranks, size),
                     collective_source(intra, CollectiveKind::AllToAll, ranks)};
  };
  // The network: every byte that leaves the node leaves through the GPU's own NIC, point to
  // point (the all-to-all is a send and a receive per peer in one NCCL group, as PyTorch's
  // all_to_all_single and nccl-tests' src/alltoall.cu post them; DeepEP's RDMA puts go to the
  // same GPU index on each node, internode.cu): the link's latency and its per-GPU,
  // per-direction p2p rate. The link's bus bandwidth is not used: it is an all-reduce's, which
  // NCCL's tree and SHARP algorithms take above the NIC's rate.
  auto network = [&](double moved) {
    const double rate =
        inter.p2p_bandwidth_Bps > 0 ? inter.p2p_bandwidth_Bps : inter.bus_bandwidth_Bps;
    return std::pair{moved > 0 ? inter.latency_s + moved / rate : 0.0, Source::SpecDerived};
  };
  // Both parts run at once (NCCL posts every peer's send and receive in one group; DeepEP
  // forwards over NVLink while RDMA receives): the slower sets the time.
  auto slower = [](std::pair<double, Source> a, std::pair<double, Source> b) {
    return b.first > a.first ? b : a;
  };
  if (moe.dispatcher == MoeDispatcher::DeepEp) {
    // NVLink: every copy whose expert is not on the GPU it reached the node on, (g - 1) / g of
    // them: an all-to-all of g ranks on the whole buffer. The network: one copy per remote node.
    const auto inside = nvlink(g, bytes);
    return nodes <= 1 ? inside : slower(inside, network(remote_bytes));
  }
  // NCCL's alltoall: of the buffer, 1 / ep stays on the rank, (g - 1) / ep goes over NVLink to
  // the rank's node (an all-to-all of g ranks on 1 / nodes of the buffer moves
  // (g - 1) / g x g / ep of it) and (ep - g) / ep over the network.
  if (nodes <= 1) return nvlink(g, bytes);
  const double ep = moe.ep;
  return slower(nvlink(g, bytes / nodes), network(bytes * (ep - g) / ep));
}

MoeLoad moe_load(const std::vector<double>& loads, int ep, double tokens, double top_k,
                 std::optional<double> capacity_factor, bool pad_to_capacity) {
  MoeLoad out;
  const std::size_t E = loads.size(), El = E / static_cast<std::size_t>(ep);
  const double choices = tokens * top_k;
  const double balanced = choices / static_cast<double>(E);  // one rank's choices per expert
  // Relative to balanced throughout, so that a balanced routing stays exactly 1.
  std::vector<double> computed = loads;
  double kept = 0, dropped = 0, padded = 0;
  for (std::size_t i = 0; i < E; ++i) {
    double keep = loads[i];
    if (capacity_factor) {
      // get_capacity(num_tokens = tokens x topk, num_experts, factor); no drop when the capacity
      // exceeds the tokens (apply_router_token_dropping), the padding then every token.
      const double capacity = std::ceil(choices / static_cast<double>(E) * *capacity_factor);
      if (capacity <= tokens) {
        keep = std::min(loads[i], capacity / balanced);
        computed[i] = pad_to_capacity ? capacity / balanced : keep;
      } else if (pad_to_capacity) {
        computed[i] = tokens / balanced;
      }
    }
    kept += keep;
    dropped += loads[i] - keep;
    padded += computed[i] - keep;
  }
  const auto n = static_cast<double>(E);
  out.kept = kept / n;
  out.dropped_fraction = dropped / n;
  out.padded_fraction = padded / n;
  double total = 0;
  for (const double c : computed) total += c;
  out.computed = total / static_cast<double>(E);
  out.busiest = -1;
  for (std::size_t r = 0; r < static_cast<std::size_t>(ep); ++r) {
    double sum = 0;
    for (std::size_t i = r * El; i < (r + 1) * El; ++i) sum += computed[i];
    if (sum / static_cast<double>(El) > out.busiest) {
      out.busiest = sum / static_cast<double>(El);
      out.busiest_rank = static_cast<int>(r);
      out.busiest_loads.assign(computed.begin() + static_cast<std::ptrdiff_t>(r * El),
                               computed.begin() + static_cast<std::ptrdiff_t>((r + 1) * El));
    }
  }
  return out;
}

double moe_dense_params_per_gpu(const LayerShape& s, const MoeSetup& moe, int tp) {
  LayerShape attention = s;
  attention.ffn = 0;  // the MLP is the experts'
  attention.mlp_bias = false;
  // + the router, + the shared experts (sharded over the dense tp)
  const double w1 = s.gated ? 2 * moe.shared_ffn : moe.shared_ffn;
  return layer_params_per_gpu(attention, tp) + s.hidden * moe.experts +
         (s.hidden * w1 + moe.shared_ffn * s.hidden) / tp;
}

double moe_expert_params_per_gpu(const LayerShape& s, const MoeSetup& moe) {
  const double f = moe.expert_ffn / moe.etp;
  const double w1 = s.gated ? 2 * f : f;
  return moe.experts / moe.ep * (s.hidden * w1 + f * s.hidden);
}

}  // namespace braid::detail
