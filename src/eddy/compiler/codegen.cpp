#include "eddy/compiler/codegen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "eddy/backends/cpu/loops.h"
#include "eddy/ops/ops.h"

namespace eddy::compiler {
namespace {

std::string c_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::b8: return "bool";
    case DType::c64: return "std::complex<float>";
    case DType::c128: return "std::complex<double>";
    default: throw Error("codegen: no C type for " + std::string(dtype_name(dtype)));
  }
}

std::string variable(ValueId id) {
  // Appended rather than "v" + std::to_string(id), on which GCC 12 warns falsely (-Wrestrict).
  std::string name = "v";
  name += std::to_string(id);
  return name;
}

// The exact value, so generated code computes with the constant the graph holds.
std::string literal(const Tensor& constant) {
  char text[128];
  switch (constant.dtype()) {
    case DType::f32: std::snprintf(text, sizeof text, "%af", static_cast<double>(constant.to_vector<float>()[0])); break;
    case DType::f64: std::snprintf(text, sizeof text, "%a", constant.to_vector<double>()[0]); break;
    case DType::c64: {
      const c64 value = constant.to_vector<c64>()[0];
      std::snprintf(text, sizeof text, "std::complex<float>(%af, %af)", static_cast<double>(value.real()),
                    static_cast<double>(value.imag()));
      break;
    }
    case DType::c128: {
      const c128 value = constant.to_vector<c128>()[0];
      std::snprintf(text, sizeof text, "std::complex<double>(%a, %a)", value.real(), value.imag());
      break;
    }
    default: return constant.to_vector<bool>()[0] ? "true" : "false";
  }
  return text;
}

bool finite_scalar_constant(const CapturedTensor* captured) {
  if (!captured || !captured->constant || captured->tensor.numel() != 1) return false;
  if (captured->tensor.dtype() == DType::b8) return true;
  const c128 value = captured->tensor.to_vector<c128>()[0];
  return std::isfinite(value.real()) && std::isfinite(value.imag());
}

// The split point p such that `input` covers domain[p..] (repeated_row) or domain[..p)
// (repeated_column), with NumPy's right alignment; -1 when neither.
std::pair<Access, size_t> classify(const Shape& input, const Shape& domain) {
  if (numel(input) == 1) return {Access::scalar, 0};
  if (input == domain) return {Access::dense, 0};
  Shape aligned(domain.size() - input.size(), 1);
  aligned.insert(aligned.end(), input.begin(), input.end());
  // Row: ones (or missing) then exactly domain's tail.
  size_t p = 0;
  while (p < aligned.size() && aligned[p] == 1) ++p;
  if (std::equal(aligned.begin() + static_cast<std::ptrdiff_t>(p), aligned.end(), domain.begin() + static_cast<std::ptrdiff_t>(p))) {
    return {Access::repeated_row, p};
  }
  // Column: exactly domain's head, then ones.
  size_t q = aligned.size();
  while (q > 0 && aligned[q - 1] == 1) --q;
  if (std::equal(aligned.begin(), aligned.begin() + static_cast<std::ptrdiff_t>(q), domain.begin())) {
    return {Access::repeated_column, q};
  }
  return {Access::materialised, 0};
}

// A math function's name for `dtype`'s operands: expf for float, exp for double.
std::string math_function_for(std::string_view function, DType dtype) {
  return std::string(function) + (dtype == DType::f32 ? "f" : "");
}

std::string substitute(const Lowering& lowering, const std::vector<std::string>& operands, const std::string& type,
                       DType operand_dtype) {
  const std::string_view form = lowering.form_for(is_complex(operand_dtype));
  std::string out;
  for (size_t i = 0; i < form.size(); ++i) {
    if (form[i] == '$' && i + 1 < form.size()) {
      const char key = form[++i];
      if (key == 'T') {
        out += type;
      } else if (key == 'F') {
        out += math_function_for(lowering.math_function, operand_dtype);
      } else {
        out += operands.at(static_cast<size_t>(key - '0'));
      }
    } else {
      out += form[i];
    }
  }
  return out;
}

