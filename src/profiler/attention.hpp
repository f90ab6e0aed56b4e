// Attention forward and backward on one GPU, timed: cuDNN's fused flash SDPA forward through the
// cuDNN backend graph API (QK^T, scale, causal mask, softmax with saved statistics, PV) where the
// installed cuDNN finds an engine for that graph; otherwise — and always for the backward, which
// this version does not build through the backend API — the unfused path Megatron uses without
// FlashAttention: batched cuBLASLt GEMMs around a row-softmax kernel, K and V expanded to all
// query heads, P saved for the backward. Layout BHSD, bf16.
#pragma once

#include <array>
#include <optional>
#include <string>

#include <cudnn.h>

#include "gemm.hpp"

namespace braid::profiler {

struct AttentionShape {
  int batch = 1, heads = 1, kv_heads = 1, seq = 1, head_dim = 64;
  bool causal = true;
};

// The fused cuDNN forward for one shape: built once, run many times.
class CudnnSdpaForward {
 public:
  // Returns nullopt (with `why`) when cuDNN offers no engine for the graph.
  static std::optional<CudnnSdpaForward> build(cudnnHandle_t handle, const AttentionShape& s,
                                               std::string* why);
  CudnnSdpaForward(CudnnSdpaForward&&) noexcept;
  CudnnSdpaForward& operator=(CudnnSdpaForward&&) = delete;
  ~CudnnSdpaForward();
  // q [b,h,s,d], k and v [b,hk,s,d], o [b,h,s,d], stats [b,h,s] fp32.
  void run(const void* q, const void* k, const void* v, void* o, void* stats);

 private:
  CudnnSdpaForward() = default;
  cudnnHandle_t handle_ = nullptr;
  void* plan_ = nullptr;  // cudnnBackendDescriptor_t
  void* pack_ = nullptr;  // variant pack of the last run's pointers (reused while they repeat)
  std::array<const void*, 5> pack_ptrs_{};
  float scale_ = 1, neg_inf_ = 0;
  DeviceBuffer workspace_;
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

// Times forward and backward of `s`: fused cuDNN forward if available, else unfused; unfused
// backward. `impl` gets "cudnn_sdpa" or "unfused" for the forward.
struct AttentionTimes {
  double fwd_s = 0, bwd_s = 0;
  std::string fwd_impl;
};
AttentionTimes time_attention(Gemm& gemm, cudnnHandle_t cudnn, cudaStream_t stream,
                              const AttentionShape& s, const TimingOptions& opt, bool use_cudnn);

// Correctness on a tiny shape against a naive CPU reference: the unfused forward and backward
// (throws CheckError naming the kernel), and the cuDNN forward if it builds. Returns "" when the
// cuDNN forward passed, else why it is not used (no engine, or a wrong result).
std::string check_attention(Gemm& gemm, cudnnHandle_t cudnn, cudaStream_t stream);

}  // namespace braid::profiler
