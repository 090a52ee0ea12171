#include "eddy/compiler/codegen.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace eddy::compiler {
namespace {

// C spellings: the same names exist as device functions under CUDA, so one table serves both.
struct ScalarExpression {
  std::string_view f32_form;
  std::string_view f64_form;  // empty: same as f32_form
};

// `$0`, `$1`, `$2` stand for the inputs, `$T` for the output's C type.
const std::map<std::string_view, ScalarExpression>& scalar_expressions() {
  static const std::map<std::string_view, ScalarExpression> table = {
      {"neg", {"-$0", ""}},
      {"add", {"$0 + $1", ""}},
      {"sub", {"$0 - $1", ""}},
      {"mul", {"$0 * $1", ""}},
      {"div", {"$0 / $1", ""}},
      {"pow", {"powf($0, $1)", "pow($0, $1)"}},
      {"exp", {"expf($0)", "exp($0)"}},
      {"log", {"logf($0)", "log($0)"}},
      {"sin", {"sinf($0)", "sin($0)"}},
      {"cos", {"cosf($0)", "cos($0)"}},
      {"tanh", {"tanhf($0)", "tanh($0)"}},
      {"sqrt", {"sqrtf($0)", "sqrt($0)"}},
      {"abs", {"($0 < 0 ? -$0 : $0)", ""}},
      {"sign", {"($T)((0 < $0) - ($0 < 0))", ""}},
      {"maximum", {"($0 > $1 ? $0 : $1)", ""}},
      {"minimum", {"($0 < $1 ? $0 : $1)", ""}},
      {"eq", {"$0 == $1", ""}},
      {"ne", {"$0 != $1", ""}},
      {"lt", {"$0 < $1", ""}},
      {"le", {"$0 <= $1", ""}},
      {"gt", {"$0 > $1", ""}},
      {"ge", {"$0 >= $1", ""}},
      {"where", {"$0 ? $1 : $2", ""}},
      {"cast", {"($T)$0", ""}},
  };
  return table;
}

std::string c_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::b8: return "bool";
    default: throw Error("codegen: no C type for " + std::string(dtype_name(dtype)));
  }
}

std::string variable(ValueId id) { return "v" + std::to_string(id); }

// The exact value, so generated code computes with the constant the graph holds.
std::string literal(const Tensor& constant) {
  char text[64];
  switch (constant.dtype()) {
    case DType::f32: std::snprintf(text, sizeof text, "%af", static_cast<double>(constant.to_vector<float>()[0])); break;
    case DType::f64: std::snprintf(text, sizeof text, "%a", constant.to_vector<double>()[0]); break;
    default: return constant.to_vector<bool>()[0] ? "true" : "false";
  }
  return text;
}

