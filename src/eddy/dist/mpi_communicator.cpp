// The MPI communicator: over MPI_COMM_WORLD, or over a part of it made by split().

#include "eddy/dist/mpi_communicator.h"

#include "eddy/core/backend.h"
#include "eddy/core/distribution.h"
#include "eddy/ops/ops.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <vector>

namespace eddy::dist {
namespace {

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::c64: return MPI_C_FLOAT_COMPLEX;
    case DType::c128: return MPI_C_DOUBLE_COMPLEX;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::b8: return MPI_C_BOOL;
    case DType::bf16:
    case DType::f16: break;  // MPI has no 16-bit float to add
  }
  throw Error(cat("mpi: no MPI type for ", dtype, "; cast the tensor to float32 first"));
}

// Element count of a dense host tensor, as the int MPI counts in.
int count_of(std::string_view op, const Tensor& t) {
  EDDY_CHECK(t.defined(), op, ": undefined tensor");
  EDDY_CHECK(t.device() == cpu(), op, ": the MPI communicator works on host tensors, got one on ", t.device());
  EDDY_CHECK(t.is_contiguous(), op, ": needs a contiguous tensor (call contiguous() first), got shape ", t.shape(),
             " with strides ", t.strides());
  EDDY_CHECK(t.numel() <= INT_MAX, op, ": ", t.numel(), " elements is more than one MPI message holds (",
             INT_MAX, "); split the tensor");
  return static_cast<int>(t.numel());
}


void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

