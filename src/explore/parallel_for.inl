// parallel_for (pipeline.hpp): a fixed set of std::jthreads taking indices from one atomic
// counter; results land in caller-owned slots by index, so their order never depends on timing.
#pragma once

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

namespace braid::explore {

template <typename F>
void parallel_for(int n, int jobs, F&& f) {
  const int threads = std::min(resolve_jobs(jobs), std::max(n, 1));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(std::max(n, 0)));
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      try {
        f(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  if (threads <= 1) {
    worker();
  } else {
    std::vector<std::jthread> pool;
    pool.reserve(threads - 1);
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
  }  // jthreads join here
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace braid::explore