// The load of every pointer input as `const T vID = inK[index];`, per access; repeated rows are
// read from `ROW_ARRAYK[row_index]` (the input itself, or a tiled copy of it).
std::string loads(const KernelPlan& plan, std::string_view dense_index, std::string_view row_index,
                  std::string_view column_index, std::string_view indent, std::string_view row_array = "in") {
  std::ostringstream out;
  for (size_t k = 0; k < plan.inputs.size(); ++k) {
    const KernelInput& input = plan.inputs[k];
    std::string_view index = input.access == Access::scalar           ? "0"
                             : input.access == Access::repeated_row    ? row_index
                             : input.access == Access::repeated_column ? column_index
                                                                       : dense_index;
    std::string_view array = input.access == Access::repeated_row ? row_array : "in";
    out << indent << "const " << c_type(input.dtype) << " " << variable(input.value) << " = " << array << k << "["
        << index << "];\n";
  }
  return out.str();
}

std::string indented(const std::string& body, std::string_view indent) {
  std::ostringstream out;
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) out << indent << line << "\n";
  return out.str();
}

// One element's loads and statements, indexed by the names the enclosing loop defines.
std::string element_code(const KernelPlan& plan, std::string_view dense_index, std::string_view row_index,
                         std::string_view column_index, std::string_view indent, std::string_view row_array = "in") {
  return loads(plan, dense_index, row_index, column_index, indent, row_array) + indented(plan.body, indent);
}

// The pointer a kernel stores side output k through (the root's values go to `out`).
std::string side_output_pointer(size_t k) { return "out" + std::to_string(k + 1); }

// The stores of element `index`: the root's value, then each side output's.
std::string stores(const KernelPlan& plan, std::string_view index, std::string_view indent) {
  std::ostringstream out;
  out << indent << "out[" << index << "] = " << plan.element << ";\n";
  for (size_t k = 0; k < plan.side_outputs.size(); ++k) {
    out << indent << side_output_pointer(k) << "[" << index << "] = " << variable(plan.side_outputs[k].value)
        << ";\n";
  }
  return out.str();
}

// The vector lanes a tile of short rows is padded to: AVX-512's float32 lanes, a multiple of
// every narrower width.
constexpr int64_t kTileLanes = 16;
// Tiles longer than this take the row loop; their remainders are a small share of a row.
constexpr int64_t kMaxTile = 4096;

// Rows of the domain whose length is not a multiple of the vector width, walked a tile of rows at
// a time: the rows a tile holds add up to a multiple of kTileLanes elements, so the `omp simd`
// loop over the tile has no scalar remainder. A remainder would call the scalar tanhf, expf, ...
// for the last few elements of every row, at about ten times the vector variants' cost per
// element: a third of a 20-wide tanh layer's time. Repeated rows are read from copies tiled to
// the tile's length, repeated columns through a table of each tile element's row. Sets
// `first_row` to the first row the row loop still has to do.
std::string cpu_tiled_rows(const KernelPlan& plan, int64_t parallel_grain) {
  std::ostringstream out;
  out << "  int64_t first_row = 0;\n"
      << "  const int64_t rows_per_tile = (inner & -inner) >= " << kTileLanes << " ? 1 : " << kTileLanes
      << " / (inner & -inner);\n"
      << "  if (rows_per_tile > 1 && rows_per_tile * inner <= " << kMaxTile << ") {\n"
      << "    const int64_t tile = rows_per_tile * inner, tiles = outer / rows_per_tile;\n"
      << "    int64_t* tile_row = new int64_t[tile];\n"
      << "    for (int64_t t = 0; t < tile; ++t) tile_row[t] = t / inner;\n";
  for (size_t k = 0; k < plan.inputs.size(); ++k) {
    if (plan.inputs[k].access != Access::repeated_row) continue;
    const std::string type = c_type(plan.inputs[k].dtype);
    out << "    " << type << "* tiled" << k << " = new " << type << "[tile];\n"
        << "    for (int64_t t = 0; t < tile; ++t) tiled" << k << "[t] = in" << k << "[t - tile_row[t] * inner];\n";
  }
  out << "    const int64_t tiles_per_block = tile >= block_grain ? 1 : block_grain / tile;\n"
      << "#pragma omp parallel for if (outer * inner >= " << parallel_grain << ") schedule(dynamic, tiles_per_block)\n"
      << "    for (int64_t g = 0; g < tiles; ++g) {\n"
      << "#pragma omp simd\n"
      << "      for (int64_t t = 0; t < tile; ++t) {\n"
      << "        const int64_t i = g * tile + t;\n"
      << element_code(plan, "i", "t", "g * rows_per_tile + tile_row[t]", "        ", "tiled")
      << stores(plan, "i", "        ") << "      }\n    }\n"
      << "    delete[] tile_row;\n";
  for (size_t k = 0; k < plan.inputs.size(); ++k) {
    if (plan.inputs[k].access == Access::repeated_row) out << "    delete[] tiled" << k << ";\n";
  }
  out << "    first_row = tiles * rows_per_tile;\n  }\n";
  return out.str();
}

