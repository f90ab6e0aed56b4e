#include "comm.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include <nccl.h>

#include "gemm.hpp"

namespace braid::profiler {

class Nccl {
 public:
  void* lib = nullptr;
  ncclResult_t (*GetVersion)(int*) = nullptr;
  ncclResult_t (*CommInitAll)(ncclComm_t*, int, const int*) = nullptr;
  ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*ReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                cudaStream_t) = nullptr;
  ncclResult_t (*Send)(const void*, size_t, ncclDataType_t, int, ncclComm_t,
                       cudaStream_t) = nullptr;
  ncclResult_t (*Recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*GroupStart)() = nullptr;
  ncclResult_t (*GroupEnd)() = nullptr;
  const char* (*GetErrorString)(ncclResult_t) = nullptr;

  ~Nccl() {
    if (lib) dlclose(lib);
  }
  void check(ncclResult_t r, const char* call) const {
    if (r != ncclSuccess)
      throw GpuError(std::string(call) + " failed: " + (GetErrorString ? GetErrorString(r) : "?"));
  }
};

std::shared_ptr<Nccl> load_nccl(std::string* why) {
  auto n = std::make_shared<Nccl>();
  // The soname first (the system's NCCL), then the one found when braid-profile was built.
  for (const char* name : {"libnccl.so.2", BRAID_NCCL_LIBRARY}) {
    if (name[0] && (n->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
  }
  if (!n->lib) {
    if (why) *why = std::string("cannot load NCCL (libnccl.so.2): ") + dlerror();
    return nullptr;
  }
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(n->lib, name));
    return fn != nullptr;
  };
  const bool ok = sym(n->GetVersion, "ncclGetVersion") && sym(n->CommInitAll, "ncclCommInitAll") &&
                  sym(n->CommDestroy, "ncclCommDestroy") && sym(n->AllReduce, "ncclAllReduce") &&
                  sym(n->AllGather, "ncclAllGather") &&
                  sym(n->ReduceScatter, "ncclReduceScatter") && sym(n->Send, "ncclSend") &&
                  sym(n->Recv, "ncclRecv") && sym(n->GroupStart, "ncclGroupStart") &&
                  sym(n->GroupEnd, "ncclGroupEnd") && sym(n->GetErrorString, "ncclGetErrorString");
  if (!ok) {
    if (why) *why = "the loaded NCCL lacks a required function (NCCL >= 2.x expected)";
    return nullptr;
  }
  return n;
}

