// STP with activation offloading: STP's order plus the shared offload post-pass (offload.cpp:
// OFFLOAD after the forward of a chunk-0 microbatch, RELOAD one instruction before its backward),
// offload_fraction (--offload-fraction, default 1) of the microbatches.
#include <string>

#include "builder.hpp"

namespace braid::detail {

Schedule make_stp_offload(const ScheduleOptions& options) {
  check_fraction("--offload-fraction", options.offload_fraction);
  check_min_microbatches("stp-offload", options, 2 * options.pp,
                         "2p with p = " + std::to_string(options.pp));
  Schedule s = make_stp(options);
  insert_offload(s, options.offload_fraction);
  return s;
}

}  // namespace braid::detail
