// A check braid-profile's cuDNN graphs can get without a GPU: every tensor and operation
// descriptor of the fused SDPA forward and backward graphs (causal and full) is accepted and
// finalised by the installed cuDNN, so the first failure without a device is the missing handle
// on the operation graph. Whether cuDNN then finds an engine is only known on a GPU. Exit 0 and
// one line per graph when that holds.
#include <cstdio>
#include <string>

#include "attention.hpp"

using namespace braid::profiler;

int main() {
  int failures = 0;
  for (const bool causal : {true, false}) {
    for (const bool backward : {false, true}) {
      std::string why;
      const AttentionShape s{1, 4, backward ? 4 : 2, 256, 128, causal};
      // A null handle: the graph is built up to the operation graph, which needs a device.
      auto g =
          backward ? CudnnSdpa::backward(nullptr, s, &why) : CudnnSdpa::forward(nullptr, s, &why);
      const bool ok = !g && why == "operation graph handle: CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
      std::printf("%s %s %s: %s\n", ok ? "ok  " : "FAIL", backward ? "backward" : "forward",
                  causal ? "causal" : "full", why.c_str());
      failures += ok ? 0 : 1;
    }
  }
  std::printf("%d passed, %d failed\n", 4 - failures, failures);
  return failures == 0 ? 0 : 1;
}
