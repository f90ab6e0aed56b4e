// The step after the last backward (DESIGN §4), as Megatron-Core runs it:
//   - gradient sync per bucket on the rank's dp stream (core/distributed/param_and_grad_buffer.py,
//     _ParamAndGradBucketGroup.start_grad_sync: all-reduce, or reduce-scatter with the distributed
//     optimizer). With overlap_grad_reduce a bucket starts once the W of its last unit in the
//     chunk's last microbatch is done (the backward hook register_grad_ready; schedules.py calls
//     grad_sync_func per chunk after its last microbatch); without it every bucket starts after
//     the rank's last compute op (finalize_model_grads -> finish_grad_sync), chunk by chunk;
//   - the tied embedding's gradient all-reduce between the first and the last stage's ranks,
//     after both have finished their sync (finalize_model_grads._allreduce_word_embedding_grads);
//   - the optimizer step on the compute stream, on every rank after every rank's sync (the
//     gradient norm is all-reduced over the model-parallel group before clipping and Adam);
//   - with the distributed optimizer the parameter all-gather: after the step, or, with
//     overlap_param_gather, at the start of the iteration under the forward (the steady state of
//     the next iteration's forward pre-hook), each bucket before the first F of its first unit.
// Uniform (theory) cost models have no step tail.
#include "lower_step.hpp"

#include <algorithm>
#include <tuple>
#include <vector>

namespace braid::detail {

namespace {

constexpr int kNone = -1;
constexpr int kEmbeddingLayer = -2;  // DagOp::layer of the tied-embedding all-reduce (names.cpp)

DagOp dp_op(int rank, int chunk, int stage, int bucket, CollectiveKind kind) {
  DagOp op;
  op.kind = OpKind::DpSync;
  op.stream = StreamKind::Dp;
  op.rank = static_cast<std::int16_t>(rank);
  op.chunk = static_cast<std::int16_t>(chunk);
  op.virtual_stage = static_cast<std::int16_t>(stage);
  op.mb = bucket;
  op.collective = kind;
  op.phase = Phase::W;
  return op;
}

}  // namespace

void lower_step_tail(const Schedule& s, const CostModel& cost, const StepInputs& in,
                     StepEmitter& out) {
  if (cost.uniform) return;
  const int p = s.pp;
  const int stages = s.virtual_stages();
  auto edge = [&](int from, int to) {
    if (from != kNone && to != kNone) out.edge(from, to);
  };

  // Parameter all-gather under the forward: chunk by chunk, buckets in forward order.
  if (cost.overlap_param_gather) {
    for (int r = 0; r < p; ++r)
      for (int c = 0; c < s.vpp; ++c) {
        const int k = s.virtual_stage(r, c);
        const std::vector<GradBucket>& buckets = cost.chunks[k].grad_buckets;
        for (int b = static_cast<int>(buckets.size()) - 1; b >= 0; --b) {
          if (buckets[b].gather_s <= 0) continue;
          const int op =
              out.emit(dp_op(r, c, k, b, CollectiveKind::AllGather),
                       {.duration_s = buckets[b].gather_s, .bytes = buckets[b].gather_bytes});
          edge(op, in.first_f[k][buckets[b].ready_unit]);
        }
      }
  }

  // Gradient sync, in the order the buckets become ready on the rank.
  std::vector<int> sync_done(p, kNone);  // per rank: its last sync op, else its last compute op
  for (int r = 0; r < p; ++r) {
    std::vector<std::tuple<int, int, int>> ready;  // (ready op, chunk, bucket)
    for (int c = 0; c < s.vpp; ++c) {
      const int k = s.virtual_stage(r, c);
      const std::vector<GradBucket>& buckets = cost.chunks[k].grad_buckets;
      for (int b = 0; b < static_cast<int>(buckets.size()); ++b) {
        const int after =
            cost.overlap_grad_reduce ? in.last_w[k][buckets[b].ready_unit] : in.last_compute[r];
        ready.emplace_back(after, c, b);
      }
    }
    std::stable_sort(ready.begin(), ready.end(),
                     [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
    sync_done[r] = in.last_compute[r];
    for (const auto& [after, c, b] : ready) {
      const int k = s.virtual_stage(r, c);
      const GradBucket& bucket = cost.chunks[k].grad_buckets[b];
      const int op = out.emit(dp_op(r, c, k, b, bucket.reduce),
                              {.duration_s = bucket.reduce_s, .bytes = bucket.reduce_bytes});
      edge(after, op);
      sync_done[r] = op;
    }
  }

  // Tied embedding: both ranks' all-reduce waits for both ranks' sync.
  const int first = s.rank_of(0), last = s.rank_of(stages - 1);
  if (cost.embedding_sync_bytes > 0 && first != last) {
    const int before_first = sync_done[first], before_last = sync_done[last];
    for (const int r : {first, last}) {
      const int k = r == first ? 0 : stages - 1;
      DagOp op = dp_op(r, s.chunk_of(k), k, 0, CollectiveKind::AllReduce);
      op.layer = kEmbeddingLayer;
      const int id =
          out.emit(op, {.duration_s = cost.embedding_sync_s, .bytes = cost.embedding_sync_bytes});
      edge(before_first, id);
      edge(before_last, id);
      sync_done[r] = id;
    }
  }

  // Optimizer step on every rank, after every rank's sync (the global gradient norm).
  std::vector<int> step(p, kNone);
  for (int r = 0; r < p; ++r) {
    DagOp op;
    op.kind = OpKind::Optimizer;
    op.stream = StreamKind::Compute;
    op.rank = r;
    op.phase = Phase::W;
    OpCost adam;
    for (int c = 0; c < s.vpp; ++c)
      adam.duration_s += cost.chunks[s.virtual_stage(r, c)].optimizer_s;
    step[r] = out.emit(op, adam);
    for (int q = 0; q < p; ++q) edge(sync_done[q], step[r]);
  }

  // Parameter all-gather after the step (distributed optimizer without overlap_param_gather).
  if (!cost.overlap_param_gather) {
    for (int r = 0; r < p; ++r)
      for (int c = 0; c < s.vpp; ++c) {
        const int k = s.virtual_stage(r, c);
        const std::vector<GradBucket>& buckets = cost.chunks[k].grad_buckets;
        for (int b = 0; b < static_cast<int>(buckets.size()); ++b) {
          if (buckets[b].gather_s <= 0) continue;
          const int op =
              out.emit(dp_op(r, c, k, b, CollectiveKind::AllGather),
                       {.duration_s = buckets[b].gather_s, .bytes = buckets[b].gather_bytes});
          edge(step[r], op);
        }
      }
  }
}

}  // namespace braid::detail
