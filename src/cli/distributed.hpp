// braid's MPI layer: the only code that knows MPI (compiled with BRAID_MPI into braid-mpi). It
// initialises MPI when an MPI launcher started the process, and turns MPI_COMM_WORLD into the
// ProcessGroup that the explorer shares its work over. Built without MPI (plain braid), or run
// without a launcher, every function here describes one process. It does not split or merge
// anything: the explorer does (include/braid/explore.hpp).
#pragma once

#include <functional>

#include "braid/explore.hpp"

namespace braid::cli {

// MPI for the life of main(): initialised (threads may run, only the main thread calls MPI) when
// the environment shows a launcher (mpirun, srun: OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_SIZE),
// finalised at the end. Without one braid never touches MPI: OpenMPI's singleton start forks a
// helper daemon, slow and fragile in containers.
class MpiSession {
 public:
  MpiSession(int& argc, char**& argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

// The processes of this run: MPI_COMM_WORLD when MPI is initialised, otherwise one process.
ProcessGroup world_group();
// Rank 0, the one that prints and writes files (true without MPI).
bool is_root();
// Worker threads per process when --jobs is not given: this node's cores divided among the ranks
// on this node (0, meaning all cores, without MPI).
int default_jobs();
// Ends every process of the job after an internal error on one of them (an uneven failure would
// otherwise leave the others waiting in an exchange). Returns without MPI or with one process.
void abort_job(int code);

// Runs `check` (input checks that may differ between processes, like an output file that only
// rank 0 writes) and makes every process agree: when it throws InputError on any process, every
// process throws the lowest rank's one (exit 2 everywhere, one message from rank 0).
void agree(const ProcessGroup& group, const std::function<void()>& check);

}  // namespace braid::cli