// Every element stored: one flat loop when the domain is one row, else tiles of short rows (see
// cpu_tiled_rows) and rows of columns.
std::string cpu_elementwise_loops(const KernelPlan& plan, int64_t parallel_grain) {
  std::ostringstream out;
  // The if clause names `parallel`: unqualified, on a combined construct, it applies to `simd`
  // too (OpenMP 5.0), and GCC then runs every domain below the grain as a scalar loop.
  out << "  if (outer == 1) {\n"
      << "#pragma omp parallel for simd if (parallel : inner >= " << parallel_grain
      << ") schedule(simd : dynamic, block_grain)\n"
      << "    for (int64_t i = 0; i < inner; ++i) {\n"
      << element_code(plan, "i", "i", "0", "      ") << stores(plan, "i", "      ") << "    }\n"
      << "    return;\n  }\n"
      << cpu_tiled_rows(plan, parallel_grain)
      << "  const int64_t rows_per_block = inner >= block_grain ? 1 : block_grain / inner;\n"
      << "#pragma omp parallel for if (outer * inner >= " << parallel_grain << ") schedule(dynamic, rows_per_block)\n"
      << "  for (int64_t r = first_row; r < outer; ++r) {\n"
      << "#pragma omp simd\n"
      << "    for (int64_t j = 0; j < inner; ++j) {\n"
      << "      const int64_t i = r * inner + j;\n"
      << element_code(plan, "i", "j", "r", "      ") << stores(plan, "i", "      ") << "    }\n  }\n";
  return out.str();
}

// The domain is cut into blocks by its size alone (a one-row domain into pieces of the row, else
// into blocks of rows), each summed into its own partial sum by whichever thread is free, and the
// partial sums added in block order: a result is the same at every thread count (eddy's
// cpu_kernels::for_each_block). A one-row block is summed in `omp simd` lanes; rows are summed
// column by column, as in a leading-axis sum, and the columns added at the end: reducing the
// vector lanes after every short row would cost more than the row.
std::string cpu_sum_all_loops(const KernelPlan& plan, int64_t parallel_grain) {
  const std::string type = c_type(plan.output_dtype);
  std::ostringstream out;
  out << "  const int64_t blocks = outer * inner >= " << parallel_grain
      << " ? block_count(outer == 1 ? inner : outer, outer == 1 ? block_grain : block_grain / inner) : 1;\n"
      << "  " << type << "* partial = new " << type << "[blocks]();\n"
      << "#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1)\n"
      << "  for (int64_t b = 0; b < blocks; ++b) {\n"
      << "    " << type << " acc = 0;\n"
      << "    if (outer == 1) {\n"
      << "      const int64_t begin = inner * b / blocks, end = inner * (b + 1) / blocks;\n"
      << "#pragma omp simd reduction(+ : acc)\n"
      << "      for (int64_t i = begin; i < end; ++i) {\n"
      << element_code(plan, "i", "i", "0", "        ") << "        acc += " << plan.element << ";\n      }\n"
      << "    } else {\n"
      << "      " << type << "* columns = new " << type << "[inner]();\n"
      << "      for (int64_t r = outer * b / blocks; r < outer * (b + 1) / blocks; ++r) {\n"
      << "#pragma omp simd\n"
      << "        for (int64_t j = 0; j < inner; ++j) {\n"
      << "          const int64_t i = r * inner + j;\n"
      << element_code(plan, "i", "j", "r", "          ") << "          columns[j] += " << plan.element << ";\n        }\n      }\n"
      << "      for (int64_t j = 0; j < inner; ++j) acc += columns[j];\n"
      << "      delete[] columns;\n"
      << "    }\n"
      << "    partial[b] = acc;\n"
      << "  }\n"
      << "  " << type << " total = 0;\n"
      << "  for (int64_t b = 0; b < blocks; ++b) total += partial[b];\n"
      << "  delete[] partial;\n"
      << "  out[0] = total;\n";
  return out.str();
}

