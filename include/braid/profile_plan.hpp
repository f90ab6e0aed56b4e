// ProfilePlan: what braid-profile measures for one model — the GEMM shapes of every unit
// (QKV, out-projection, FC1 gate+up, FC2, LM head, and the ViT's; forward, input-gradient and
// weight-gradient) per TP size, sequence length and micro-batch, the attention shapes, the
// elementwise kernel sizes and the collective and copy sizes. A pure function of the model config
// and the options, so it is tested without a GPU; the CUDA side only runs it. The measurements
// themselves live in measured.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/config.hpp"
#include "braid/measured.hpp"

namespace braid {

struct PlanOptions {
  std::vector<int> tp = {1};
  std::vector<int> seq;        // tokens per sample; empty: 4096
  std::vector<int> mbs = {1};  // samples per microbatch
  bool quick = false;          // first seq and mbs only, coarser size sweeps
};

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  std::string label;  // "qkv.F", "fc2.W", "vit.fc1.B", ...
};

// The three GEMMs of a linear layer Y[tokens x out] = X[tokens x in] * W^T (W stored [out x in],
// as nn.Linear does): F = (tokens, out, in), B: dX = dY * W = (tokens, in, out),
// W: dW = dY^T * X = (out, in, tokens). The cost model looks shapes up with the same rule.
std::array<GemmShape, 3> linear_gemms(std::int64_t tokens, std::int64_t in, std::int64_t out,
                                      const std::string& label);

// One memory-bound kernel launch: RMSNorm over [tokens x width]; RoPE on [tokens x heads x
// head_dim] (q and k heads together); SwiGLU reading [tokens x 2 width] and writing
// [tokens x width].
struct ElementwiseShape {
  ElementwiseKernel kernel = ElementwiseKernel::RmsNorm;
  std::int64_t tokens = 0;
  std::int64_t width = 0;     // hidden (RMSNorm), ffn per GPU (SwiGLU), heads * head_dim (RoPE)
  std::int64_t heads = 0;     // RoPE only
  std::int64_t head_dim = 0;  // RoPE only
  std::int64_t seq = 0;       // RoPE positions repeat every seq tokens
  double bytes() const;       // bf16 bytes read + written
};

struct ProfilePlan {
  std::vector<GemmShape> gemm;            // distinct (m, n, k), first label kept
  std::vector<AttentionPoint> attention;  // shapes; times are left 0
  std::vector<ElementwiseShape> elementwise;
  std::vector<double> comm_bytes;  // nccl-tests sizes, 1 KiB .. 1 GiB
  std::vector<double> copy_bytes;  // pinned host copies and P2P
};

// Throws InputError("--tp" / "--seq" / "--mbs", ...) when a value does not fit the model
// (heads not divisible by TP, non-positive sizes).
ProfilePlan make_plan(const ModelConfig& model, const PlanOptions& options);

}  // namespace braid