bool finite_scalar_constant(const CapturedTensor* captured) {
  if (!captured || !captured->constant || captured->tensor.numel() != 1) return false;
  if (captured->tensor.dtype() == DType::b8) return true;
  const double value = captured->tensor.dtype() == DType::f32 ? captured->tensor.to_vector<float>()[0]
                                                               : captured->tensor.to_vector<double>()[0];
  return std::isfinite(value);
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

std::string substitute(std::string_view form, const std::vector<std::string>& operands, const std::string& type) {
  std::string out;
  for (size_t i = 0; i < form.size(); ++i) {
    if (form[i] == '$' && i + 1 < form.size()) {
      const char key = form[++i];
      out += key == 'T' ? type : operands.at(static_cast<size_t>(key - '0'));
    } else {
      out += form[i];
    }
  }
  return out;
}

// The load of every pointer input as `const T vID = inK[index];`, per access.
std::string loads(const KernelPlan& plan, std::string_view dense_index, std::string_view row_index,
                  std::string_view column_index, std::string_view indent) {
  std::ostringstream out;
  for (size_t k = 0; k < plan.inputs.size(); ++k) {
    const KernelInput& input = plan.inputs[k];
    std::string_view index = input.access == Access::scalar           ? "0"
                             : input.access == Access::repeated_row    ? row_index
                             : input.access == Access::repeated_column ? column_index
                                                                       : dense_index;
    out << indent << "const " << c_type(input.dtype) << " " << variable(input.value) << " = in" << k << "["
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

}  // namespace

bool has_scalar_expression(std::string_view primitive_name) { return scalar_expressions().count(primitive_name) > 0; }

KernelPlan plan_kernel(const Graph& graph, const FusionGroup& group, std::string name) {
  KernelPlan plan;
  plan.name = std::move(name);
  plan.output = group.output;
  plan.domain = graph.value(group.output).shape;
  plan.output_dtype = graph.value(group.output).dtype;
  std::ostringstream body;
  size_t split = 0;
  bool split_chosen = false;
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
  for (size_t d = split; split_chosen && d < plan.domain.size(); ++d) plan.inner *= plan.domain[d];
  if (!split_chosen) plan.inner = numel(plan.domain);
  for (size_t n : group.nodes) {
    const GraphNode& node = graph.nodes[n];
    const ScalarExpression& expression = scalar_expressions().at(node.primitive->name);
    const DType out_dtype = graph.value(node.output).dtype;
    // Arithmetic is done in the operands' dtype, which for comparisons differs from the output's.
    const DType operand_dtype = graph.value(node.inputs.back()).dtype;
    std::string_view form = operand_dtype == DType::f64 && !expression.f64_form.empty() ? expression.f64_form
                                                                                      : expression.f32_form;
    std::vector<std::string> operands;
    for (ValueId input : node.inputs) operands.push_back(variable(input));
    body << "const " << c_type(out_dtype) << " " << variable(node.output) << " = "
         << substitute(form, operands, c_type(out_dtype)) << ";\n";
  }
  body << "out[i] = " << variable(group.output) << ";\n";
  plan.body = body.str();
  return plan;
}

std::string render_cpu_source(const std::vector<KernelPlan>& plans, int64_t parallel_grain) {
  std::ostringstream out;
  out << "// Generated by eddy's compiler from a captured graph.\n"
         "#include <cstdint>\n"
         "// Declared here rather than through <cmath> so that glibc's vector variants (libmvec) serve\n"
         "// the `omp simd` loops without -ffast-math.\n"
         "extern \"C\" {\n";
  for (const char* f : {"exp", "log", "sin", "cos", "tanh", "sqrt"}) {
    out << "#pragma omp declare simd notinbranch\ndouble " << f << "(double) noexcept;\n"
        << "#pragma omp declare simd notinbranch\nfloat " << f << "f(float) noexcept;\n";
  }
  out << "#pragma omp declare simd notinbranch\ndouble pow(double, double) noexcept;\n"
         "#pragma omp declare simd notinbranch\nfloat powf(float, float) noexcept;\n}\n";
  for (const KernelPlan& plan : plans) {
    out << "\nextern \"C\" void " << plan.name
        << "(const void* const* inputs, void* output, int64_t outer, int64_t inner) {\n";
    for (size_t k = 0; k < plan.inputs.size(); ++k) {
      const std::string type = c_type(plan.inputs[k].dtype);
      out << "  const " << type << "* in" << k << " = static_cast<const " << type << "*>(inputs[" << k << "]);\n";
    }
    const std::string out_type = c_type(plan.output_dtype);
    out << "  " << out_type << "* out = static_cast<" << out_type << "*>(output);\n"
        << "  if (outer == 1) {\n"
        << "#pragma omp parallel for simd if (inner >= " << parallel_grain << ") schedule(static)\n"
        << "    for (int64_t i = 0; i < inner; ++i) {\n"
        << loads(plan, "i", "i", "0", "      ") << indented(plan.body, "      ") << "    }\n"
        << "    return;\n  }\n"
        << "#pragma omp parallel for if (outer * inner >= " << parallel_grain << ") schedule(static)\n"
        << "  for (int64_t r = 0; r < outer; ++r) {\n"
        << "#pragma omp simd\n"
        << "    for (int64_t j = 0; j < inner; ++j) {\n"
        << "      const int64_t i = r * inner + j;\n"
        << loads(plan, "i", "j", "r", "      ") << indented(plan.body, "      ") << "    }\n  }\n}\n";
  }
  return out.str();
}

std::string render_cuda_source(const std::vector<KernelPlan>& plans) {
  std::ostringstream out;
  out << "// Generated by eddy's compiler from a captured graph, for NVRTC.\n";
  for (const KernelPlan& plan : plans) {
    out << "\nextern \"C\" __global__ void " << plan.name << "(";
    for (size_t k = 0; k < plan.inputs.size(); ++k) {
      out << "const " << c_type(plan.inputs[k].dtype) << "* __restrict__ in" << k << ", ";
    }
    out << c_type(plan.output_dtype) << "* __restrict__ out, long long outer, long long inner) {\n"
        << "  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
        << "  if (i >= outer * inner) return;\n"
        << "  const long long r = i / inner, j = i - r * inner;\n"
        << loads(plan, "i", "j", "r", "  ") << indented(plan.body, "  ") << "}\n";
  }
  return out.str();
}

}  // namespace eddy::compiler
