// braid-profile's own kernels (kernels.cu): the memory-bound kernels of the units — RMSNorm,
// RoPE (rotate-half, Llama/Qwen2 convention), SwiGLU — and the row softmax forward/backward the
// unfused attention fallback needs, plus a device-side random fill. Simple and correct rather
// than tuned: their measured bandwidth is what a plain framework kernel reaches. All tensors are
// bf16, row-major, contiguous; every launcher enqueues on `stream` and returns.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace braid::profiler {

// Uniform values in [-scale, scale), reproducible from `seed`.
void fill_uniform_bf16(void* dst, std::int64_t n, std::uint64_t seed, float scale,
                       cudaStream_t stream);
// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w[:]
void rmsnorm_fwd(const void* x, const void* w, void* y, std::int64_t rows, std::int64_t cols,
                 float eps, cudaStream_t stream);
// In place on x[tokens, heads, head_dim]; token t has position t % seq; frequencies
// theta^(-2i/head_dim); the first and second halves of each head are rotated together.
void rope_fwd(void* x, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
              std::int64_t seq, float theta, cudaStream_t stream);
// out[r, c] = silu(in[r, c]) * in[r, cols + c]; in is [rows, 2 cols] (gate, then up).
void swiglu_fwd(const void* in, void* out, std::int64_t rows, std::int64_t cols,
                cudaStream_t stream);
// Row softmax of `matrices` score matrices [sq, skv] (already scaled); with `causal`, row i keeps
// columns j <= i. May run in place (s == p).
void softmax_fwd(const void* s, void* p, std::int64_t matrices, std::int64_t sq, std::int64_t skv,
                 bool causal, cudaStream_t stream);
// ds = scale * p * (dp - rowsum(p * dp)), the softmax backward folded with the score scale.
void softmax_bwd(const void* p, const void* dp, void* ds, std::int64_t matrices, std::int64_t sq,
                 std::int64_t skv, float scale, cudaStream_t stream);

}  // namespace braid::profiler
