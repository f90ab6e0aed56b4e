#include "attention.hpp"

#include <cmath>
#include <deque>
#include <limits>
#include <vector>

#include "bf16.hpp"
#include "kernels.hpp"

namespace braid::profiler {

namespace {

// --- cuDNN backend descriptors ------------------------------------------------------------------

// A cuDNN call that may legitimately fail while a graph is built (the graph is then not
// supported); carries the status for the message.
struct Unsupported {
  std::string what;
};

void dnn(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS)
    throw Unsupported{std::string(what) + ": " + cudnnGetErrorString(s)};
}

class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    dnn(cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor");
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(Desc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  cudnnBackendDescriptor_t release() {
    auto d = d_;
    d_ = nullptr;
    return d;
  }
  template <typename T>
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values,
            std::int64_t count = 1, const char* what = "cudnnBackendSetAttribute") {
    dnn(cudnnBackendSetAttribute(d_, name, type, count, values), what);
    return *this;
  }
  Desc& set_desc(cudnnBackendAttributeName_t name, const Desc& other) {
    cudnnBackendDescriptor_t o = other.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &o);
  }
  Desc& finalize(const char* what) {
    dnn(cudnnBackendFinalize(d_), what);
    return *this;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

using Dims = std::vector<std::int64_t>;

Desc tensor(std::int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides,
            bool is_virtual, bool by_value = false) {
  Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const std::int64_t alignment = 16;
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(),
           static_cast<std::int64_t>(dims.size()))
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(),
           static_cast<std::int64_t>(strides.size()))
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment);
  if (is_virtual) t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual);
  if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &by_value);
  t.finalize("tensor descriptor");
  return t;
}

Desc pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, const Desc& x, const Desc* b,
               const Desc& y, const Desc* t = nullptr, std::int64_t axis = -1) {
  Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode)
      .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &prec);
  if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
  pw.finalize("pointwise descriptor");
  Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  if (b) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  if (t) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
  op.finalize("pointwise operation");
  return op;
}

Desc reduction(cudnnReduceTensorOp_t mode, const Desc& x, const Desc& y) {
  Desc r(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &mode)
      .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &f32)
      .finalize("reduction descriptor");
  Desc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
      .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
      .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r)
      .finalize("reduction operation");
  return op;
}

Desc matmul(const Desc& a, const Desc& b, const Desc& c) {
  Desc m(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  m.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &f32).finalize("matmul descriptor");
  Desc op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
      .set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
      .set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
      .set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, m)
      .finalize("matmul operation");
  return op;
}

Desc reshape(const Desc& x, const Desc& y) {
  Desc op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x)
      .set_desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y)
      .finalize("reshape operation");
  return op;
}

// Tensor unique ids: the caller's tensors first (in run()'s order), then scalars and scratch.
enum Uid : std::int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kDO,
  kStats,
  kDQ,
  kDK,
  kDV,
  kScale = 20,
  kOne,
  kNegInf,
  kSoftmaxSum,
  kDQAccum
};

}  // namespace

// The descriptors of one graph under construction; they must outlive finalisation.
struct CudnnSdpa::Graph {
  std::deque<Desc> tensors;  // stable addresses: ops refer to tensors by reference while built
  std::vector<Desc> ops;
  std::int64_t next_virtual = 100;
  const Desc& keep(Desc d) {
    tensors.push_back(std::move(d));
    return tensors.back();
  }
  const Desc& tensor(std::int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides,
                     bool by_value = false) {
    return keep(::braid::profiler::tensor(uid, type, dims, strides, false, by_value));
  }
  // A packed virtual tensor (fp32 unless said otherwise), or one with the given strides.
  const Desc& virt(const Dims& dims, cudnnDataType_t type = CUDNN_DATA_FLOAT, Dims strides = {}) {
    if (strides.empty()) {
      strides.resize(dims.size());
      std::int64_t st = 1;
      for (std::size_t i = dims.size(); i-- > 0;) strides[i] = st, st *= dims[i];
    }
    return keep(::braid::profiler::tensor(next_virtual++, type, dims, strides, true));
  }
  void op(Desc d) { ops.push_back(std::move(d)); }
  // row >= column keeps a score, else -inf (top-left aligned causal mask).
  const Desc& causal_mask(const Desc& scores, const Desc& neg_inf, const Dims& dims) {
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    const Desc& row = virt(dims, CUDNN_DATA_INT32);
    const Desc& col = virt(dims, CUDNN_DATA_INT32);
    const Desc& mask = virt(dims, CUDNN_DATA_BOOLEAN);
    const Desc& out = virt(dims);
    op(pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, scores, nullptr, row, nullptr, 2));
    op(pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, scores, nullptr, col, nullptr, 3));
    op(pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, &col, mask));
    op(pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, scores, &neg_inf, out, &mask));
    return out;
  }
};

