// Correctness checks of braid-profile's own elementwise kernels (RMSNorm, RoPE, SwiGLU) against
// CPU references on small sizes, run before any timing. A mismatch throws CheckError naming the
// kernel; GEMM and attention have their checks beside them (gemm.hpp, attention.hpp).
#pragma once

#include <cuda_runtime.h>

namespace braid::profiler {

void check_elementwise(cudaStream_t stream);

}  // namespace braid::profiler
