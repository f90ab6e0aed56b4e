#include "device.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <sstream>
#include <vector>

#include "bf16.hpp"

namespace braid::profiler {

void cuda_check(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  throw GpuError(std::string(call) + " failed: " + cudaGetErrorString(e) + " (" + file + ":" +
                 std::to_string(line) + ")");
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  BRAID_CUDA(cudaGetDevice(&device_));
  if (bytes > 0) BRAID_CUDA(cudaMalloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) {
    int current = 0;
    cudaGetDevice(&current);
    cudaSetDevice(device_);
    cudaFree(ptr_);
    cudaSetDevice(current);
  }
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(o.ptr_), bytes_(o.bytes_), device_(o.device_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    this->~DeviceBuffer();
    ptr_ = o.ptr_, bytes_ = o.bytes_, device_ = o.device_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

double time_median_s(cudaStream_t stream, const std::function<void()>& fn,
                     const TimingOptions& opt) {
  cudaEvent_t start, stop;
  BRAID_CUDA(cudaEventCreate(&start));
  BRAID_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < opt.warmup; ++i) fn();
  BRAID_CUDA(cudaStreamSynchronize(stream));
  BRAID_CUDA(cudaGetLastError());
  auto sample = [&](int calls) {
    BRAID_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < calls; ++i) fn();
    BRAID_CUDA(cudaEventRecord(stop, stream));
    BRAID_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    BRAID_CUDA(cudaEventElapsedTime(&ms, start, stop));
    return ms * 1e-3 / calls;
  };
  // Short kernels: enough calls per sample that launch gaps and event resolution (~0.5 us)
  // stay small against the sample.
  const double one = sample(1);
  const int calls =
      one >= opt.min_sample_s
          ? 1
          : std::min(1000, static_cast<int>(std::ceil(opt.min_sample_s / std::max(one, 1e-7))));
  std::vector<double> t;
  for (int i = 0; i < opt.repeats; ++i) t.push_back(sample(calls));
  BRAID_CUDA(cudaGetLastError());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(t.begin(), t.end());
  const std::size_t n = t.size();
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

// The kernel module's version ("550.54.15") from /proc, as nvidia-smi reports it; empty if absent.
std::string driver_version() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(f, line)) return "";
  const std::string key = "Kernel Module";
  const std::size_t at = line.find(key);
  if (at == std::string::npos) return "";
  std::istringstream rest(line.substr(at + key.size()));
  std::string v;
  rest >> v;
  return v;
}

DeviceInfo query_devices() {
  DeviceInfo info;
  int driver = 0;
  const cudaError_t de = cudaDriverGetVersion(&driver);
  const cudaError_t ce = cudaGetDeviceCount(&info.count);
  if (ce != cudaSuccess || info.count == 0) {
    throw GpuError(std::string("no CUDA GPU is visible (") +
                   (ce != cudaSuccess ? cudaGetErrorString(ce) : "device count is 0") +
                   (de == cudaSuccess && driver == 0 ? "; no NVIDIA driver is installed" : "") +
                   "); braid-profile measures the GPUs of the machine it runs on");
  }
  cudaDeviceProp p{};
  BRAID_CUDA(cudaGetDeviceProperties(&p, 0));
  info.name = p.name;
  info.sm_major = p.major, info.sm_minor = p.minor;
  info.memory_bytes = static_cast<double>(p.totalGlobalMem);
  auto version = [](int v) {
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  };
  info.driver = driver_version();
  if (info.driver.empty()) info.driver = "supports CUDA " + version(driver);
  int runtime = 0;
  BRAID_CUDA(cudaRuntimeGetVersion(&runtime));
  info.runtime = version(runtime);
  return info;
}

std::string utc_now_iso() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::vector<float> bf16_to_host(const DeviceBuffer& d) {
  std::vector<std::uint16_t> raw(d.bytes() / 2);
  BRAID_CUDA(cudaMemcpy(raw.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost));
  std::vector<float> out(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) out[i] = bf16_to_float(raw[i]);
  return out;
}

}  // namespace braid::profiler