std::string nccl_version(const Nccl& nccl) {
  int v = 0;
  nccl.check(nccl.GetVersion(&v), "ncclGetVersion");
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

namespace {

// One communicator group over GPUs 0..n-1 with a stream and buffers per GPU.
struct Group {
  Nccl& nccl;
  int n;
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<DeviceBuffer> send, recv;
  double comm_bytes = 0;  // device memory the communicators took on GPU 0

  Group(Nccl& nc, int ranks, double max_bytes) : nccl(nc), n(ranks), comms(ranks), streams(ranks) {
    std::vector<int> devs(ranks);
    for (int i = 0; i < ranks; ++i) devs[i] = i;
    std::size_t free0 = 0, free1 = 0, total = 0;
    BRAID_CUDA(cudaSetDevice(0));
    BRAID_CUDA(cudaMemGetInfo(&free0, &total));
    nccl.check(nccl.CommInitAll(comms.data(), ranks, devs.data()), "ncclCommInitAll");
    BRAID_CUDA(cudaSetDevice(0));
    BRAID_CUDA(cudaMemGetInfo(&free1, &total));
    comm_bytes = free0 > free1 ? static_cast<double>(free0 - free1) : 0;
    for (int i = 0; i < ranks; ++i) {
      BRAID_CUDA(cudaSetDevice(i));
      BRAID_CUDA(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
      send.emplace_back(static_cast<std::size_t>(max_bytes));
      recv.emplace_back(static_cast<std::size_t>(max_bytes));
      BRAID_CUDA(cudaMemset(send.back().get(), 0, send.back().bytes()));
    }
    BRAID_CUDA(cudaSetDevice(0));
  }
  ~Group() {
    for (int i = 0; i < n; ++i) {
      cudaSetDevice(i);
      cudaStreamSynchronize(streams[i]);
      cudaStreamDestroy(streams[i]);
      nccl.CommDestroy(comms[i]);
    }
    cudaSetDevice(0);
  }

  // One collective on every rank; `bytes` is the nccl-tests size.
  void launch(CollectiveKind op, double bytes) {
    const std::size_t elems = static_cast<std::size_t>(bytes / 2);  // bf16
    nccl.check(nccl.GroupStart(), "ncclGroupStart");
    for (int i = 0; i < n; ++i) {
      switch (op) {
        case CollectiveKind::AllReduce:
          nccl.check(nccl.AllReduce(send[i].get(), recv[i].get(), elems, ncclBfloat16, ncclSum,
                                    comms[i], streams[i]),
                     "ncclAllReduce");
          break;
        case CollectiveKind::AllGather:  // size = the gathered buffer; each rank sends 1/n of it
          nccl.check(nccl.AllGather(send[i].get(), recv[i].get(), elems / n, ncclBfloat16, comms[i],
                                    streams[i]),
                     "ncclAllGather");
          break;
        case CollectiveKind::ReduceScatter:  // size = the input buffer; each rank receives 1/n of
                                             // it
          nccl.check(nccl.ReduceScatter(send[i].get(), recv[i].get(), elems / n, ncclBfloat16,
                                        ncclSum, comms[i], streams[i]),
                     "ncclReduceScatter");
          break;
        case CollectiveKind::AllToAll:  // size = each rank's send buffer; 1/n of it to each peer
          all_to_all(i, elems / n);
          break;
        case CollectiveKind::P2P:
        case CollectiveKind::None:
          break;
      }
    }
    nccl.check(nccl.GroupEnd(), "ncclGroupEnd");
  }
  // nccl-tests' alltoall (src/alltoall.cu, AlltoAllRunColl): inside the group, rank i sends
  // chunk r of its buffer to every rank r and receives chunk r of its output from it (NCCL has no
  // all-to-all call; grouped ncclSend/ncclRecv is how nccl-tests and PyTorch's all_to_all run it).
  void all_to_all(int i, std::size_t chunk) {
    const std::size_t chunk_bytes = chunk * 2;  // bf16
    auto* out = static_cast<char*>(send[i].get());
    auto* in = static_cast<char*>(recv[i].get());
    for (int r = 0; r < n; ++r) {
      nccl.check(nccl.Send(out + r * chunk_bytes, chunk, ncclBfloat16, r, comms[i], streams[i]),
                 "ncclSend");
      nccl.check(nccl.Recv(in + r * chunk_bytes, chunk, ncclBfloat16, r, comms[i], streams[i]),
                 "ncclRecv");
    }
  }
  void sync() {
    for (int i = 0; i < n; ++i) {
      BRAID_CUDA(cudaSetDevice(i));
      BRAID_CUDA(cudaStreamSynchronize(streams[i]));
    }
    BRAID_CUDA(cudaSetDevice(0));
  }
  // Seconds per call: `calls` back-to-back calls between two synchronisations.
  double run(CollectiveKind op, double bytes, int calls) {
    sync();
    const auto t0 = std::chrono::steady_clock::now();
    for (int c = 0; c < calls; ++c) launch(op, bytes);
    sync();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::map<CollectiveKind, std::vector<MeasuredComm>> time_collectives(Nccl& nccl,
                                                                     const CommOptions& o,
                                                                     double* comm_overhead_bytes) {
  std::map<CollectiveKind, std::vector<MeasuredComm>> out;
  const double max_bytes = *std::max_element(o.bytes.begin(), o.bytes.end());
  for (int ranks : o.groups) {
    Group g(nccl, ranks, max_bytes);
    if (comm_overhead_bytes) *comm_overhead_bytes = std::max(*comm_overhead_bytes, g.comm_bytes);
    for (CollectiveKind op : {CollectiveKind::AllReduce, CollectiveKind::AllGather,
                              CollectiveKind::ReduceScatter, CollectiveKind::AllToAll}) {
      for (double bytes : o.bytes) {
        if (bytes < 2.0 * ranks) continue;  // at least one element per rank
        g.run(op, bytes, 5);                // warm-up (and NCCL's lazy connection set-up)
        const double estimate = g.run(op, bytes, 1);
        // About 20 ms per sample, as nccl-tests' default of many iterations per timing.
        const int calls = std::clamp(static_cast<int>(0.02 / std::max(estimate, 1e-6)), 1, 200);
        std::vector<double> samples;
        for (int r = 0; r < o.repeats; ++r) samples.push_back(g.run(op, bytes, calls));
        out[op].push_back({ranks, bytes, median(samples)});
      }
    }
  }
  return out;
}

std::vector<MeasuredComm> time_p2p(const std::vector<double>& bytes, const TimingOptions& opt) {
  std::vector<MeasuredComm> out;
  const double max_bytes = *std::max_element(bytes.begin(), bytes.end());
  int can = 0;
  BRAID_CUDA(cudaDeviceCanAccessPeer(&can, 0, 1));
  BRAID_CUDA(cudaSetDevice(1));
  DeviceBuffer dst(static_cast<std::size_t>(max_bytes));
  BRAID_CUDA(cudaSetDevice(0));
  if (can) {
    const cudaError_t e = cudaDeviceEnablePeerAccess(1, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) BRAID_CUDA(e);
    cudaGetLastError();  // clear an "already enabled"
  }
  DeviceBuffer src(static_cast<std::size_t>(max_bytes));
  cudaStream_t stream;
  BRAID_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (double b : bytes) {
    const double t = time_median_s(
        stream,
        [&] {
          BRAID_CUDA(
              cudaMemcpyPeerAsync(dst.get(), 1, src.get(), 0, static_cast<std::size_t>(b), stream));
        },
        opt);
    out.push_back({2, b, t});
  }
  BRAID_CUDA(cudaStreamDestroy(stream));
  return out;
}

void time_host_copies(const std::vector<double>& bytes, const TimingOptions& opt,
                      std::vector<CopyPoint>* d2h, std::vector<CopyPoint>* h2d) {
  const double max_bytes = *std::max_element(bytes.begin(), bytes.end());
  void* host = nullptr;
  BRAID_CUDA(cudaMallocHost(&host, static_cast<std::size_t>(max_bytes)));
  DeviceBuffer dev(static_cast<std::size_t>(max_bytes));
  cudaStream_t stream;
  BRAID_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  try {
    for (double b : bytes) {
      const auto n = static_cast<std::size_t>(b);
      d2h->push_back(
          {b, time_median_s(
                  stream,
                  [&] {
                    BRAID_CUDA(cudaMemcpyAsync(host, dev.get(), n, cudaMemcpyDeviceToHost, stream));
                  },
                  opt)});
      h2d->push_back(
          {b, time_median_s(
                  stream,
                  [&] {
                    BRAID_CUDA(cudaMemcpyAsync(dev.get(), host, n, cudaMemcpyHostToDevice, stream));
                  },
                  opt)});
    }
  } catch (...) {
    cudaFreeHost(host);
    throw;
  }
  cudaStreamDestroy(stream);
  BRAID_CUDA(cudaFreeHost(host));
}

double time_hbm_bandwidth(double bytes, const TimingOptions& opt) {
  const auto n = static_cast<std::size_t>(bytes);
  DeviceBuffer a(n), b(n);
  cudaStream_t stream;
  BRAID_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double t = time_median_s(
      stream,
      [&] { BRAID_CUDA(cudaMemcpyAsync(b.get(), a.get(), n, cudaMemcpyDeviceToDevice, stream)); },
      opt);
  BRAID_CUDA(cudaStreamDestroy(stream));
  return 2.0 * bytes / t;
}

MeasuredContention time_contention(Nccl* nccl, int gpus) {
  MeasuredContention c;
  const bool collective = nccl && gpus >= 2;
  const int n = collective ? std::min(gpus, 8) : 1;
  c.partner = collective ? "all_reduce" : "copy";
  // A TP-sized GEMM (8192 x 8192 x 8192, ~1.1 TFLOP) and a 256 MiB partner transfer, each
  // repeated to run for about 100 ms alone.
  const std::int64_t dim = 8192;
  const double comm_bytes = 256.0 * (1 << 20);
  std::vector<cudaStream_t> compute(n);
  std::vector<std::unique_ptr<Gemm>> gemms;
  std::vector<DeviceBuffer> a, b, out;
  for (int i = 0; i < n; ++i) {
    BRAID_CUDA(cudaSetDevice(i));
    BRAID_CUDA(cudaStreamCreateWithFlags(&compute[i], cudaStreamNonBlocking));
    gemms.push_back(std::make_unique<Gemm>(compute[i]));
    a.emplace_back(static_cast<std::size_t>(2 * dim * dim));
    b.emplace_back(static_cast<std::size_t>(2 * dim * dim));
    out.emplace_back(static_cast<std::size_t>(2 * dim * dim));
    BRAID_CUDA(cudaMemset(a.back().get(), 0, a.back().bytes()));
    BRAID_CUDA(cudaMemset(b.back().get(), 0, b.back().bytes()));
  }
  BRAID_CUDA(cudaSetDevice(0));
  const GemmCall call{dim, dim, dim, false, true};
  auto gemm_all = [&](int reps) {
    for (int r = 0; r < reps; ++r)
      for (int i = 0; i < n; ++i) {
        BRAID_CUDA(cudaSetDevice(i));
        gemms[i]->run(call, a[i].get(), b[i].get(), out[i].get());
      }
    BRAID_CUDA(cudaSetDevice(0));
  };
  std::unique_ptr<Group> group;
  void* host = nullptr;
  DeviceBuffer copy_src;
  cudaStream_t copy_stream = nullptr;
  if (collective) {
    group = std::make_unique<Group>(*nccl, n, comm_bytes);
  } else {
    BRAID_CUDA(cudaMallocHost(&host, static_cast<std::size_t>(comm_bytes)));
    copy_src = DeviceBuffer(static_cast<std::size_t>(comm_bytes));
    BRAID_CUDA(cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking));
  }
  cudaStream_t comm_stream = collective ? group->streams[0] : copy_stream;
  auto comm_all = [&](int reps) {
    for (int r = 0; r < reps; ++r) {
      if (collective)
        group->launch(CollectiveKind::AllReduce, comm_bytes);
      else
        BRAID_CUDA(cudaMemcpyAsync(host, copy_src.get(), static_cast<std::size_t>(comm_bytes),
                                   cudaMemcpyDeviceToHost, copy_stream));
    }
  };
  cudaEvent_t c0, c1, m0, m1;
  for (cudaEvent_t* e : {&c0, &c1, &m0, &m1}) BRAID_CUDA(cudaEventCreate(e));
  auto sync_all = [&] {
    for (int i = 0; i < n; ++i) {
      BRAID_CUDA(cudaSetDevice(i));
      BRAID_CUDA(cudaDeviceSynchronize());
    }
    BRAID_CUDA(cudaSetDevice(0));
  };
  auto elapsed = [](cudaEvent_t x, cudaEvent_t y) {
    float ms = 0;
    BRAID_CUDA(cudaEventElapsedTime(&ms, x, y));
    return ms * 1e-3;
  };
  // Warm-up and per-call estimates.
  gemm_all(3);
  comm_all(3);
  sync_all();
  BRAID_CUDA(cudaEventRecord(c0, compute[0]));
  gemm_all(1);
  BRAID_CUDA(cudaEventRecord(c1, compute[0]));
  BRAID_CUDA(cudaEventRecord(m0, comm_stream));
  comm_all(1);
  BRAID_CUDA(cudaEventRecord(m1, comm_stream));
  sync_all();
  const int gemm_reps = std::clamp(static_cast<int>(0.1 / elapsed(c0, c1)), 3, 2000);
  const int comm_reps = std::clamp(static_cast<int>(0.1 / elapsed(m0, m1)), 3, 2000);

  BRAID_CUDA(cudaEventRecord(c0, compute[0]));
  gemm_all(gemm_reps);
  BRAID_CUDA(cudaEventRecord(c1, compute[0]));
  sync_all();
  c.compute_alone_s = elapsed(c0, c1) / gemm_reps;
  BRAID_CUDA(cudaEventRecord(m0, comm_stream));
  comm_all(comm_reps);
  BRAID_CUDA(cudaEventRecord(m1, comm_stream));
  sync_all();
  c.comm_alone_s = elapsed(m0, m1) / comm_reps;

  // Together: both streams start from the same point and each is timed on its own stream. The
  // shorter of the two runs fully overlapped by the longer (both are ~100 ms alone).
  BRAID_CUDA(cudaEventRecord(m0, comm_stream));
  BRAID_CUDA(cudaEventRecord(c0, compute[0]));
  comm_all(comm_reps);
  BRAID_CUDA(cudaEventRecord(m1, comm_stream));
  gemm_all(gemm_reps);
  BRAID_CUDA(cudaEventRecord(c1, compute[0]));
  sync_all();
  c.compute_together_s = elapsed(c0, c1) / gemm_reps;
  c.comm_together_s = elapsed(m0, m1) / comm_reps;

  for (cudaEvent_t e : {c0, c1, m0, m1}) cudaEventDestroy(e);
  group.reset();
  if (host) cudaFreeHost(host);
  if (copy_stream) cudaStreamDestroy(copy_stream);
  gemms.clear();
  for (int i = 0; i < n; ++i) {
    BRAID_CUDA(cudaSetDevice(i));
    cudaStreamDestroy(compute[i]);
  }
  BRAID_CUDA(cudaSetDevice(0));
  return c;
}

}  // namespace braid::profiler
