#pragma once
// FNV-1a (core/fingerprint.h) over a tensor's bytes, wherever it lives and however it is strided:
// what checkpoints, quantised models and listed PINN points record of their arrays so that a
// changed file is noticed.

#include <cstdint>

#include "eddy/core/fingerprint.h"
#include "eddy/core/tensor.h"

namespace eddy::io {

// Hashes the elements in row-major order, continuing from `hash`; dtype and shape are not
// included (callers that need them hash them beside).
uint64_t fnv1a_tensor_bytes(const Tensor& tensor, uint64_t hash = kFnvOffsetBasis);

}  // namespace eddy::io