// The graph the cuDNN frontend builds for fused flash attention forward in training (it also
// writes the softmax statistics, log-sum-exp): S = Q K^T in fp32, S *= scale, causal mask,
// softmax as max / subtract / exp / sum / divide with stats = max + log(sum), O = P V.
std::unique_ptr<CudnnSdpa> CudnnSdpa::forward(cudnnHandle_t handle, const AttentionShape& s,
                                              std::string* why) {
  std::unique_ptr<CudnnSdpa> f(new CudnnSdpa);
  Graph g;
  try {
    const std::int64_t b = s.batch, h = s.heads, hk = s.kv_heads, n = s.seq, d = s.head_dim;
    const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
    const Desc& q = g.tensor(kQ, bf, {b, h, n, d}, {h * n * d, n * d, d, 1});
    const Desc& kt = g.tensor(kK, bf, {b, hk, d, n}, {hk * n * d, n * d, 1, d});
    const Desc& v = g.tensor(kV, bf, {b, hk, n, d}, {hk * n * d, n * d, d, 1});
    const Desc& o = g.tensor(kO, bf, {b, h, n, d}, {h * n * d, n * d, d, 1});
    const Desc& stats = g.tensor(kStats, f32, {b, h, n, 1}, {h * n, n, 1, 1});
    const Desc& scale = g.tensor(kScale, f32, {1, 1, 1, 1}, {1, 1, 1, 1}, true);
    const Desc& neg_inf = g.tensor(kNegInf, f32, {1, 1, 1, 1}, {1, 1, 1, 1}, true);
    const Dims sdims = {b, h, n, n}, rdims = {b, h, n, 1};
    const Desc& s1 = g.virt(sdims);
    g.op(matmul(q, kt, s1));
    const Desc& s2 = g.virt(sdims);
    g.op(pointwise(CUDNN_POINTWISE_MUL, f32, s1, &scale, s2));
    const Desc& scores = s.causal ? g.causal_mask(s2, neg_inf, sdims) : s2;
    const Desc& mx = g.virt(rdims);
    g.op(reduction(CUDNN_REDUCE_TENSOR_MAX, scores, mx));
    const Desc& sub = g.virt(sdims);
    g.op(pointwise(CUDNN_POINTWISE_SUB, f32, scores, &mx, sub));
    const Desc& ex = g.virt(sdims);
    g.op(pointwise(CUDNN_POINTWISE_EXP, f32, sub, nullptr, ex));
    const Desc& sum = g.virt(rdims);
    g.op(reduction(CUDNN_REDUCE_TENSOR_ADD, ex, sum));
    const Desc& log_sum = g.virt(rdims);
    g.op(pointwise(CUDNN_POINTWISE_LOG, f32, sum, nullptr, log_sum));
    g.op(pointwise(CUDNN_POINTWISE_ADD, f32, mx, &log_sum, stats));
    const Desc& p = g.virt(sdims);
    g.op(pointwise(CUDNN_POINTWISE_DIV, f32, ex, &sum, p));
    g.op(matmul(p, v, o));
    f->scale_ = 1.0f / std::sqrt(static_cast<float>(d));
    f->neg_inf_ = -std::numeric_limits<float>::infinity();
    f->uids_ = {kQ, kK, kV, kO, kStats, kScale, kNegInf};
    f->fixed_ = {&f->scale_, &f->neg_inf_};
  } catch (const Unsupported& u) {
    if (why) *why = u.what;
    return nullptr;
  }
  if (!f->finish(handle, g, why)) return nullptr;
  return f;
}