class MpiCommunicator final : public Communicator {
 public:
  // Over `comm`, which this object frees unless it is MPI_COMM_WORLD.
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &node_rank_);
    MPI_Comm_free(&node);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm_ != MPI_COMM_WORLD && !finalized) MPI_Comm_free(&comm_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int node_rank() const override { return node_rank_; }
  std::string_view kind() const override { return "mpi"; }
  void barrier() override { MPI_Barrier(comm_); }

 private:
  // Runs `collective` on host tensors: `in` and `out` themselves when both are (or are undefined),
  // else host copies, `out`'s copy written back to its device after. An in-place call (one tensor
  // as both) stays in place on the host. `out`'s copy starts from its values, which a reduce
  // leaves untouched on the ranks other than its root.
  template <typename Collective>
  static void through_host(const Tensor& in, const Tensor& out, Collective&& collective) {
    const auto off_host = [](const Tensor& t) { return t.defined() && t.device() != cpu(); };
    if (!off_host(in) && !off_host(out)) return collective(in, out);
    const bool in_place = in.defined() && out.defined() && element_address(in) == element_address(out);
    const Tensor host_in = in.defined() ? host_copy(in) : Tensor();
    const Tensor host_out = in_place ? host_in : out.defined() ? device_copy(out, cpu()) : Tensor();
    collective(host_in, host_out);
    if (out.defined()) Tensor(out).copy_(device_copy(host_out, out.device()));
  }

  void allreduce_on_host(const Tensor& in, const Tensor& out, ReduceOp op) {
    const int n = same_layout("allreduce", in, out);
    check_reduce_op("allreduce", in, op);
    const void* send = in.raw_data() == out.raw_data() ? MPI_IN_PLACE : in.raw_data();
    count_collective(in);
    MPI_Allreduce(send, out.raw_data(), n, mpi_type(in.dtype()), op == ReduceOp::max ? MPI_MAX : MPI_SUM,
                  comm_);
    if (op == ReduceOp::mean) {
      Tensor result = out;
      result.copy_(out / static_cast<double>(size_));
    }
  }

  void reduce_on_host(const Tensor& in, const Tensor& out, int root) {
    const int n = same_layout("reduce", in, out);
    check_rank("reduce", root);
    check_reduce_op("reduce", in, ReduceOp::sum);
    const void* send = rank_ == root && in.raw_data() == out.raw_data() ? MPI_IN_PLACE : in.raw_data();
    count_collective(in);
    MPI_Reduce(send, out.raw_data(), n, mpi_type(in.dtype()), MPI_SUM, root, comm_);
  }

  // Each rank's element count and offset in a tensor of `rows` rows of `row_elements` split over
  // the ranks as shard_range splits it, for the v-collectives.
  struct RankBlocks {
    std::vector<int> counts, offsets;
  };
  RankBlocks rank_blocks(std::string_view op, int64_t rows, int64_t row_elements) const {
    EDDY_CHECK(rows * row_elements <= INT_MAX, op, ": ", rows * row_elements, " elements is more than one MPI "
               "message holds (", INT_MAX, "); split the tensor");
    RankBlocks blocks;
    for (int r = 0; r < size_; ++r) {
      const ShardRange range = shard_range(rows, size_, r);
      blocks.counts.push_back(static_cast<int>(range.size() * row_elements));
      blocks.offsets.push_back(static_cast<int>(range.first * row_elements));
    }
    return blocks;
  }

  // `whole` [rows, ...] and this rank's `part` of its rows: their row count, after checking that
  // the part is this rank's shard_range of them with the same trailing axes and dtype.
  int64_t check_part(std::string_view op, const Tensor& part, const Tensor& whole) const {
    count_of(op, part);
    count_of(op, whole);
    const bool rows_split = part.dim() == whole.dim() && whole.dim() >= 1 &&
                            part.shape()[0] == shard_range(whole.shape()[0], size_, rank_).size() &&
                            std::equal(part.shape().begin() + 1, part.shape().end(), whole.shape().begin() + 1);
    EDDY_CHECK(rows_split && part.dtype() == whole.dtype(), op, ": rank ", rank_, "'s part ", part.shape(), " ",
               part.dtype(), " is not its share of the rows of ", whole.shape(), " ", whole.dtype(), " over ",
               size_, " ranks");
    return whole.shape()[0];
  }

  void allgather_on_host(const Tensor& in, const Tensor& out) {
    const int64_t rows = check_part("allgather", in, out);
    const RankBlocks blocks = rank_blocks("allgather", rows, rows ? out.numel() / rows : 0);
    count_collective(in);
    MPI_Allgatherv(in.raw_data(), static_cast<int>(in.numel()), mpi_type(in.dtype()), out.raw_data(),
                   blocks.counts.data(), blocks.offsets.data(), mpi_type(in.dtype()), comm_);
  }

  void reduce_scatter_on_host(const Tensor& in, const Tensor& out) {
    const int64_t rows = check_part("reduce_scatter", out, in);
    check_reduce_op("reduce_scatter", in, ReduceOp::sum);
    const RankBlocks blocks = rank_blocks("reduce_scatter", rows, rows ? in.numel() / rows : 0);
    count_collective(in);
    MPI_Reduce_scatter(in.raw_data(), out.raw_data(), blocks.counts.data(), mpi_type(in.dtype()), MPI_SUM, comm_);
  }

  void alltoall_on_host(const Tensor& in, const Tensor& out) {
    const int n = same_layout("alltoall", in, out);
    EDDY_CHECK(in.dim() >= 1 && in.shape()[0] % size_ == 0, "alltoall: axis 0 of ", in.shape(),
               " does not split evenly over ", size_, " ranks");
    count_collective(in);
    MPI_Alltoall(in.raw_data(), n / size_, mpi_type(in.dtype()), out.raw_data(), n / size_, mpi_type(in.dtype()),
                 comm_);
  }

  void broadcast_on_host(const Tensor& buffer, int root) {
    const int n = count_of("broadcast", buffer);
    check_rank("broadcast", root);
    count_collective(buffer);
    MPI_Bcast(buffer.raw_data(), n, mpi_type(buffer.dtype()), root, comm_);
  }

  void send_on_host(const Tensor& in, int dest, int tag) {
    const int n = count_of("send", in);
    check_rank("send", dest);
    count_collective(in);
    MPI_Send(in.raw_data(), n, mpi_type(in.dtype()), dest, tag, comm_);
  }

  void recv_on_host(const Tensor& out, int source, int tag) {
    const int n = count_of("recv", out);
    check_rank("recv", source);
    MPI_Recv(out.raw_data(), n, mpi_type(out.dtype()), source, tag, comm_, MPI_STATUS_IGNORE);
  }

 public:
  // MPI reads and writes host memory: tensors on a device go through host copies (through_host).
  // A communicator that reads GPU memory itself (NCCL) is not built yet.
  void allreduce(const Tensor& in, const Tensor& out, ReduceOp op) override {
    through_host(in, out, [&](const Tensor& i, const Tensor& o) { allreduce_on_host(i, o, op); });
  }
  void reduce(const Tensor& in, const Tensor& out, int root) override {
    through_host(in, out, [&](const Tensor& i, const Tensor& o) { reduce_on_host(i, o, root); });
  }
  void allgather(const Tensor& in, const Tensor& out) override {
    through_host(in, out, [&](const Tensor& i, const Tensor& o) { allgather_on_host(i, o); });
  }
  void reduce_scatter(const Tensor& in, const Tensor& out) override {
    through_host(in, out, [&](const Tensor& i, const Tensor& o) { reduce_scatter_on_host(i, o); });
  }
  void alltoall(const Tensor& in, const Tensor& out) override {
    through_host(in, out, [&](const Tensor& i, const Tensor& o) { alltoall_on_host(i, o); });
  }
  void broadcast(const Tensor& buffer, int root) override {
    through_host(buffer, buffer, [&](const Tensor&, const Tensor& o) { broadcast_on_host(o, root); });
  }
  void send(const Tensor& in, int dest, int tag) override {
    through_host(in, Tensor(), [&](const Tensor& i, const Tensor&) { send_on_host(i, dest, tag); });
  }
  void recv(const Tensor& out, int source, int tag) override {
    through_host(Tensor(), out, [&](const Tensor&, const Tensor& o) { recv_on_host(o, source, tag); });
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm part = MPI_COMM_NULL;
    MPI_Comm_split(comm_, color, key, &part);
    return std::make_unique<MpiCommunicator>(part);
  }

  // The whole job, not only this communicator's ranks: the others may be waiting on them.
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this satisfies [[noreturn]]
  }

 private:
  static int same_layout(std::string_view op, const Tensor& in, const Tensor& out) {
    const int n = count_of(op, in);
    count_of(op, out);
    EDDY_CHECK(in.shape() == out.shape() && in.dtype() == out.dtype(), op, ": input ", in.shape(), " ", in.dtype(),
               " and output ", out.shape(), " ", out.dtype(), " differ");
    return n;
  }
  void check_rank(std::string_view op, int rank) const {
    EDDY_CHECK(rank >= 0 && rank < size_, op, ": rank ", rank, " is not in this ", size_, "-process job");
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1, node_rank_ = 0;
};

}  // namespace

bool built_with_mpi() { return true; }

std::unique_ptr<Communicator> make_mpi_world_communicator() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    std::atexit(finalize_at_exit);
  }
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
}

}  // namespace eddy::dist
