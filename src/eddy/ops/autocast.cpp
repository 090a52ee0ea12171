#include "eddy/ops/autocast.h"

#include "eddy/core/error.h"

namespace eddy {
namespace {
thread_local std::optional<DType> active;
}  // namespace

AutocastScope::AutocastScope(std::optional<DType> dtype) : outer_(active) {
  EDDY_CHECK(!dtype || is_half(*dtype), "autocast: the low-precision dtype must be bfloat16 or float16, got ", *dtype);
  active = dtype;
}

AutocastScope::~AutocastScope() { active = outer_; }

std::optional<DType> autocast_dtype() { return active; }

}  // namespace eddy
