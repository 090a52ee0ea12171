#pragma once
// Communicator: the processes of a job and the raw collectives between them, on dense host
// tensors and outside autodiff. The differentiable collectives (collectives.h) and data
// parallelism (data_parallel.h) are built on it. Two implementations: MPI (when eddy is built
// with EDDY_WITH_MPI and the process was started by a launcher such as mpirun or srun) and a
// single-process one, which every build has; NCCL will plug in behind the same interface.
//
// Every call is collective unless it says otherwise: all ranks make the same calls in the same
// order with tensors of the same shape and dtype, or the job hangs. Errors in the arguments are
// eddy::Error and are found on the calling rank before any message is sent.

#include <memory>
#include <string>
#include <string_view>

#include "eddy/core/tensor.h"

namespace eddy::dist {

// mean is the sum divided by the number of ranks (inexact dtypes only); max is for real dtypes.
enum class ReduceOp { sum, mean, max };

// Throws unless `op` applies to `t`'s dtype; the same check on every communicator.
void check_reduce_op(std::string_view op_name, const Tensor& t, ReduceOp op);

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This rank's place among the ranks of this communicator on its own machine (0 on a machine
  // with one), which picks its GPU when a run asks for `cuda` without a number.
  virtual int node_rank() const = 0;
  // "mpi" or "single-process", for logs.
  virtual std::string_view kind() const = 0;

  virtual void barrier() = 0;
  // out = op over ranks of `in`, elementwise; same shape and dtype on every rank. `out` may be
  // `in` (in place).
  virtual void allreduce(const Tensor& in, const Tensor& out, ReduceOp op) = 0;
  // Rank `root`'s `out` = sum over ranks of `in`; other ranks' `out` is left untouched.
  virtual void reduce(const Tensor& in, const Tensor& out, int root) = 0;
  // `out` [rows, ...] = every rank's `in`, in rank order along axis 0, rank r's being its rows
  // shard_range(rows, size, r) (core/distribution.h: [rows / size, ...] each where size divides).
  virtual void allgather(const Tensor& in, const Tensor& out) = 0;
  // Rank r's `out` = its rows shard_range(rows, size, r) of the sum over ranks of `in` [rows, ...].
  virtual void reduce_scatter(const Tensor& in, const Tensor& out) = 0;
  // `in` and `out` [size * n, ...], in blocks of n rows: block j of rank r's `out` is block r of
  // rank j's `in` (MPI_Alltoall).
  virtual void alltoall(const Tensor& in, const Tensor& out) = 0;
  // Overwrites `buffer` on every rank with rank `root`'s.
  virtual void broadcast(const Tensor& buffer, int root) = 0;
  // Point to point (not collective): blocking send of `in` to `dest`, receive into `out` from
  // `source`; shapes and dtypes must agree on both sides.
  virtual void send(const Tensor& in, int dest, int tag) = 0;
  virtual void recv(const Tensor& out, int source, int tag) = 0;
  // The ranks that pass the same `color`, as a communicator of their own, numbered by `key` (ties
  // by rank here): MPI_Comm_split. Collective over this communicator. Process meshes make one per
  // mesh axis.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  // Ends every process of the job with `code`, now (MPI_Abort); never returns.
  [[noreturn]] virtual void abort(int code) = 0;
};

// What this process has handed to communicators since it started: how many calls that send
// (allreduce, reduce, allgather, reduce_scatter, alltoall, broadcast, send) and the bytes of their
// inputs, whoever made them (the differentiable collectives of collectives.h, the data-parallel
// helpers, ShardedOptimizer). For logs and benchmarks. A communicator of one process sends
// nothing and counts nothing.
struct CollectiveTraffic {
  int64_t calls = 0;
  int64_t bytes = 0;
};
CollectiveTraffic collective_traffic();
// Counts one call that sends `input` (for Communicator implementations).
void count_collective(const Tensor& input);

// The process-wide communicator, created on first use: MPI's world when built with MPI and
// started by a launcher (MPI is initialised then with MPI_Init_thread, FUNNELED, and finalised
// at exit), the single-process one otherwise. A plain `./program` therefore never starts MPI.
Communicator& default_communicator();

// A communicator of one process: collectives copy, point to point has no peer.
std::unique_ptr<Communicator> make_single_process_communicator();

// Whether this build has the MPI communicator (EDDY_WITH_MPI).
bool built_with_mpi();

// How many processes a launcher started this job with, as its environment says
// (OMPI_COMM_WORLD_SIZE from OpenMPI's mpirun, PMI_SIZE from PMI launchers); 1 without one.
// default_communicator() refuses a job of several processes in a build without MPI: each would
// run the whole problem alone and write the same files.
int launcher_world_size();

// Prints "eddy: error (rank r): message" to stderr (or "eddy: error: message" on one process)
// and ends the whole job with `code`: with several ranks through Communicator::abort, so a rank
// that fails while the others wait in a collective cannot hang the job.
[[noreturn]] void abort_job(const std::string& message, int code = 1);

}  // namespace eddy::dist
