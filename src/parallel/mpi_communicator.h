// The Communicator over MPI (OpenMPI from Debian): the ranks of `mpirun -np N`, MPI_COMM_WORLD. Collectives
// map to MPI_Allreduce (float sums), MPI_Gatherv and, for broadcasts, a message from the root to each rank, which
// the others wait for sleeping after 2 ms (a worker of an idle server uses no CPU; MPI_Bcast polls). MPI is initialized
// for serialized use (the server steps the engine on a thread other than main); errors are fatal, so a rank
// that dies stops the whole job (mpirun names it) instead of leaving the others waiting.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "parallel/communicator.h"

namespace kvs {

// Whether this process was started by an MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE / PMI_SIZE).
bool launched_by_mpi();
// Whether this build has MPI.
bool mpi_available();
// Initializes MPI (once) and returns MPI_COMM_WORLD's communicator; finalizes when it is destroyed.
Expected<std::unique_ptr<Communicator>> mpi_world();
// A rank that cannot go on before the others can hear it (its shard did not load): prints "kvserve: rank R: what"
// and aborts the whole MPI job, so that no rank waits for it.
[[noreturn]] void mpi_abort_job(const std::string& what);

}  // namespace kvs