// The graph the cuDNN frontend builds for the flash attention backward (no dropout, MHA):
// softmax_sum = rowsum(dO * O); P = exp(scale Q K^T - stats) (causal-masked before the exp);
// dV = P^T dO; dS = scale * P * (dO V^T - softmax_sum); dK = dS^T Q; dQ = dS K through an fp32
// accumulator.
std::unique_ptr<CudnnSdpa> CudnnSdpa::backward(cudnnHandle_t handle, const AttentionShape& s,
                                               std::string* why) {
  std::unique_ptr<CudnnSdpa> f(new CudnnSdpa);
  Graph g;
  try {
    const std::int64_t b = s.batch, h = s.heads, n = s.seq, d = s.head_dim;
    const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
    const Dims bhsd = {b, h, n, d}, packed = {h * n * d, n * d, d, 1};
    const Dims bhds = {b, h, d, n}, transposed = {h * n * d, n * d, 1, d};
    const Dims sdims = {b, h, n, n}, rdims = {b, h, n, 1}, rstrides = {h * n, n, 1, 1};
    const Desc& q = g.tensor(kQ, bf, bhsd, packed);
    const Desc& kt = g.tensor(kK, bf, bhds, transposed);
    const Desc& vt = g.tensor(kV, bf, bhds, transposed);
    const Desc& o = g.tensor(kO, bf, bhsd, packed);
    const Desc& d_o = g.tensor(kDO, bf, bhsd, packed);
    const Desc& stats = g.tensor(kStats, f32, rdims, rstrides);
    const Desc& dq = g.tensor(kDQ, bf, bhsd, packed);
    const Desc& dk = g.tensor(kDK, bf, bhsd, packed);
    const Desc& dv = g.tensor(kDV, bf, bhsd, packed);
    const Desc& scale = g.tensor(kScale, f32, {1, 1, 1, 1}, {1, 1, 1, 1}, true);
    const Desc& one = g.tensor(kOne, f32, {1, 1, 1, 1}, {1, 1, 1, 1}, true);
    const Desc& neg_inf = g.tensor(kNegInf, f32, {1, 1, 1, 1}, {1, 1, 1, 1}, true);
    const Desc& softmax_sum = g.tensor(kSoftmaxSum, f32, rdims, rstrides);
    const Desc& dq_accum = g.tensor(kDQAccum, f32, bhsd, packed);

    // softmax_sum = rowsum(dO * O)
    const Desc& do_o = g.virt(bhsd);
    g.op(pointwise(CUDNN_POINTWISE_MUL, f32, d_o, &o, do_o));
    const Desc& row_sum = g.virt(rdims);
    g.op(reduction(CUDNN_REDUCE_TENSOR_ADD, do_o, row_sum));
    g.op(pointwise(CUDNN_POINTWISE_MUL, f32, row_sum, &one, softmax_sum));
    // P = exp(scale * Q K^T - stats), masked
    const Desc& s1 = g.virt(sdims);
    g.op(matmul(q, kt, s1));
    const Desc& s2 = g.virt(sdims);
    g.op(pointwise(CUDNN_POINTWISE_MUL, f32, s1, &scale, s2));
    const Desc& s3 = g.virt(sdims);
    g.op(pointwise(CUDNN_POINTWISE_SUB, f32, s2, &stats, s3));
    const Desc& s4 = s.causal ? g.causal_mask(s3, neg_inf, sdims) : s3;
    const Desc& p = g.virt(sdims);
    g.op(pointwise(CUDNN_POINTWISE_EXP, f32, s4, nullptr, p));
    // dV = P^T dO
    const Desc& pt = g.virt({b, h, n, n}, bf, {h * n * n, n * n, 1, n});
    g.op(reshape(p, pt));
    g.op(matmul(pt, d_o, dv));
    // dS = scale * P * (dO V^T - softmax_sum)
    const Desc& dp = g.virt(sdims);
    g.op(matmul(d_o, vt, dp));
    const Desc& dp_sub = g.virt(sdims);
    g.op(pointwise(CUDNN_POINTWISE_SUB, f32, dp, &softmax_sum, dp_sub));
    const Desc& dp_p = g.virt(sdims);
    g.op(pointwise(CUDNN_POINTWISE_MUL, f32, dp_sub, &p, dp_p));
    const Desc& ds = g.virt(sdims);
    g.op(pointwise(CUDNN_POINTWISE_MUL, f32, dp_p, &scale, ds));
    // dK = dS^T Q
    const Desc& dst = g.virt({b, h, n, n}, bf, {h * n * n, n * n, 1, n});
    g.op(reshape(ds, dst));
    g.op(matmul(dst, q, dk));
    // dQ = dS K (K^T viewed back as [b,h,s,d]), accumulated in fp32
    const Desc& k = g.virt(bhsd, bf, packed);
    g.op(reshape(kt, k));
    g.op(matmul(ds, k, dq_accum));
    g.op(pointwise(CUDNN_POINTWISE_IDENTITY, f32, dq_accum, nullptr, dq));

    f->scale_ = 1.0f / std::sqrt(static_cast<float>(d));
    f->one_ = 1.0f;
    f->neg_inf_ = -std::numeric_limits<float>::infinity();
    f->uids_ = {kQ,  kK,  kV,     kO,   kDO,     kStats,      kDQ,
                kDK, kDV, kScale, kOne, kNegInf, kSoftmaxSum, kDQAccum};
  } catch (const Unsupported& u) {
    if (why) *why = u.what;
    return nullptr;
  }
  if (!f->finish(handle, g, why)) return nullptr;
  // Scratch the graph writes: the softmax row sums and the fp32 dQ accumulator.
  const std::int64_t rows = std::int64_t{s.batch} * s.heads * s.seq;
  f->softmax_sum_ = DeviceBuffer(static_cast<std::size_t>(4 * rows));
  f->dq_accum_ = DeviceBuffer(static_cast<std::size_t>(4 * rows * s.head_dim));
  f->fixed_ = {&f->scale_, &f->one_, &f->neg_inf_, f->softmax_sum_.get(), f->dq_accum_.get()};
  return f;
}

