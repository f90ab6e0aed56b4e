#include <cuda_bf16.h>

#include "device.hpp"
#include "kernels.hpp"

namespace braid::profiler {

namespace {

using bf16 = __nv_bfloat16;
constexpr int kBlock = 256;

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide reduction through shared memory; every thread gets the result.
template <bool kMax>
__device__ float block_reduce(float v) {
  __shared__ float part[32];
  __shared__ float result;
  v = kMax ? warp_max(v) : warp_sum(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + 31) / 32;
    float w = lane < warps ? part[lane] : (kMax ? -INFINITY : 0.0f);
    w = kMax ? warp_max(w) : warp_sum(w);
    if (lane == 0) result = w;
  }
  __syncthreads();
  const float r = result;
  __syncthreads();  // part/result may be reused by the next call
  return r;
}

__device__ std::uint64_t mix(std::uint64_t x) {
  // splitmix64 finaliser: a cheap, well-distributed hash of the element index.
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void fill_kernel(bf16* dst, std::int64_t n, std::uint64_t seed, float scale) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float u = static_cast<float>(mix(seed ^ static_cast<std::uint64_t>(i)) >> 40) *
                    (1.0f / 16777216.0f);  // [0, 1)
    dst[i] = __float2bfloat16((2.0f * u - 1.0f) * scale);
  }
}

__global__ void rmsnorm_kernel(const bf16* x, const bf16* w, bf16* y, std::int64_t cols,
                               float eps) {
  const bf16* row = x + blockIdx.x * cols;
  bf16* out = y + blockIdx.x * cols;
  float ss = 0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = __bfloat162float(row[c]);
    ss += v * v;
  }
  const float inv = rsqrtf(block_reduce<false>(ss) / static_cast<float>(cols) + eps);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    out[c] = __float2bfloat16(__bfloat162float(row[c]) * inv * __bfloat162float(w[c]));
}

__global__ void rope_kernel(bf16* x, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
                            std::int64_t seq, float log2_theta) {
  const std::int64_t half = head_dim / 2;
  const std::int64_t n = tokens * heads * half;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t d = i % half;
    const std::int64_t th = i / half;  // token * heads + head
    const std::int64_t t = th / heads;
    const float pos = static_cast<float>(t % seq);
    const float inv_freq = exp2f(-(2.0f * d / head_dim) * log2_theta);
    float s, c;
    sincosf(pos * inv_freq, &s, &c);
    bf16* h = x + th * head_dim;
    const float x1 = __bfloat162float(h[d]), x2 = __bfloat162float(h[d + half]);
    h[d] = __float2bfloat16(x1 * c - x2 * s);
    h[d + half] = __float2bfloat16(x2 * c + x1 * s);
  }
}

__global__ void swiglu_kernel(const bf16* in, bf16* out, std::int64_t rows, std::int64_t cols) {
  const std::int64_t n = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols, c = i % cols;
    const float g = __bfloat162float(in[r * 2 * cols + c]);
    const float u = __bfloat162float(in[r * 2 * cols + cols + c]);
    out[i] = __float2bfloat16(g / (1.0f + __expf(-g)) * u);
  }
}

__global__ void softmax_fwd_kernel(const bf16* s, bf16* p, std::int64_t sq, std::int64_t skv,
                                   bool causal) {
  const std::int64_t row = blockIdx.x;
  const std::int64_t i = row % sq;
  const std::int64_t valid = causal ? (i + 1 < skv ? i + 1 : skv) : skv;
  const bf16* in = s + row * skv;
  bf16* out = p + row * skv;
  float m = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < valid; j += blockDim.x)
    m = fmaxf(m, __bfloat162float(in[j]));
  m = block_reduce<true>(m);
  float sum = 0;
  for (std::int64_t j = threadIdx.x; j < valid; j += blockDim.x)
    sum += __expf(__bfloat162float(in[j]) - m);
  const float inv = 1.0f / block_reduce<false>(sum);
  for (std::int64_t j = threadIdx.x; j < skv; j += blockDim.x)
    out[j] = __float2bfloat16(j < valid ? __expf(__bfloat162float(in[j]) - m) * inv : 0.0f);
}

__global__ void softmax_bwd_kernel(const bf16* p, const bf16* dp, bf16* ds, std::int64_t skv,
                                   float scale) {
  const std::int64_t row = blockIdx.x;
  const bf16* pr = p + row * skv;
  const bf16* dr = dp + row * skv;
  bf16* out = ds + row * skv;
  float dot = 0;
  for (std::int64_t j = threadIdx.x; j < skv; j += blockDim.x)
    dot += __bfloat162float(pr[j]) * __bfloat162float(dr[j]);
  dot = block_reduce<false>(dot);
  for (std::int64_t j = threadIdx.x; j < skv; j += blockDim.x) {
    const float pj = __bfloat162float(pr[j]);
    out[j] = __float2bfloat16(scale * pj * (__bfloat162float(dr[j]) - dot));
  }
}

unsigned grid_for(std::int64_t n) {
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(blocks < 65535 * 16 ? (blocks > 0 ? blocks : 1) : 65535 * 16);
}

}  // namespace

void fill_uniform_bf16(void* dst, std::int64_t n, std::uint64_t seed, float scale,
                       cudaStream_t stream) {
  fill_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<bf16*>(dst), n, seed, scale);
  BRAID_CUDA(cudaGetLastError());
}

void rmsnorm_fwd(const void* x, const void* w, void* y, std::int64_t rows, std::int64_t cols,
                 float eps, cudaStream_t stream) {
  rmsnorm_kernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(
      static_cast<const bf16*>(x), static_cast<const bf16*>(w), static_cast<bf16*>(y), cols, eps);
  BRAID_CUDA(cudaGetLastError());
}

void rope_fwd(void* x, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
              std::int64_t seq, float theta, cudaStream_t stream) {
  rope_kernel<<<grid_for(tokens * heads * head_dim / 2), kBlock, 0, stream>>>(
      static_cast<bf16*>(x), tokens, heads, head_dim, seq, log2f(theta));
  BRAID_CUDA(cudaGetLastError());
}

void swiglu_fwd(const void* in, void* out, std::int64_t rows, std::int64_t cols,
                cudaStream_t stream) {
  swiglu_kernel<<<grid_for(rows * cols), kBlock, 0, stream>>>(static_cast<const bf16*>(in),
                                                              static_cast<bf16*>(out), rows, cols);
  BRAID_CUDA(cudaGetLastError());
}

void softmax_fwd(const void* s, void* p, std::int64_t matrices, std::int64_t sq, std::int64_t skv,
                 bool causal, cudaStream_t stream) {
  softmax_fwd_kernel<<<static_cast<unsigned>(matrices * sq), kBlock, 0, stream>>>(
      static_cast<const bf16*>(s), static_cast<bf16*>(p), sq, skv, causal);
  BRAID_CUDA(cudaGetLastError());
}

void softmax_bwd(const void* p, const void* dp, void* ds, std::int64_t matrices, std::int64_t sq,
                 std::int64_t skv, float scale, cudaStream_t stream) {
  softmax_bwd_kernel<<<static_cast<unsigned>(matrices * sq), kBlock, 0, stream>>>(
      static_cast<const bf16*>(p), static_cast<const bf16*>(dp), static_cast<bf16*>(ds), skv,
      scale);
  BRAID_CUDA(cudaGetLastError());
}

}  // namespace braid::profiler
