#pragma once
// The umbrella header: tensors, ops and autodiff.

#include "eddy/autodiff/checkpoint.h"
#include "eddy/autodiff/functional.h"
#include "eddy/autodiff/tape.h"
#include "eddy/backends/backend.h"
#include "eddy/core/tensor.h"
#include "eddy/ops/ops.h"