// Each block of rows is summed into its own C partial sums (an allocation per block, so no two
// threads write one cache line); the blocks are added in block order, as in cpu_sum_all_loops.
std::string cpu_sum_leading_loops(const KernelPlan& plan, int64_t parallel_grain) {
  const std::string type = c_type(plan.output_dtype);
  std::ostringstream out;
  out << "  const int64_t blocks = outer * inner >= " << parallel_grain
      << " ? block_count(outer, block_grain / inner) : 1;\n"
      << "  " << type << "** partial = new " << type << "*[blocks]();\n"
      << "#pragma omp parallel for schedule(dynamic, 1) if (blocks > 1)\n"
      << "  for (int64_t b = 0; b < blocks; ++b) {\n"
      << "    " << type << "* acc = partial[b] = new " << type << "[inner]();\n"
      << "    for (int64_t r = outer * b / blocks; r < outer * (b + 1) / blocks; ++r) {\n"
      << "#pragma omp simd\n"
      << "      for (int64_t j = 0; j < inner; ++j) {\n"
      << "        const int64_t i = r * inner + j;\n"
      << element_code(plan, "i", "j", "r", "        ") << "        acc[j] += " << plan.element << ";\n      }\n    }\n"
      << "  }\n"
      << "  for (int64_t j = 0; j < inner; ++j) out[j] = 0;\n"
      << "  for (int64_t b = 0; b < blocks; ++b) {\n"
      << "    for (int64_t j = 0; j < inner; ++j) out[j] += partial[b][j];\n"
      << "    delete[] partial[b];\n"
      << "  }\n"
      << "  delete[] partial;\n";
  return out.str();
}

// One row per iteration, summed in `omp simd` lanes.
std::string cpu_sum_trailing_loops(const KernelPlan& plan, int64_t parallel_grain) {
  const std::string type = c_type(plan.output_dtype);
  std::ostringstream out;
  out << "  const int64_t rows_per_block = inner >= block_grain ? 1 : block_grain / inner;\n"
      << "#pragma omp parallel for if (outer * inner >= " << parallel_grain << ") schedule(dynamic, rows_per_block)\n"
      << "  for (int64_t r = 0; r < outer; ++r) {\n"
      << "    " << type << " acc = 0;\n"
      << "#pragma omp simd reduction(+ : acc)\n"
      << "    for (int64_t j = 0; j < inner; ++j) {\n"
      << "      const int64_t i = r * inner + j;\n"
      << element_code(plan, "i", "j", "r", "      ") << "      acc += " << plan.element << ";\n    }\n"
      << "    out[r] = acc;\n"
      << "  }\n";
  return out.str();
}

// The body of a CUDA kernel: which element (or elements) each thread handles.
std::string cuda_loops(const KernelPlan& plan) {
  const std::string type = c_type(plan.output_dtype);
  std::ostringstream out;
  switch (plan.epilogue) {
    case Epilogue::none:
      out << "  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
          << "  if (i >= outer * inner) return;\n"
          << "  const long long r = i / inner, j = i - r * inner;\n"
          << element_code(plan, "i", "j", "r", "  ") << stores(plan, "i", "  ");
      break;
    case Epilogue::sum_all:
      out << "  " << type << " acc = 0;\n"
          << "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < outer * inner;\n"
          << "       i += (long long)gridDim.x * blockDim.x) {\n"
          << "    const long long r = i / inner, j = i - r * inner;\n"
          << element_code(plan, "i", "j", "r", "    ") << "    acc += " << plan.element << ";\n  }\n"
          << "  atomicAdd(out, acc);\n";
      break;
    case Epilogue::sum_leading:
      out << "  const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
          << "  if (j >= inner) return;\n"
          << "  " << type << " acc = 0;\n"
          << "  for (long long r = 0; r < outer; ++r) {\n"
          << "    const long long i = r * inner + j;\n"
          << element_code(plan, "i", "j", "r", "    ") << "    acc += " << plan.element << ";\n  }\n"
          << "  out[j] = acc;\n";
      break;
    case Epilogue::sum_trailing:
      out << "  const long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
          << "  if (r >= outer) return;\n"
          << "  " << type << " acc = 0;\n"
          << "  for (long long j = 0; j < inner; ++j) {\n"
          << "    const long long i = r * inner + j;\n"
          << element_code(plan, "i", "j", "r", "    ") << "    acc += " << plan.element << ";\n  }\n"
          << "  out[r] = acc;\n";
      break;
  }
  return out.str();
}

}  // namespace