// Operation graph -> heuristics (mode A) -> the first engine configuration that finalises.
bool CudnnSdpa::finish(cudnnHandle_t handle, Graph& g, std::string* why) {
  try {
    std::vector<cudnnBackendDescriptor_t> raw;
    for (const Desc& op : g.ops) raw.push_back(op.get());
    Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    graph
        .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw.data(),
             static_cast<std::int64_t>(raw.size()))
        .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle, 1,
             "operation graph handle")
        .finalize("operation graph");
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
        .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode)
        .finalize("engine heuristics");
    std::int64_t count = 0;
    dnn(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
        "engine heuristics results");
    if (count == 0) throw Unsupported{"no engine supports the SDPA graph"};
    std::vector<Desc> configs;
    std::vector<cudnnBackendDescriptor_t> raw_configs;
    for (std::int64_t i = 0; i < count; ++i) {
      configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw_configs.push_back(configs.back().get());
    }
    dnn(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, raw_configs.data()),
        "engine heuristics results");
    std::string last = "no engine configuration finalised";
    for (std::int64_t i = 0; i < count; ++i) {
      Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      try {
        plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle)
            .set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[i])
            .finalize("execution plan");
      } catch (const Unsupported& u) {
        last = u.what;
        continue;
      }
      std::int64_t ws = 0;
      dnn(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                   CUDNN_TYPE_INT64, 1, nullptr, &ws),
          "plan workspace size");
      handle_ = handle;
      workspace_ = DeviceBuffer(static_cast<std::size_t>(ws));
      plan_ = plan.release();
      return true;
    }
    throw Unsupported{last};
  } catch (const Unsupported& u) {
    if (why) *why = u.what;
    return false;
  }
}

CudnnSdpa::~CudnnSdpa() {
  if (pack_) cudnnBackendDestroyDescriptor(static_cast<cudnnBackendDescriptor_t>(pack_));
  if (plan_) cudnnBackendDestroyDescriptor(static_cast<cudnnBackendDescriptor_t>(plan_));
}

