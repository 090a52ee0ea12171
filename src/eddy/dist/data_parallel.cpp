#include "eddy/dist/data_parallel.h"

#include <map>

#include "eddy/autodiff/tape.h"
#include "eddy/core/distribution.h"
#include "eddy/ops/ops.h"

namespace eddy::dist {
namespace {

// Tensors grouped by dtype, in order of first appearance, with their offsets in a flat buffer.
struct Bucket {
  DType dtype;
  std::vector<size_t> members;   // indices into the caller's list
  std::vector<int64_t> offsets;  // element offset of each member
  int64_t elements = 0;
};

std::vector<Bucket> buckets_of(const std::vector<Tensor>& tensors) {
  std::vector<Bucket> buckets;
  std::map<DType, size_t> index;
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto [it, added] = index.emplace(tensors[i].dtype(), buckets.size());
    if (added) buckets.push_back(Bucket{tensors[i].dtype(), {}, {}, 0});
    Bucket& bucket = buckets[it->second];
    bucket.members.push_back(i);
    bucket.offsets.push_back(bucket.elements);
    bucket.elements += tensors[i].numel();
  }
  return buckets;
}

// The buffers live where the tensors do, and are written and read through the device's copies
// (the communicator takes them from there; MPI stages device memory through the host).

void pack(const Tensor& buffer, int64_t offset, const Tensor& value) {
  slice(buffer, 0, offset, offset + value.numel()).copy_(reshape(contiguous(value), {-1}));
}

Tensor unpack(const Tensor& buffer, int64_t offset, const Shape& shape) {
  Tensor out = Tensor::empty(shape, buffer.dtype(), buffer.device());
  out.copy_(reshape(slice(buffer, 0, offset, offset + numel(shape)), shape));
  return out;
}

// Where the tensors are (all on one device); the host when there are none.
Device device_of(const std::vector<Tensor>& tensors) { return tensors.empty() ? cpu() : tensors.front().device(); }

// average_gradients and sum_gradients: the ranks' gradients (each parameter's local part, the
// same part on every rank of `comm`) summed, and divided by the ranks when `mean`.
void reduce_gradients(const std::vector<Tensor>& parameters, Communicator& comm, std::span<double> sums, bool mean) {
  if (comm.size() == 1) return;
  NoGradGuard no_grad;
  std::vector<Tensor> locals;
  for (const Tensor& parameter : parameters) locals.push_back(local_part(parameter));
  std::vector<Bucket> buckets = buckets_of(locals);
  if (buckets.empty()) buckets.push_back(Bucket{DType::f64, {}, {}, 0});
  // Each bucket ends with one flag per member (1 where the gradient is defined on this rank);
  // the first also carries `sums`.
  for (size_t b = 0; b < buckets.size(); ++b) {
    const Bucket& bucket = buckets[b];
    const int64_t flags = bucket.elements, extras = flags + static_cast<int64_t>(bucket.members.size());
    std::vector<double> tail(bucket.members.size(), 0.0);
    if (b == 0) tail.insert(tail.end(), sums.begin(), sums.end());
    Tensor buffer = Tensor::empty({extras + static_cast<int64_t>(b == 0 ? sums.size() : 0)}, bucket.dtype,
                                  device_of(locals));
    for (size_t k = 0; k < bucket.members.size(); ++k) {
      const Tensor g = parameters[bucket.members[k]].grad();
      if (g.defined()) {
        pack(buffer, bucket.offsets[k], local_part(g));
        tail[k] = 1;
      } else {
        const int64_t first = bucket.offsets[k];
        slice(buffer, 0, first, first + locals[bucket.members[k]].numel()).fill_(0.0);
      }
    }
    pack(buffer, flags, cast(tensor(tail, {static_cast<int64_t>(tail.size())}, buffer.device()), bucket.dtype));
    comm.allreduce(buffer, buffer, ReduceOp::sum);

    const std::vector<c128> summed_tail = slice(buffer, 0, flags, buffer.numel()).to_vector<c128>();
    if (b == 0) {
      for (size_t i = 0; i < sums.size(); ++i) sums[i] = summed_tail[bucket.members.size() + i].real();
    }
    if (mean) buffer.copy_(buffer / static_cast<double>(comm.size()));
    for (size_t k = 0; k < bucket.members.size(); ++k) {
      if (summed_tail[k].real() == 0) continue;  // undefined on every rank
      const Tensor& parameter = parameters[bucket.members[k]];
      EDDY_CHECK(parameter.impl()->autograd, mean ? "average_gradients" : "sum_gradients", ": parameter ",
                 bucket.members[k], " does not require gradients");
      // A distributed parameter's .grad() is kept as its local part (Tensor::grad() places it).
      parameter.impl()->autograd->grad = unpack(buffer, bucket.offsets[k], locals[bucket.members[k]].shape());
    }
  }
}

}  // namespace

void broadcast_tensors(const std::vector<Tensor>& all, Communicator& comm, int root) {
  if (comm.size() == 1) return;
  // A distributed tensor's parts differ by rank by design; each rank made its own.
  std::vector<Tensor> tensors;
  for (const Tensor& t : all) {
    if (!is_distributed(t)) tensors.push_back(t);
  }
  NoGradGuard no_grad;
  for (const Bucket& bucket : buckets_of(tensors)) {
    Tensor buffer = Tensor::empty({bucket.elements}, bucket.dtype, device_of(tensors));
    for (size_t k = 0; k < bucket.members.size(); ++k) pack(buffer, bucket.offsets[k], tensors[bucket.members[k]]);
    comm.broadcast(buffer, root);
    for (size_t k = 0; k < bucket.members.size(); ++k) {
      Tensor target = tensors[bucket.members[k]];
      target.copy_(unpack(buffer, bucket.offsets[k], target.shape()));
    }
  }
}

void average_gradients(const std::vector<Tensor>& parameters, Communicator& comm, std::span<double> sums) {
  reduce_gradients(parameters, comm, sums, /*mean=*/true);
}

void sum_gradients(const std::vector<Tensor>& parameters, Communicator& comm, std::span<double> sums) {
  reduce_gradients(parameters, comm, sums, /*mean=*/false);
}

int64_t ranks_where(bool flag, Communicator& comm) {
  Tensor count = tensor(std::vector<int64_t>{flag ? 1 : 0});
  if (comm.size() > 1) comm.allreduce(count, count, ReduceOp::sum);
  return count.item<int64_t>();
}

bool same_on_every_rank(const std::vector<Tensor>& tensors, Communicator& comm) {
  if (comm.size() == 1) return true;
  NoGradGuard no_grad;
  std::vector<Tensor> flat;
  for (const Tensor& t : tensors) flat.push_back(flatten(cast(t, DType::f64)));
  const Tensor mine = concat(flat, 0);
  // The spread max - min over ranks, elementwise, from two max-reductions: zero where all agree.
  Tensor largest = Tensor::empty(mine.shape(), DType::f64, mine.device());
  largest.copy_(mine);
  const Tensor negated_smallest = -mine;
  comm.allreduce(largest, largest, ReduceOp::max);
  comm.allreduce(negated_smallest, negated_smallest, ReduceOp::max);
  return max(abs(largest + negated_smallest)).item<double>() == 0;
}

std::pair<int64_t, int64_t> shard(int64_t start, int64_t stop, int rank, int size) {
  const ShardRange range = shard_range(stop - start, size, rank);
  return {start + range.first, start + range.last};
}

}  // namespace eddy::dist
