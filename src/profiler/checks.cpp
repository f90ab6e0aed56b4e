#include "checks.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "bf16.hpp"
#include "device.hpp"
#include "kernels.hpp"

namespace braid::profiler {

namespace {

// Each output may differ from the reference by its own bf16 rounding (2^-8 relative) plus a
// small absolute slack for values near zero.
void expect(const char* kernel, const std::vector<float>& got, const std::vector<double>& want) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double tol = 1e-2 * std::fabs(want[i]) + 1e-2;
    if (!(std::fabs(got[i] - want[i]) <= tol))
      throw CheckError(std::string(kernel) + ": element " + std::to_string(i) + " is " +
                       std::to_string(got[i]) + ", the CPU reference gives " +
                       std::to_string(want[i]));
  }
}

}  // namespace

void check_elementwise(cudaStream_t stream) {
  {  // RMSNorm, a width that is not a multiple of the block
    const int rows = 5, cols = 1000;
    DeviceBuffer x(2 * rows * cols), w(2 * cols), y(2 * rows * cols);
    fill_uniform_bf16(x.get(), rows * cols, 31, 2.0f, stream);
    fill_uniform_bf16(w.get(), cols, 32, 1.0f, stream);
    rmsnorm_fwd(x.get(), w.get(), y.get(), rows, cols, 1e-6f, stream);
    BRAID_CUDA(cudaStreamSynchronize(stream));
    const auto hx = bf16_to_host(x), hw = bf16_to_host(w), hy = bf16_to_host(y);
    std::vector<double> ref(hx.size());
    for (int r = 0; r < rows; ++r) {
      double ss = 0;
      for (int c = 0; c < cols; ++c) ss += double{hx[r * cols + c]} * hx[r * cols + c];
      const double inv = 1.0 / std::sqrt(ss / cols + 1e-6);
      for (int c = 0; c < cols; ++c) ref[r * cols + c] = hx[r * cols + c] * inv * hw[c];
    }
    expect("rmsnorm", hy, ref);
  }
  {  // RoPE: 6 tokens of 2 sequences of 3, 3 heads of 64, theta 1e6 (Qwen2)
    const int tokens = 6, heads = 3, d = 64, seq = 3;
    const float theta = 1e6f;
    DeviceBuffer x(2 * tokens * heads * d);
    fill_uniform_bf16(x.get(), tokens * heads * d, 33, 1.0f, stream);
    BRAID_CUDA(cudaStreamSynchronize(stream));
    const auto before = bf16_to_host(x);
    rope_fwd(x.get(), tokens, heads, d, seq, theta, stream);
    BRAID_CUDA(cudaStreamSynchronize(stream));
    const auto after = bf16_to_host(x);
    std::vector<double> ref(before.size());
    for (int t = 0; t < tokens; ++t)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < d / 2; ++i) {
          const std::size_t base = (std::size_t{1} * t * heads + h) * d;
          const double angle = (t % seq) * std::pow(double{theta}, -2.0 * i / d);
          const double x1 = before[base + i], x2 = before[base + i + d / 2];
          ref[base + i] = x1 * std::cos(angle) - x2 * std::sin(angle);
          ref[base + i + d / 2] = x2 * std::cos(angle) + x1 * std::sin(angle);
        }
    expect("rope", after, ref);
  }
  {  // SwiGLU
    const int rows = 3, cols = 777;
    DeviceBuffer in(2 * rows * 2 * cols), out(2 * rows * cols);
    fill_uniform_bf16(in.get(), rows * 2 * cols, 34, 4.0f, stream);
    swiglu_fwd(in.get(), out.get(), rows, cols, stream);
    BRAID_CUDA(cudaStreamSynchronize(stream));
    const auto hi = bf16_to_host(in), ho = bf16_to_host(out);
    std::vector<double> ref(ho.size());
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const double g = hi[r * 2 * cols + c], u = hi[r * 2 * cols + cols + c];
        ref[r * cols + c] = g / (1 + std::exp(-g)) * u;
      }
    expect("swiglu", ho, ref);
  }
  {  // Softmax forward (causal) and backward, used by the unfused attention
    const int rows = 4, cols = 300;
    DeviceBuffer s(2 * rows * cols), p(2 * rows * cols), dp(2 * rows * cols), ds(2 * rows * cols);
    fill_uniform_bf16(s.get(), rows * cols, 35, 3.0f, stream);
    fill_uniform_bf16(dp.get(), rows * cols, 36, 1.0f, stream);
    softmax_fwd(s.get(), p.get(), 1, rows, cols, true, stream);
    softmax_bwd(p.get(), dp.get(), ds.get(), 1, rows, cols, 0.5f, stream);
    BRAID_CUDA(cudaStreamSynchronize(stream));
    const auto hs = bf16_to_host(s), hp = bf16_to_host(p), hdp = bf16_to_host(dp),
               hds = bf16_to_host(ds);
    std::vector<double> rp(hs.size()), rds(hs.size());
    for (int r = 0; r < rows; ++r) {
      double mx = -1e300, sum = 0, dot = 0;
      for (int c = 0; c <= r; ++c) mx = std::max(mx, double{hs[r * cols + c]});
      for (int c = 0; c <= r; ++c) sum += std::exp(hs[r * cols + c] - mx);
      for (int c = 0; c < cols; ++c)
        rp[r * cols + c] = c <= r ? std::exp(hs[r * cols + c] - mx) / sum : 0.0;
      // The backward reference uses the GPU's (bf16) P, so it checks the backward kernel alone.
      for (int c = 0; c < cols; ++c) dot += double{hp[r * cols + c]} * hdp[r * cols + c];
      for (int c = 0; c < cols; ++c)
        rds[r * cols + c] = 0.5 * hp[r * cols + c] * (hdp[r * cols + c] - dot);
    }
    expect("softmax forward", hp, rp);
    expect("softmax backward", hds, rds);
  }
}

}  // namespace braid::profiler
