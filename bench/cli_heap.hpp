// The CLI's heap settings for the benchmarks (prepare_heap in src/cli/main.cpp, less its huge
// pages): arrays up to 32 MiB come from the heap, which keeps what is freed, so an iteration
// reuses the pages of the one before as a CLI run reuses those of its earlier arrays. Without them
// glibc's sliding mmap threshold decides, from one array size to the next, whether each iteration
// faults in fresh pages (simulator_bench's BM_Lower: 4.3 or 6.6-10 ms for the same code).
#pragma once

#include <malloc.h>

namespace braid_bench {

inline void heap_as_the_cli() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace braid_bench