void CudnnSdpa::run(const std::vector<void*>& tensors) {
  try {
    if (!pack_ || tensors != pack_ptrs_) {
      // Building the pack costs host time; the timing loop reuses one.
      if (pack_) cudnnBackendDestroyDescriptor(static_cast<cudnnBackendDescriptor_t>(pack_));
      pack_ = nullptr;
      std::vector<void*> data = tensors;
      data.insert(data.end(), fixed_.begin(), fixed_.end());
      if (data.size() != uids_.size()) throw Unsupported{"wrong number of tensors"};
      Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
      void* ws = workspace_.get();
      pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids_.data(),
               static_cast<std::int64_t>(uids_.size()))
          .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, data.data(),
               static_cast<std::int64_t>(data.size()))
          .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &ws)
          .finalize("variant pack");
      pack_ = pack.release();
      pack_ptrs_ = tensors;
    }
    dnn(cudnnBackendExecute(handle_, static_cast<cudnnBackendDescriptor_t>(plan_),
                            static_cast<cudnnBackendDescriptor_t>(pack_)),
        "cudnnBackendExecute");
  } catch (const Unsupported& u) {
    throw GpuError("cuDNN SDPA: " + u.what);
  }
}

// --- unfused ------------------------------------------------------------------------------------

UnfusedAttention::UnfusedAttention(Gemm& gemm, cudaStream_t stream, const AttentionShape& s,
                                   double score_budget_bytes)
    : gemm_(gemm), stream_(stream), s_(s) {
  const double per_matrix = 2.0 * s.seq * static_cast<double>(s.seq);  // bf16 scores
  const std::int64_t total = static_cast<std::int64_t>(s.batch) * s.heads;
  chunk_ = std::max<std::int64_t>(
      1, std::min<std::int64_t>(total,
                                static_cast<std::int64_t>(score_budget_bytes / (2 * per_matrix))));
  p_ = DeviceBuffer(static_cast<std::size_t>(chunk_ * per_matrix));
  dp_ = DeviceBuffer(static_cast<std::size_t>(chunk_ * per_matrix));
}

void UnfusedAttention::forward(const void* q, const void* k, const void* v, void* o) {
  const std::int64_t n = s_.seq, d = s_.head_dim, total = std::int64_t{s_.batch} * s_.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  auto at = [&](const void* base, std::int64_t matrix, std::int64_t elems) {
    return static_cast<const char*>(base) + 2 * matrix * elems;
  };
  for (std::int64_t m0 = 0; m0 < total; m0 += chunk_) {
    const int g = static_cast<int>(std::min(chunk_, total - m0));
    GemmCall qk{n, n, d, false, true};
    qk.batch = g, qk.stride_a = n * d, qk.stride_b = n * d, qk.stride_c = n * n, qk.alpha = scale;
    gemm_.run(qk, at(q, m0, n * d), at(k, m0, n * d), p_.get());
    softmax_fwd(p_.get(), p_.get(), g, n, n, s_.causal, stream_);
    GemmCall pv{n, d, n, false, false};
    pv.batch = g, pv.stride_a = n * n, pv.stride_b = n * d, pv.stride_c = n * d;
    gemm_.run(pv, p_.get(), at(v, m0, n * d), const_cast<char*>(at(o, m0, n * d)));
  }
}

void UnfusedAttention::backward(const void* q, const void* k, const void* v, const void* d_o,
                                void* dq, void* dk, void* dv) {
  const std::int64_t n = s_.seq, d = s_.head_dim, total = std::int64_t{s_.batch} * s_.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  auto at = [&](const void* base, std::int64_t matrix) {
    return const_cast<char*>(static_cast<const char*>(base) + 2 * matrix * n * d);
  };
  for (std::int64_t m0 = 0; m0 < total; m0 += chunk_) {
    const int g = static_cast<int>(std::min(chunk_, total - m0));
    // P is what the forward saved. When the heads do not fit in one chunk the forward's P of
    // earlier chunks is gone, so it is recomputed here (QK^T + softmax), as FlashAttention does.
    if (chunk_ < total) {
      GemmCall qk{n, n, d, false, true};
      qk.batch = g, qk.stride_a = n * d, qk.stride_b = n * d, qk.stride_c = n * n, qk.alpha = scale;
      gemm_.run(qk, at(q, m0), at(k, m0), p_.get());
      softmax_fwd(p_.get(), p_.get(), g, n, n, s_.causal, stream_);
    }
    GemmCall dv_call{n, d, n, true, false};  // dV = P^T dO
    dv_call.batch = g, dv_call.stride_a = n * n, dv_call.stride_b = n * d, dv_call.stride_c = n * d;
    gemm_.run(dv_call, p_.get(), at(d_o, m0), at(dv, m0));
    GemmCall dp_call{n, n, d, false, true};  // dP = dO V^T
    dp_call.batch = g, dp_call.stride_a = n * d, dp_call.stride_b = n * d, dp_call.stride_c = n * n;
    gemm_.run(dp_call, at(d_o, m0), at(v, m0), dp_.get());
    softmax_bwd(p_.get(), dp_.get(), dp_.get(), g, n, n, scale, stream_);  // dS, in place
    GemmCall dq_call{n, d, n, false, false};                               // dQ = dS K
    dq_call.batch = g, dq_call.stride_a = n * n, dq_call.stride_b = n * d, dq_call.stride_c = n * d;
    gemm_.run(dq_call, dp_.get(), at(k, m0), at(dq, m0));
    GemmCall dk_call{n, d, n, true, false};  // dK = dS^T Q
    dk_call.batch = g, dk_call.stride_a = n * n, dk_call.stride_b = n * d, dk_call.stride_c = n * d;
    gemm_.run(dk_call, dp_.get(), at(q, m0), at(dk, m0));
  }
}

