#include "gemm.hpp"

#include <cmath>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "bf16.hpp"
#include "kernels.hpp"

namespace braid::profiler {

namespace {

void lt_check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw GpuError(std::string(call) + " failed: cuBLAS status " + std::to_string(s));
}
#define BRAID_LT(call) lt_check((call), #call)

constexpr std::size_t kWorkspaceBytes = 32u << 20;

}  // namespace

// Owns its cuBLASLt descriptors (each destroyed once: not copyable).
struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

Gemm::Gemm(cudaStream_t stream) : stream_(stream), workspace_(kWorkspaceBytes) {
  BRAID_LT(cublasLtCreate(&handle_));
}

Gemm::~Gemm() {
  plans_.clear();  // the plans' descriptors before the handle they were made with
  if (handle_) cublasLtDestroy(handle_);
}

std::string Gemm::version() const {
  const std::size_t v = cublasLtGetVersion();  // major*10000 + minor*100 + patch
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T-view * op(A)^T-view: cuBLASLt gets B
// as its first operand and A as its second, each with its own transpose flag, and m, n swapped.
Gemm::Plan& Gemm::plan_for(const GemmCall& g) {
  const auto key = std::make_tuple(g.m, g.n, g.k, g.trans_a, g.trans_b, g.lda, g.ldb, g.ldc,
                                   g.batch, g.stride_a, g.stride_b, g.stride_c);
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;
  auto p = std::make_unique<Plan>();
  const std::int64_t lda = g.lda ? g.lda : (g.trans_a ? g.m : g.k);
  const std::int64_t ldb = g.ldb ? g.ldb : (g.trans_b ? g.k : g.n);
  const std::int64_t ldc = g.ldc ? g.ldc : g.n;
  BRAID_LT(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;   // B
  const cublasOperation_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // A
  BRAID_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                          sizeof op_first));
  BRAID_LT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                          sizeof op_second));
  // Column-major views of the row-major storage: rows = row-major columns.
  const std::uint64_t b_rows = g.trans_b ? g.k : g.n, b_cols = g.trans_b ? g.n : g.k;
  const std::uint64_t a_rows = g.trans_a ? g.m : g.k, a_cols = g.trans_a ? g.k : g.m;
  BRAID_LT(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, b_rows, b_cols, ldb));
  BRAID_LT(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, a_rows, a_cols, lda));
  BRAID_LT(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_16BF, g.n, g.m, ldc));
  if (g.batch > 1) {
    const std::int32_t batch = g.batch;
    for (auto [layout, stride] :
         {std::pair{p->b, g.stride_b}, std::pair{p->a, g.stride_a}, std::pair{p->c, g.stride_c}}) {
      BRAID_LT(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                sizeof batch));
      BRAID_LT(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &stride, sizeof stride));
    }
  }
  // The preference is destroyed on every path, a throwing SetAttribute included.
  cublasLtMatmulPreference_t raw_pref = nullptr;
  BRAID_LT(cublasLtMatmulPreferenceCreate(&raw_pref));
  const std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                        decltype(&cublasLtMatmulPreferenceDestroy)>
      pref(raw_pref, &cublasLtMatmulPreferenceDestroy);
  const std::uint64_t ws = kWorkspaceBytes;
  BRAID_LT(cublasLtMatmulPreferenceSetAttribute(
      pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(handle_, p->desc, p->b, p->a, p->c, p->c,
                                                          pref.get(), 1, &result, &found);
  if (s != CUBLAS_STATUS_SUCCESS || found == 0)
    throw GpuError("cuBLASLt has no algorithm for GEMM m=" + std::to_string(g.m) +
                   " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k));
  p->algo = result.algo;
  return *plans_.emplace(key, std::move(p)).first->second;
}

void Gemm::run(const GemmCall& g, const void* a, const void* b, void* c) {
  Plan& p = plan_for(g);
  BRAID_LT(cublasLtMatmul(handle_, p.desc, &g.alpha, b, p.b, a, p.a, &g.beta, c, p.c, c, p.c,
                          &p.algo, workspace_.get(), workspace_.bytes(), stream_));
}

namespace {

std::vector<std::uint16_t> download(const DeviceBuffer& d, std::size_t n) {
  std::vector<std::uint16_t> h(n);
  BRAID_CUDA(cudaMemcpy(h.data(), d.get(), n * 2, cudaMemcpyDeviceToHost));
  return h;
}

}  // namespace

void check_gemm(Gemm& gemm, cudaStream_t stream) {
  struct Case {
    const char* name;
    bool ta, tb;
    int batch;
  };
  const Case cases[] = {{"gemm forward (N,T)", false, true, 1},
                        {"gemm input-gradient (N,N)", false, false, 1},
                        {"gemm weight-gradient (T,N)", true, false, 1},
                        {"gemm batched (N,T)", false, true, 3}};
  const std::int64_t m = 96, n = 80, k = 136;
  for (const Case& cs : cases) {
    const std::int64_t na = m * k, nb = k * n, nc = m * n;
    DeviceBuffer a(na * 2 * cs.batch), b(nb * 2 * cs.batch), c(nc * 2 * cs.batch);
    fill_uniform_bf16(a.get(), na * cs.batch, 11, 1.0f, stream);
    fill_uniform_bf16(b.get(), nb * cs.batch, 12, 1.0f, stream);
    GemmCall call{m, n, k, cs.ta, cs.tb};
    call.batch = cs.batch;
    call.stride_a = na, call.stride_b = nb, call.stride_c = nc;
    gemm.run(call, a.get(), b.get(), c.get());
    BRAID_CUDA(cudaStreamSynchronize(stream));
    const auto ha = download(a, na * cs.batch), hb = download(b, nb * cs.batch),
               hc = download(c, nc * cs.batch);
    double max_err = 0, max_ref = 0;
    for (int bt = 0; bt < cs.batch; ++bt) {
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
          double ref = 0;
          for (std::int64_t p = 0; p < k; ++p) {
            const float av = bf16_to_float(ha[bt * na + (cs.ta ? p * m + i : i * k + p)]);
            const float bv = bf16_to_float(hb[bt * nb + (cs.tb ? j * k + p : p * n + j)]);
            ref += static_cast<double>(av) * bv;
          }
          max_err = std::max(max_err, std::fabs(ref - bf16_to_float(hc[bt * nc + i * n + j])));
          max_ref = std::max(max_ref, std::fabs(ref));
        }
      }
    }
    // bf16 output: relative rounding 2^-8 of the largest value, plus accumulation-order slack.
    if (!(max_err <= 1e-2 * max_ref))
      throw CheckError(std::string(cs.name) + ": max |error| " + std::to_string(max_err) +
                       " against a CPU reference (largest value " + std::to_string(max_ref) + ")");
  }
}

}  // namespace braid::profiler