KernelPlan plan_kernel(const Graph& graph, const FusionGroup& group, std::string name) {
  KernelPlan plan;
  plan.name = std::move(name);
  plan.output = group.output;
  plan.epilogue = group.epilogue;
  plan.output_shape = graph.value(group.output).shape;
  plan.output_dtype = graph.value(group.output).dtype;
  const bool reduces = group.epilogue != Epilogue::none;
  const ValueId element = reduces ? graph.nodes[group.nodes.back()].inputs[0] : group.output;
  plan.element = variable(element);
  plan.domain = graph.value(element).shape;
  std::ostringstream body;
  // A sum over the rows or along the rows of [..., C] needs the rows (every axis but the last)
  // apart from the columns.
  bool split_chosen = group.epilogue == Epilogue::sum_leading || group.epilogue == Epilogue::sum_trailing;
  size_t split = split_chosen ? plan.domain.size() - 1 : 0;
  for (ValueId input : group.inputs) {
    const CapturedTensor* captured = graph.find_captured(input);
    if (finite_scalar_constant(captured)) {
      body << "const " << c_type(graph.value(input).dtype) << " " << variable(input) << " = "
           << literal(captured->tensor) << ";\n";
      continue;
    }
    auto [access, p] = classify(graph.value(input).shape, plan.domain);
    if (access == Access::repeated_row || access == Access::repeated_column) {
      if (!split_chosen) {
        split = p;
        split_chosen = true;
      } else if (p != split) {
        access = Access::materialised;  // one loop nest has one split
      }
    }
    plan.inputs.push_back(KernelInput{input, graph.value(input).dtype, access});
  }
  if (split_chosen) {
    for (size_t d = 0; d < plan.domain.size(); ++d) (d < split ? plan.outer : plan.inner) *= plan.domain[d];
  } else {
    plan.inner = numel(plan.domain);
  }
  for (size_t n : group.nodes) {
    if (reduces && n == group.nodes.back()) continue;  // the epilogue is the loop's, not the body's
    const GraphNode& node = graph.nodes[n];
    const DType out_dtype = graph.value(node.output).dtype;
    // Arithmetic is done in the operands' dtype, which for comparisons differs from the output's.
    // The last input is an operand for every primitive, where's included (its first is a bool).
    const DType operand_dtype = graph.value(node.inputs.back()).dtype;
    plan.complex_values = plan.complex_values || is_complex(operand_dtype) || is_complex(out_dtype);
    std::vector<std::string> operands;
    for (ValueId input : node.inputs) operands.push_back(variable(input));
    body << "const " << c_type(out_dtype) << " " << variable(node.output) << " = "
         << substitute(node.primitive->lowering, operands, c_type(out_dtype), operand_dtype) << ";\n";
  }
  plan.body = body.str();
  for (ValueId value : group.side_outputs) {
    plan.side_outputs.push_back(KernelSideOutput{value, graph.value(value).dtype});
  }
  return plan;
}

Tensor kernel_operand(const KernelPlan& plan, const KernelInput& input, const Tensor& value) {
  return input.access == Access::materialised ? contiguous(expand(value, plan.domain)) : contiguous(value);
}

