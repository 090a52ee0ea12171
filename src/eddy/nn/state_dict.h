#pragma once
// A named, ordered collection of tensors: model weights, buffers and optimiser state. This is
// what checkpoints store (safetensors) and what load_state_dict reads back.

#include <map>
#include <string>

#include "eddy/core/tensor.h"

namespace eddy::nn {

using StateDict = std::map<std::string, Tensor>;

}  // namespace eddy::nn
