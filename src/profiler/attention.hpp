// Attention forward and backward on one GPU, timed: cuDNN's fused flash SDPA forward and backward
// built through the cuDNN backend graph API (the graphs the cuDNN frontend builds: QK^T, scale,
// causal mask, softmax with saved log-sum-exp, PV; and its backward) where the installed cuDNN
// finds an engine and the result passes its check; otherwise the unfused path Megatron uses
// without FlashAttention: batched cuBLASLt GEMMs around a row-softmax kernel, K and V expanded to
// all query heads, P saved for the backward. Layout BHSD, bf16.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cudnn.h>

#include "gemm.hpp"

namespace braid::profiler {

struct AttentionShape {
  int batch = 1, heads = 1, kv_heads = 1, seq = 1, head_dim = 64;
  bool causal = true;
};

// cuDNN's fused flash attention for one shape, forward or backward, built once through the
// backend graph API and run many times. The backward is built for as many KV heads as query
// heads (K and V expanded, as the unfused path does); the forward takes GQA's kv_heads.
class CudnnSdpa {
 public:
  // nullptr (with `why`) when cuDNN offers no engine for the graph.
  static std::unique_ptr<CudnnSdpa> forward(cudnnHandle_t handle, const AttentionShape& s,
                                            std::string* why);
  static std::unique_ptr<CudnnSdpa> backward(cudnnHandle_t handle, const AttentionShape& s,
                                             std::string* why);
  ~CudnnSdpa();
  CudnnSdpa(const CudnnSdpa&) = delete;
  CudnnSdpa& operator=(const CudnnSdpa&) = delete;
  // Forward: {q, k, v, o, stats}; backward: {q, k, v, o, d_o, stats, dq, dk, dv}. Q, O, dO, dQ
  // [b,h,s,d] bf16; K, V (and dK, dV) [b,hk,s,d]; stats [b,h,s] fp32 (log-sum-exp).
  void run(const std::vector<void*>& tensors);

 private:
  CudnnSdpa() = default;
  struct Graph;
  bool finish(cudnnHandle_t handle, Graph& g, std::string* why);
  cudnnHandle_t handle_ = nullptr;
  void* plan_ = nullptr;  // cudnnBackendDescriptor_t
  void* pack_ = nullptr;  // variant pack of the last run's pointers (reused while they repeat)
  std::vector<std::int64_t> uids_;  // the caller's tensors, then scalars and scratch
  std::vector<void*> fixed_;        // pointers of the scalars and scratch buffers
  std::vector<void*> pack_ptrs_;
  float scale_ = 1, one_ = 1, neg_inf_ = 0;
  DeviceBuffer workspace_, softmax_sum_, dq_accum_;
};

// The unfused path for one shape: scratch sized so the score matrices of a chunk of heads fit in
// `score_budget_bytes`.
class UnfusedAttention {
 public:
  UnfusedAttention(Gemm& gemm, cudaStream_t stream, const AttentionShape& s,
                   double score_budget_bytes);
  // q, k, v, o, do_: [b*h, s, d] (K, V expanded); dq, dk, dv likewise.
  void forward(const void* q, const void* k, const void* v, void* o);
  void backward(const void* q, const void* k, const void* v, const void* d_o, void* dq, void* dk,
                void* dv);

 private:
  Gemm& gemm_;
  cudaStream_t stream_;
  AttentionShape s_;
  std::int64_t chunk_ = 1;  // matrices per chunk
  DeviceBuffer p_, dp_;     // saved probabilities, score gradients
};

// Times forward and backward of `s`, each fused (cuDNN) when allowed and cuDNN has an engine
// for the shape, else unfused; fwd_impl / bwd_impl say which ("cudnn_sdpa" or "unfused").
struct AttentionTimes {
  double fwd_s = 0, bwd_s = 0;
  std::string fwd_impl, bwd_impl;
};
struct FusedStatus {
  std::string fwd_problem, bwd_problem;  // "" when the fused path passed its check
};
AttentionTimes time_attention(Gemm& gemm, cudnnHandle_t cudnn, cudaStream_t stream,
                              const AttentionShape& s, const TimingOptions& opt,
                              const FusedStatus& fused);

// Correctness on a tiny shape against a naive CPU reference: the unfused forward and backward
// (throws CheckError naming the kernel), and the cuDNN forward and backward if they build.
// Returns why each fused path is not used ("" when it passed).
FusedStatus check_attention(Gemm& gemm, cudnnHandle_t cudnn, cudaStream_t stream);

}  // namespace braid::profiler