std::string render_cpu_source(const std::vector<KernelPlan>& plans, int64_t parallel_grain) {
  std::ostringstream out;
  out << "// Generated by eddy's compiler from a captured graph.\n"
         "#include <cstdint>\n"
         "\n"
         "#include <omp.h>\n"
         "// Partial sums live in new[] arrays: <vector> would add a quarter of a second to every\n"
         "// compilation.\n"
         "// Declared here rather than through <cmath> so that glibc's vector variants (libmvec) serve\n"
         "// the `omp simd` loops without -ffast-math.\n"
         "extern \"C\" {\n";
  for (const Primitive& primitive : all_primitives()) {
    const std::string_view function = primitive.lowering.math_function;
    if (function.empty()) continue;
    for (const DType dtype : {DType::f64, DType::f32}) {
      const std::string type = c_type(dtype);
      std::string parameters = type;
      for (int i = 1; i < primitive.arity; ++i) parameters += ", " + type;
      out << "#pragma omp declare simd notinbranch\n"
          << type << " " << math_function_for(function, dtype) << "(" << parameters << ") noexcept;\n";
    }
  }
  out << "}\n"
      << "\n"
      << "// Parallel loops are cut into blocks by the work's size alone, which the threads take as they\n"
      << "// become free, and sums add their blocks' partial sums in block order (as eddy's own kernels,\n"
      << "// cpu_kernels::for_each_block).\n"
      << "static const int64_t block_grain = " << cpu_kernels::kBlockGrain << ";\n"
      << "static int64_t block_count(int64_t total, int64_t grain) {\n"
      << "  const int64_t blocks = total / (grain > 1 ? grain : 1);\n"
      << "  return blocks < 1 ? 1 : blocks > " << cpu_kernels::kMaxBlocks << " ? " << cpu_kernels::kMaxBlocks
      << " : blocks;\n"
      << "}\n";
  if (std::any_of(plans.begin(), plans.end(), [](const KernelPlan& plan) { return plan.complex_values; })) {
    // Only here: <complex> brings <cmath> and <sstream>, which took a second longer to compile
    // than the rest of a small program (0.1-0.2 s) on a busy 2-core machine.
    out << "\n#include <complex>\n"
           "\n"
           "// Conversions of complex values as eager eddy casts: to complex both parts, to a real type\n"
           "// (bool included) the real part.\n"
           "template <typename To, typename Part>\n"
           "To complex_cast(const std::complex<Part>& z) {\n"
           "  if constexpr (std::is_arithmetic<To>::value) return static_cast<To>(z.real());\n"
           "  else return To(z);\n"
           "}\n"
           "\n"
           "// x^y as eager eddy computes it (backends/cpu/elementwise.cpp, complex_power): 1 where y = 0,\n"
           "// repeated squaring for an integer y below 100 in size, else std::pow.\n"
           "template <typename Part>\n"
           "std::complex<Part> complex_pow(const std::complex<Part>& x, const std::complex<Part>& y) {\n"
           "  if (y == std::complex<Part>(0)) return std::complex<Part>(1);\n"
           "  if (y.imag() == 0 && std::abs(y.real()) < 100 && y.real() == std::trunc(y.real())) {\n"
           "    std::complex<Part> result(1), base = x;\n"
           "    for (int n = static_cast<int>(std::abs(y.real())); n > 0; n >>= 1) {\n"
           "      if (n & 1) result *= base;\n"
           "      base *= base;\n"
           "    }\n"
           "    return y.real() < 0 ? std::complex<Part>(1) / result : result;\n"
           "  }\n"
           "  return std::pow(x, y);\n"
           "}\n";
  }
  for (const KernelPlan& plan : plans) {
    out << "\nextern \"C\" void " << plan.name
        << "(const void* const* inputs, void* const* outputs, int64_t outer, int64_t inner) {\n";
    for (size_t k = 0; k < plan.inputs.size(); ++k) {
      const std::string type = c_type(plan.inputs[k].dtype);
      out << "  const " << type << "* in" << k << " = static_cast<const " << type << "*>(inputs[" << k << "]);\n";
    }
    const std::string out_type = c_type(plan.output_dtype);
    out << "  " << out_type << "* out = static_cast<" << out_type << "*>(outputs[0]);\n";
    for (size_t k = 0; k < plan.side_outputs.size(); ++k) {
      const std::string type = c_type(plan.side_outputs[k].dtype);
      out << "  " << type << "* " << side_output_pointer(k) << " = static_cast<" << type << "*>(outputs[" << k + 1
          << "]);\n";
    }
    switch (plan.epilogue) {
      case Epilogue::none: out << cpu_elementwise_loops(plan, parallel_grain); break;
      case Epilogue::sum_all: out << cpu_sum_all_loops(plan, parallel_grain); break;
      case Epilogue::sum_leading: out << cpu_sum_leading_loops(plan, parallel_grain); break;
      case Epilogue::sum_trailing: out << cpu_sum_trailing_loops(plan, parallel_grain); break;
    }
    out << "}\n";
  }
  return out.str();
}

std::string render_cuda_source(const std::vector<KernelPlan>& plans) {
  std::ostringstream out;
  out << "// Generated by eddy's compiler from a captured graph, for NVRTC.\n";
  for (const KernelPlan& plan : plans) {
    EDDY_CHECK(!plan.complex_values, "codegen: ", plan.name, " holds complex values, which CUDA kernels have "
               "no type for yet (NVRTC has no std::complex)");
    out << "\nextern \"C\" __global__ void " << plan.name << "(";
    for (size_t k = 0; k < plan.inputs.size(); ++k) {
      out << "const " << c_type(plan.inputs[k].dtype) << "* __restrict__ in" << k << ", ";
    }
    out << c_type(plan.output_dtype) << "* __restrict__ out, ";
    for (size_t k = 0; k < plan.side_outputs.size(); ++k) {
      out << c_type(plan.side_outputs[k].dtype) << "* __restrict__ " << side_output_pointer(k) << ", ";
    }
    out << "long long outer, long long inner) {\n"
        << cuda_loops(plan) << "}\n";
  }
  return out.str();
}

}  // namespace eddy::compiler
