// Names, attention FLOPs and contention factors of the measured tables.
#include <algorithm>

#include "braid/measured.hpp"

namespace braid {

const char* name(ElementwiseKernel k) {
  switch (k) {
    case ElementwiseKernel::RmsNorm:
      return "rmsnorm";
    case ElementwiseKernel::Rope:
      return "rope";
    case ElementwiseKernel::SwiGLU:
      return "swiglu";
  }
  return "?";
}

const char* name(LookupKind k) {
  switch (k) {
    case LookupKind::Exact:
      return "exact";
    case LookupKind::Interpolated:
      return "interpolated";
    case LookupKind::Extrapolated:
      return "extrapolated";
    case LookupKind::Scaled:
      return "scaled";
  }
  return "?";
}

std::optional<ElementwiseKernel> parse_elementwise_kernel(const std::string& s) {
  for (ElementwiseKernel k :
       {ElementwiseKernel::RmsNorm, ElementwiseKernel::Rope, ElementwiseKernel::SwiGLU})
    if (s == name(k)) return k;
  return std::nullopt;
}

double attention_fwd_flops(const AttentionPoint& a) {
  const double s = a.seq;
  const double f = 4.0 * a.batch * s * s * a.heads * a.head_dim;
  return a.causal ? f / 2 : f;
}

double attention_bwd_flops(const AttentionPoint& a) { return 2.5 * attention_fwd_flops(a); }

Contention MeasuredContention::factors() const {
  Contention c;
  if (compute_alone_s > 0) c.compute_slowdown = std::max(1.0, compute_together_s / compute_alone_s);
  if (comm_alone_s > 0) c.comm_slowdown = std::max(1.0, comm_together_s / comm_alone_s);
  return c;
}

bool MeasuredTables::empty() const {
  return gemm.empty() && attention.empty() && elementwise.empty() && comm.empty() && d2h.empty() &&
         h2d.empty() && !contention;
}

}  // namespace braid
