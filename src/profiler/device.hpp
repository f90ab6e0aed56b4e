// The CUDA plumbing braid-profile's measurements share: error checks that name what failed,
// device buffers, CUDA-event timing (warm-up, then the median of repeats) and what the run
// records about the machine (GPU, driver and library versions). Host code only; the kernels
// are in kernels.cu.
#pragma once

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

namespace braid::profiler {

// A CUDA, cuBLAS, cuDNN or NCCL call failed: `what` names the call and the library's message.
struct GpuError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A kernel produced a wrong result in its correctness check (the run must stop: a broken kernel
// cannot be allowed to produce a fast number).
struct CheckError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void cuda_check(cudaError_t e, const char* call, const char* file, int line);
#define BRAID_CUDA(call) ::braid::profiler::cuda_check((call), #call, __FILE__, __LINE__)

// Owns `bytes` of device memory on the current device.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  int device_ = 0;
};

// A device buffer of bf16 values copied to the host as floats (for the correctness checks).
std::vector<float> bf16_to_host(const DeviceBuffer& d);

struct TimingOptions {
  int warmup = 5;
  int repeats = 20;
  double min_sample_s = 2e-4;  // short kernels are launched several times per event pair
};

// Runs `fn` (which enqueues work on `stream`) `warmup` times, then times `repeats` samples with
// CUDA events and returns the median seconds per call.
double time_median_s(cudaStream_t stream, const std::function<void()>& fn,
                     const TimingOptions& opt);

struct DeviceInfo {
  int count = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0;
  double memory_bytes = 0;
  std::string driver, runtime;
};
// Visible GPUs; throws GpuError with the CUDA message when there is none or no driver.
DeviceInfo query_devices();

std::string utc_now_iso();
std::string host_name();

}  // namespace braid::profiler
