#include "eddy/io/tensor_fingerprint.h"

#include "eddy/ops/ops.h"

namespace eddy::io {

uint64_t fnv1a_tensor_bytes(const Tensor& tensor, uint64_t hash) {
  const Tensor host = contiguous(to(tensor, cpu()));
  return fnv1a_words(host.raw_data(), static_cast<size_t>(host.numel()) * dtype_size(host.dtype()), hash);
}

}  // namespace eddy::io
