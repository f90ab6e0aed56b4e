// braid: the executable. Prepares the process (its heap, MPI when a launcher started it) and runs
// the command line through the driver (driver.cpp), which parses it and reports errors.
#include <cstdint>
#include <cstdlib>

#include <malloc.h>
#include <sys/mman.h>

#include "distributed.hpp"
#include "driver.hpp"

namespace {

// One simulation allocates and frees its working arrays in turn (the DAG's lists, the timeline,
// the report's). Served from one heap that keeps what is freed, later arrays reuse pages already
// mapped instead of faulting fresh ones in; and the heap's first 62 MiB, reserved up front, are
// marked for transparent huge pages, so that a run's arrays fault in 2 MiB at a time rather than
// 4 KiB (the unit-level qwen2 run: about 8,100 page faults before, 300-460 now, a quarter less
// CPU time; docs/limits.md). Arrays above 32 MiB (runs of millions of ops) still get their own
// mappings, returned when freed, so that arrays grown by doubling leave no freed copies in the
// heap. Where the kernel has transparent huge pages off, madvise changes nothing. Addresses never
// reach an output, so none of this changes a result.
void prepare_heap() {
  constexpr int kOwnMapping = 32 << 20;
  constexpr std::size_t kBlock = std::size_t{31} << 20, kBlocks = 2;
  mallopt(M_MMAP_THRESHOLD, kOwnMapping);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Two blocks below the mapping threshold: from the heap, one after the other.
  void* block[kBlocks] = {};
  for (void*& b : block) b = std::malloc(kBlock);
  // madvise wants a page-aligned start: the first 2 MiB boundary inside the first block.
  auto* const first = static_cast<char*>(block[0]);
  auto* const last = static_cast<char*>(block[kBlocks - 1]);
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const std::uintptr_t misalign = reinterpret_cast<std::uintptr_t>(first) % kHuge;
  char* const begin = first + (misalign == 0 ? 0 : kHuge - misalign);
  if (first != nullptr && last > first && last + kBlock > begin)
    madvise(begin, static_cast<std::size_t>(last + kBlock - begin), MADV_HUGEPAGE);
  for (void* b : block) std::free(b);  // kept by the heap (below the trim threshold)
}

}  // namespace

int main(int argc, char** argv) {
  prepare_heap();
  const braid::cli::MpiSession mpi(argc, argv);
  return braid::cli::run(argc, argv);
}
