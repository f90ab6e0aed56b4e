// Communication on one node, measured from one process: NCCL All-Reduce, All-Gather and
// Reduce-Scatter over groups of 2, 4 and 8 visible GPUs (ncclCommInitAll) with nccl-tests' size
// and bus-bandwidth conventions, P2P copies between two GPUs, pinned host<->device copies, the
// device-to-device copy bandwidth, and compute/communication contention. NCCL is loaded with
// dlopen so that a machine without it gets a clear message instead of a loader error.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "braid/measured.hpp"
#include "device.hpp"

namespace braid::profiler {

class Nccl;  // the dlopen'ed library

// Loads libnccl.so.2; nullptr with `why` when it is absent or too old.
std::shared_ptr<Nccl> load_nccl(std::string* why);
std::string nccl_version(const Nccl& nccl);

struct CommOptions {
  std::vector<double> bytes;  // nccl-tests sizes
  std::vector<int> groups;    // group sizes (each <= visible GPUs)
  int repeats = 5;            // median of this many samples per size
};

// Every collective at every group size and byte size: nccl-tests "size" bytes (bf16 elements),
// time per call from wall clock over a batch of calls after warm-up (as nccl-tests times it).
// `comm_overhead_bytes` gets the device memory GPU 0 gave the largest group's communicators.
std::map<CollectiveKind, std::vector<MeasuredComm>> time_collectives(Nccl& nccl,
                                                                     const CommOptions& o,
                                                                     double* comm_overhead_bytes);

// cudaMemcpyPeerAsync from GPU 0 to GPU 1, one direction.
std::vector<MeasuredComm> time_p2p(const std::vector<double>& bytes, const TimingOptions& opt);
// Pinned host buffers, cudaMemcpyAsync on GPU 0.
void time_host_copies(const std::vector<double>& bytes, const TimingOptions& opt,
                      std::vector<CopyPoint>* d2h, std::vector<CopyPoint>* h2d);
// Device-to-device copy of `bytes` on GPU 0: (read + write) bytes per second.
double time_hbm_bandwidth(double bytes, const TimingOptions& opt);

// A large GEMM stream on every GPU with an All-Reduce stream over all of them (at least 2 GPUs
// and NCCL), or with one GPU a D2H copy stream, each alone and then together.
MeasuredContention time_contention(Nccl* nccl, int gpus);

}  // namespace braid::profiler
