#pragma once
// The one op table that drives the op tests. Each row names the primitives it exercises, the
// dtypes it runs in, how to draw valid inputs, and the function under test. Adding an op is
// one declaration in src/eddy/ops and one row here.

#include <complex>
#include <functional>
#include <string>
#include <vector>

#include "eddy/eddy.h"

namespace eddy::testing {

struct OpCase {
  std::string name;
  std::vector<std::string> primitives;  // primitives this row covers
  std::vector<DType> dtypes;            // derivatives are checked in the float64/complex128 ones
  // Inputs for a dtype; inexact inputs are differentiated, others (indices, masks) held fixed.
  std::function<std::vector<Tensor>(DType, Generator&)> make_inputs;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  // Elementwise rows: the expected value of one element from its (broadcast) operands.
  std::function<std::complex<double>(const std::vector<std::complex<double>>&)> reference;
  int max_order = 3;    // 0: no derivative (comparisons)
  bool linear = false;  // checks <A x, y> = <x, A^T y>
};

const std::vector<OpCase>& op_table();

// The rows `keep` accepts, for suites that only make sense on some ops.
std::vector<OpCase> rows_where(bool (*keep)(const OpCase&));

// Standard normal draws of like's shape and dtype (complex: independent real and imaginary parts).
Tensor random_like(const Tensor& like, Generator& gen);

// The differentiable inputs are the inexact ones; the rest (indices, masks) are held fixed.
std::vector<size_t> differentiable_inputs(const std::vector<Tensor>& inputs);

// op.fn as a function of its differentiable inputs alone, the others held at `inputs`.
std::function<std::vector<Tensor>(const std::vector<Tensor>&)> of_differentiable_inputs(
    const OpCase& op, const std::vector<Tensor>& inputs, const std::vector<size_t>& differentiable);

// GoogleTest prints parameters with this instead of a byte dump.
inline void PrintTo(const OpCase& op, std::ostream* out) { *out << op.name; }

}  // namespace eddy::testing
