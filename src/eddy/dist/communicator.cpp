// The single-process communicator, the choice of the default one, and the job-wide abort.

#include "eddy/dist/communicator.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "eddy/dist/mpi_communicator.h"

namespace eddy::dist {
namespace {

void check_same_layout(std::string_view op, const Tensor& in, const Tensor& out) {
  EDDY_CHECK(in.shape() == out.shape() && in.dtype() == out.dtype(), op, ": input ", in.shape(), " ", in.dtype(),
             " and output ", out.shape(), " ", out.dtype(), " differ");
}

class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int node_rank() const override { return 0; }
  std::string_view kind() const override { return "single-process"; }
  void barrier() override {}
  void allreduce(const Tensor& in, const Tensor& out, ReduceOp op) override {
    check_reduce_op("allreduce", in, op);
    copy("allreduce", in, out);
  }
  void reduce(const Tensor& in, const Tensor& out, int root) override {
    check_root("reduce", root);
    copy("reduce", in, out);
  }
  void allgather(const Tensor& in, const Tensor& out) override { copy("allgather", in, out); }
  void reduce_scatter(const Tensor& in, const Tensor& out) override { copy("reduce_scatter", in, out); }
  void alltoall(const Tensor& in, const Tensor& out) override { copy("alltoall", in, out); }
  void broadcast(const Tensor&, int root) override { check_root("broadcast", root); }
  void send(const Tensor&, int dest, int) override {
    throw Error(cat("send: no rank ", dest, " in a single-process run (start the job with mpirun)"));
  }
  void recv(const Tensor&, int source, int) override {
    throw Error(cat("recv: no rank ", source, " in a single-process run (start the job with mpirun)"));
  }
  std::unique_ptr<Communicator> split(int, int) override { return std::make_unique<SingleProcessCommunicator>(); }
  [[noreturn]] void abort(int code) override { std::exit(code); }

 private:
  static void copy(std::string_view op, const Tensor& in, const Tensor& out) {
    check_same_layout(op, in, out);
    Tensor target = out;
    // Compared by storage and offset rather than host address: the tensors may be on a GPU.
    if (in.storage() != out.storage() || in.offset() != out.offset()) target.copy_(in);
  }
  static void check_root(std::string_view op, int root) {
    EDDY_CHECK(root == 0, op, ": root ", root, " is not a rank of this 1-process job");
  }
};

// Set by mpirun/mpiexec (OpenMPI), by PMIx launchers (srun --mpi=pmix, prterun) and by PMI ones
// (MPICH's hydra, srun --mpi=pmi2).
bool started_by_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(name)) return true;
  }
  return false;
}

std::atomic<int64_t> traffic_calls{0}, traffic_bytes{0};

}  // namespace

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* value = std::getenv(name)) return std::max(1, std::atoi(value));
  }
  return 1;
}

void check_reduce_op(std::string_view op_name, const Tensor& t, ReduceOp op) {
  EDDY_CHECK(t.dtype() != DType::b8, op_name, ": cannot reduce a bool tensor");
  EDDY_CHECK(op != ReduceOp::mean || is_inexact(t.dtype()), op_name, ": mean needs a floating or complex tensor, got ",
             t.dtype());
  EDDY_CHECK(op != ReduceOp::max || !is_complex(t.dtype()), op_name, ": max needs a real tensor, got ", t.dtype());
}

std::unique_ptr<Communicator> make_single_process_communicator() {
  return std::make_unique<SingleProcessCommunicator>();
}

Communicator& default_communicator() {
  static const std::unique_ptr<Communicator> world = [] {
    if (built_with_mpi() && started_by_launcher()) return make_mpi_world_communicator();
    EDDY_CHECK(launcher_world_size() == 1, "this eddy was built without MPI (EDDY_WITH_MPI=OFF), but a launcher "
               "started it as one of ", launcher_world_size(), " processes, each of which would run the whole job "
               "alone and write the same files; run one process, or build eddy with MPI (docs/distributed.md)");
    return make_single_process_communicator();
  }();
  return *world;
}

void abort_job(const std::string& message, int code) {
  // default_communicator() can itself be what failed (a build without MPI under a launcher): then
  // every process reports that alone, as one process would.
  Communicator* world = nullptr;
  try {
    world = &default_communicator();
  } catch (const std::exception&) {
  }
  if (!world || world->size() == 1) {
    std::fprintf(stderr, "eddy: error: %s\n", message.c_str());
    std::fflush(stderr);
    std::exit(code);
  }
  std::fprintf(stderr, "eddy: error (rank %d): %s\n", world->rank(), message.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  world->abort(code);
  std::_Exit(code);  // not reached: abort() never returns, but GCC does not see [[noreturn]] through a virtual call
}

CollectiveTraffic collective_traffic() {
  return CollectiveTraffic{traffic_calls.load(std::memory_order_relaxed), traffic_bytes.load(std::memory_order_relaxed)};
}

void count_collective(const Tensor& input) {
  traffic_calls.fetch_add(1, std::memory_order_relaxed);
  traffic_bytes.fetch_add(input.numel() * static_cast<int64_t>(dtype_size(input.dtype())), std::memory_order_relaxed);
}

}  // namespace eddy::dist
