// bf16 GEMMs through cuBLASLt in row-major terms (fp32 accumulation, bf16 output), as the
// framework's linear layers and unfused attention run them: C[m x n] = alpha * op(A) * op(B)
// (+ beta * C), optionally strided-batched. The algorithm is cuBLASLt's first heuristic choice
// for the shape, cached per shape, with a 32 MiB workspace (what PyTorch gives cuBLASLt on Hopper).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include <cublasLt.h>

#include "device.hpp"

namespace braid::profiler {

struct GemmCall {
  std::int64_t m = 0, n = 0, k = 0;
  bool trans_a = false;                    // A is stored [k x m] and used transposed
  bool trans_b = false;                    // B is stored [n x k] and used transposed
  std::int64_t lda = 0, ldb = 0, ldc = 0;  // row-major leading dimensions; 0: packed
  int batch = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batch matrices
  float alpha = 1, beta = 0;
};

class Gemm {
 public:
  explicit Gemm(cudaStream_t stream);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  void run(const GemmCall& call, const void* a, const void* b, void* c);
  std::string version() const;  // "13.0.0"

 private:
  struct Plan;
  Plan& plan_for(const GemmCall& call);
  cublasLtHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer workspace_;
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, bool, bool, std::int64_t,
                      std::int64_t, std::int64_t, int, std::int64_t, std::int64_t, std::int64_t>,
           std::unique_ptr<Plan>>
      plans_;  // only fully configured plans: one that failed half-way is never cached
};

// Checks Gemm against a CPU reference (fp32 accumulation of the same bf16 inputs) on small
// shapes in the three layouts the units use (forward N,T; input gradient N,N; weight gradient
// T,N) and a batched one; throws CheckError naming the layout on a mismatch.
void check_gemm(Gemm& gemm, cudaStream_t stream);

}  // namespace braid::profiler