// --- timing and checks --------------------------------------------------------------------------

namespace {

constexpr double kScoreBudgetBytes = 8.0 * (1u << 30);

}  // namespace

AttentionTimes time_attention(Gemm& gemm, cudnnHandle_t cudnn, cudaStream_t stream,
                              const AttentionShape& s, const TimingOptions& opt,
                              const FusedStatus& fused) {
  AttentionTimes t;
  const std::size_t full = std::size_t{2} * s.batch * s.heads * s.seq * s.head_dim;
  DeviceBuffer q(full), k(full), v(full), o(full), d_o(full), dq(full), dk(full), dv(full);
  DeviceBuffer stats(std::size_t{4} * s.batch * s.heads * s.seq);
  for (auto* b : {&q, &k, &v, &d_o})
    fill_uniform_bf16(b->get(), static_cast<std::int64_t>(full / 2), 7, 1.0f, stream);
  BRAID_CUDA(cudaMemsetAsync(stats.get(), 0, stats.bytes(), stream));
  std::string why;
  // K and V hold all query heads (the unfused layout); the fused forward reads the first
  // kv_heads of them, the fused backward all (MHA).
  std::unique_ptr<CudnnSdpa> fwd =
      fused.fwd_problem.empty() ? CudnnSdpa::forward(cudnn, s, &why) : nullptr;
  AttentionShape mha = s;
  mha.kv_heads = s.heads;
  std::unique_ptr<CudnnSdpa> bwd =
      fused.bwd_problem.empty() ? CudnnSdpa::backward(cudnn, mha, &why) : nullptr;
  std::unique_ptr<UnfusedAttention> unfused;
  if (!fwd || !bwd)
    unfused = std::make_unique<UnfusedAttention>(gemm, stream, s, kScoreBudgetBytes);
  if (fwd) {
    t.fwd_s = time_median_s(
        stream,
        [&] {
          fwd->run({q.get(), k.get(), v.get(), o.get(), stats.get()});
        },
        opt);
    t.fwd_impl = "cudnn_sdpa";
  } else {
    t.fwd_s = time_median_s(
        stream, [&] { unfused->forward(q.get(), k.get(), v.get(), o.get()); }, opt);
    t.fwd_impl = "unfused";
  }
  if (bwd) {
    t.bwd_s = time_median_s(
        stream,
        [&] {
          bwd->run({q.get(), k.get(), v.get(), o.get(), d_o.get(), stats.get(), dq.get(), dk.get(),
                    dv.get()});
        },
        opt);
    t.bwd_impl = "cudnn_sdpa";
  } else {
    unfused->forward(q.get(), k.get(), v.get(), o.get());  // leaves P for the backward
    t.bwd_s = time_median_s(
        stream,
        [&] {
          unfused->backward(q.get(), k.get(), v.get(), d_o.get(), dq.get(), dk.get(), dv.get());
        },
        opt);
    t.bwd_impl = "unfused";
  }
  return t;
}

