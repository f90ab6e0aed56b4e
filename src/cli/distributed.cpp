// MPI behind ProcessGroup: all_gather is MPI_Allgather of the sizes then MPI_Allgatherv of the
// bytes on MPI_COMM_WORLD. Only the main thread calls MPI (the explorer exchanges between its
// parallel sections), so MPI_THREAD_FUNNELED is enough. Compiled twice: with BRAID_MPI into
// braid-mpi, without into braid, which then links no MPI library and starts without loading one.
#include "distributed.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "braid/error.hpp"

#ifdef BRAID_MPI
// The C API only: the deprecated C++ bindings' header does not compile cleanly with -Wextra.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace braid::cli {

namespace {

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(var) != nullptr) return true;
  return false;
}

#ifndef BRAID_MPI
// The launcher's own count of processes (1 when it says nothing).
// A launcher variable as a number; text that is not one counts as absent.
int launcher_number(const char* text, int absent) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  return end != text && *end == '\0' && v >= 0 && v < (1L << 30) ? static_cast<int>(v) : absent;
}
int launched_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"})
    if (const char* v = std::getenv(var)) return std::max(1, launcher_number(v, 1));
  return 1;
}
int launched_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(var)) return launcher_number(v, 0);
  return 0;
}
#endif

#ifdef BRAID_MPI

bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

std::vector<std::string> all_gather(const std::string& bytes) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (bytes.size() > static_cast<std::size_t>(INT_MAX))
    throw std::runtime_error("MPI exchange: more than 2 GiB from one rank");
  int count = static_cast<int>(bytes.size());
  std::vector<int> counts(size), displs(size);
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::int64_t total = 0;
  for (int r = 0; r < size; ++r) {
    if (total > INT_MAX) throw std::runtime_error("MPI exchange: more than 2 GiB in all");
    displs[r] = static_cast<int>(total);
    total += counts[r];
  }
  if (total > INT_MAX) throw std::runtime_error("MPI exchange: more than 2 GiB in all");
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Allgatherv(bytes.data(), count, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE,
                 MPI_COMM_WORLD);
  std::vector<std::string> out(size);
  for (int r = 0; r < size; ++r) out[r] = all.substr(displs[r], counts[r]);
  return out;
}
#endif

}  // namespace

MpiSession::MpiSession([[maybe_unused]] int& argc, [[maybe_unused]] char**& argv) {
  if (!launched_by_mpi()) return;
#ifdef BRAID_MPI
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
#else
  // Several copies of the one-process build would each run the whole command and print it.
  if (launched_size() > 1) {
    if (launched_rank() == 0)
      std::fprintf(stderr,
                   "braid: started by an MPI launcher with %d processes, but this braid runs one "
                   "process; run braid-mpi under mpirun/srun (docs/distributed.md)\n",
                   launched_size());
    std::exit(2);
  }
#endif
}

MpiSession::~MpiSession() {
#ifdef BRAID_MPI
  if (mpi_running()) MPI_Finalize();
#endif
}

ProcessGroup world_group() {
  ProcessGroup group;
#ifdef BRAID_MPI
  if (!mpi_running()) return group;
  MPI_Comm_rank(MPI_COMM_WORLD, &group.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &group.size);
  group.all_gather = all_gather;
#endif
  return group;
}

bool is_root() { return world_group().rank == 0; }

int default_jobs() {
#ifdef BRAID_MPI
  if (!mpi_running()) return 0;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local = 1;
  MPI_Comm_size(node, &local);
  MPI_Comm_free(&node);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, local));
#else
  return 0;
#endif
}

void abort_job([[maybe_unused]] int code) {
#ifdef BRAID_MPI
  if (mpi_running() && world_group().size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
}

void agree(const ProcessGroup& group, const std::function<void()>& check) {
  std::string mine;  // empty: no error; else where \0 field \0 problem
  try {
    check();
  } catch (const InputError& e) {
    if (group.size <= 1) throw;
    mine = e.where + '\0' + e.field + '\0' + e.problem;
  }
  if (group.size <= 1) return;
  for (const std::string& m : group.all_gather(mine)) {
    if (m.empty()) continue;
    const std::size_t a = m.find('\0'), b = m.find('\0', a + 1);
    throw InputError(m.substr(0, a), m.substr(a + 1, b - a - 1), m.substr(b + 1));
  }
}

}  // namespace braid::cli