namespace {

void expect_close(const char* kernel, const std::vector<float>& got,
                  const std::vector<double>& want, double tol) {
  double err = 0, ref = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::fabs(got[i] - want[i]));
    ref = std::max(ref, std::fabs(want[i]));
  }
  if (!(err <= tol * std::max(ref, 1e-3)))
    throw CheckError(std::string(kernel) + ": max |error| " + std::to_string(err) +
                     " against a naive CPU reference (largest value " + std::to_string(ref) + ")");
}

}  // namespace

FusedStatus check_attention(Gemm& gemm, cudnnHandle_t cudnn, cudaStream_t stream) {
  // Tiny shape: 2 query heads sharing 1 KV head (GQA) for the fused path; the unfused path sees
  // K and V expanded to both heads.
  const int b = 1, h = 2, n = 128, d = 64;
  const std::size_t elems = std::size_t{1} * b * h * n * d;
  DeviceBuffer q(2 * elems), k(2 * elems), v(2 * elems), o(2 * elems), d_o(2 * elems),
      dq(2 * elems), dk(2 * elems), dv(2 * elems);
  fill_uniform_bf16(q.get(), elems, 21, 1.0f, stream);
  fill_uniform_bf16(k.get(), elems / 2, 22, 1.0f, stream);
  fill_uniform_bf16(v.get(), elems / 2, 23, 1.0f, stream);
  fill_uniform_bf16(d_o.get(), elems, 24, 1.0f, stream);
  // Expand the single KV head to head 1 (the unfused layout).
  BRAID_CUDA(cudaMemcpyAsync(static_cast<char*>(k.get()) + elems, k.get(), elems,
                             cudaMemcpyDeviceToDevice, stream));
  BRAID_CUDA(cudaMemcpyAsync(static_cast<char*>(v.get()) + elems, v.get(), elems,
                             cudaMemcpyDeviceToDevice, stream));
  BRAID_CUDA(cudaStreamSynchronize(stream));
  const auto hq = bf16_to_host(q), hk = bf16_to_host(k), hv = bf16_to_host(v),
             hdo = bf16_to_host(d_o);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  FusedStatus status;
  for (const bool causal : {true, false}) {
    // Naive reference, in double: P = softmax(scale Q K^T), O = P V, and the gradients.
    std::vector<double> ro(elems), rdq(elems), rdk(elems), rdv(elems), rstats(elems / d);
    for (int hh = 0; hh < h; ++hh) {
      const std::size_t base = std::size_t{1} * hh * n * d;
      std::vector<double> p(std::size_t{1} * n * n), dp(std::size_t{1} * n * n);
      for (int i = 0; i < n; ++i) {
        double mx = -1e300;
        for (int j = 0; j < n; ++j) {
          double sij = 0;
          for (int x = 0; x < d; ++x) sij += hq[base + i * d + x] * hk[base + j * d + x];
          p[i * n + j] = (causal && j > i) ? -1e300 : sij * scale;
          mx = std::max(mx, p[i * n + j]);
        }
        double sum = 0;
        for (int j = 0; j < n; ++j) sum += (p[i * n + j] = std::exp(p[i * n + j] - mx));
        for (int j = 0; j < n; ++j) p[i * n + j] /= sum;
        rstats[std::size_t{1} * hh * n + i] = mx + std::log(sum);  // log-sum-exp
      }
      for (int i = 0; i < n; ++i)
        for (int x = 0; x < d; ++x) {
          double acc = 0;
          for (int j = 0; j < n; ++j) acc += p[i * n + j] * hv[base + j * d + x];
          ro[base + i * d + x] = acc;
        }
      for (int i = 0; i < n; ++i) {
        double dot = 0;
        for (int j = 0; j < n; ++j) {
          double a = 0;
          for (int x = 0; x < d; ++x) a += hdo[base + i * d + x] * hv[base + j * d + x];
          dp[i * n + j] = a;
          dot += a * p[i * n + j];
        }
        for (int j = 0; j < n; ++j) dp[i * n + j] = scale * p[i * n + j] * (dp[i * n + j] - dot);
      }
      for (int i = 0; i < n; ++i)
        for (int x = 0; x < d; ++x) {
          double aq = 0, ak = 0, av = 0;
          for (int j = 0; j < n; ++j) {
            aq += dp[i * n + j] * hk[base + j * d + x];
            ak += dp[j * n + i] * hq[base + j * d + x];
            av += p[j * n + i] * hdo[base + j * d + x];
          }
          rdq[base + i * d + x] = aq, rdk[base + i * d + x] = ak, rdv[base + i * d + x] = av;
        }
    }
    const AttentionShape s{b, h, h, n, d, causal};
    // The causal case runs one head per chunk, so the backward recomputes P (the chunked path).
    UnfusedAttention un(gemm, stream, s, causal ? 4.0 * n * n : 1e9);
    un.forward(q.get(), k.get(), v.get(), o.get());
    un.backward(q.get(), k.get(), v.get(), d_o.get(), dq.get(), dk.get(), dv.get());
    BRAID_CUDA(cudaStreamSynchronize(stream));
    const std::string tag = causal ? " (causal)" : " (full)";
    // bf16 P and scores: a few bf16 ulps of the largest value.
    expect_close(("attention forward, unfused" + tag).c_str(), bf16_to_host(o), ro, 3e-2);
    expect_close(("attention backward dQ, unfused" + tag).c_str(), bf16_to_host(dq), rdq, 5e-2);
    expect_close(("attention backward dK, unfused" + tag).c_str(), bf16_to_host(dk), rdk, 5e-2);
    expect_close(("attention backward dV, unfused" + tag).c_str(), bf16_to_host(dv), rdv, 5e-2);

    if (status.fwd_problem.empty()) {
      std::string why;
      auto fused = CudnnSdpa::forward(cudnn, AttentionShape{b, h, 1, n, d, causal}, &why);
      if (!fused) {
        status.fwd_problem = "no cuDNN engine for the SDPA forward graph: " + why;
      } else {
        DeviceBuffer stats(std::size_t{4} * b * h * n);
        BRAID_CUDA(cudaMemsetAsync(o.get(), 0, 2 * elems, stream));
        fused->run({q.get(), k.get(), v.get(), o.get(), stats.get()});
        BRAID_CUDA(cudaStreamSynchronize(stream));
        try {
          expect_close(("attention forward, cuDNN SDPA" + tag).c_str(), bf16_to_host(o), ro, 3e-2);
        } catch (const CheckError& e) {
          status.fwd_problem = e.what();
        }
      }
    }
    if (status.bwd_problem.empty()) {
      std::string why;
      auto fused = CudnnSdpa::backward(cudnn, AttentionShape{b, h, h, n, d, causal}, &why);
      if (!fused) {
        status.bwd_problem = "no cuDNN engine for the SDPA backward graph: " + why;
      } else {
        // The reference O and statistics as the forward would have saved them.
        std::vector<std::uint16_t> o_bits(elems);
        std::vector<float> stats_f(rstats.begin(), rstats.end());
        for (std::size_t i = 0; i < elems; ++i)
          o_bits[i] = float_to_bf16(static_cast<float>(ro[i]));
        DeviceBuffer stats(4 * stats_f.size());
        BRAID_CUDA(cudaMemcpy(o.get(), o_bits.data(), 2 * elems, cudaMemcpyHostToDevice));
        BRAID_CUDA(cudaMemcpy(stats.get(), stats_f.data(), stats.bytes(), cudaMemcpyHostToDevice));
        for (auto* g : {&dq, &dk, &dv}) BRAID_CUDA(cudaMemsetAsync(g->get(), 0, 2 * elems, stream));
        fused->run({q.get(), k.get(), v.get(), o.get(), d_o.get(), stats.get(), dq.get(), dk.get(),
                    dv.get()});
        BRAID_CUDA(cudaStreamSynchronize(stream));
        try {
          expect_close(("attention backward dQ, cuDNN SDPA" + tag).c_str(), bf16_to_host(dq), rdq,
                       5e-2);
          expect_close(("attention backward dK, cuDNN SDPA" + tag).c_str(), bf16_to_host(dk), rdk,
                       5e-2);
          expect_close(("attention backward dV, cuDNN SDPA" + tag).c_str(), bf16_to_host(dv), rdv,
                       5e-2);
        } catch (const CheckError& e) {
          status.bwd_problem = e.what();
        }
      }
    }
  }
  return status;
}

}  // namespace braid::profiler
