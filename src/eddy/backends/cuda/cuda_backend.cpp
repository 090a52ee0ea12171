#include "eddy/backends/cuda/cuda_backend.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "eddy/backends/cpu/kernel_util.h"
#include "eddy/backends/cuda/driver.h"
#include "eddy/backends/cuda/kernel_source.h"
#include "eddy/backends/cuda/launch.h"
#include "eddy/backends/cuda/nvrtc.h"
#include "eddy/core/memory.h"

namespace eddy::cuda {
namespace {

constexpr unsigned kBlock = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // grid-stride loops cover the rest

// ---- memory ----

class DeviceMemory final : public MemorySource {
 public:
  explicit DeviceMemory(int index) : index_(index) {}
  void* get(size_t bytes) override {
    const Driver& d = use_device(index_);
    CUdeviceptr pointer = 0;
    const CUresult result = d.allocate(&pointer, bytes);
    if (result == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
    d.check(result, "cuMemAlloc");
    return reinterpret_cast<void*>(pointer);
  }
  void put(void* ptr) noexcept override {
    try {
      const Driver& d = use_device(index_);  // cuMemFree needs the block's context current
      d.release(reinterpret_cast<CUdeviceptr>(ptr));
    } catch (...) {
      // Only when the device can no longer be used, and then its memory is gone with it.
    }
  }
  [[noreturn]] void exhausted(size_t bytes, const AllocatorStats& stats) override {
    throw Error(cat("cuda:", index_, ": out of memory allocating ", memory_text(static_cast<double>(bytes)), " (",
                    memory_text(static_cast<double>(stats.bytes_in_use)), " in use by tensors; the cache was emptied)"));
  }

 private:
  int index_;
};

// ---- kernels: compiled on first use, per device ----

class KernelCache {
 public:
  CUfunction get(int device, const std::string& name) {
    std::lock_guard lock(mutex_);
    auto [entry, inserted] = functions_.try_emplace({device, name}, nullptr);
    if (!inserted) return entry->second;
    try {
      const Driver& d = use_device(device);
      const CompiledSource compiled = compile_to_ptx(kKernelSource, architecture(device), {name});
      CUmodule module = nullptr;
      d.check(d.load_module(&module, compiled.ptx.c_str()), "cuModuleLoadData");
      d.check(d.get_function(&entry->second, module, compiled.lowered_names[0].c_str()), "cuModuleGetFunction");
    } catch (...) {
      functions_.erase(entry);
      throw;
    }
    return entry->second;
  }

 private:
  std::mutex mutex_;
  std::map<std::pair<int, std::string>, CUfunction> functions_;  // modules stay loaded for the process
};

KernelCache& kernels() {
  static auto* cache = new KernelCache();  // leaked: kernels may run while statics are destroyed
  return *cache;
}

}  // namespace

void launch(int device, const std::string& name, int64_t blocks, unsigned block, size_t shared_bytes,
            std::vector<void*> arguments) {
  if (blocks <= 0) return;
  const CUfunction function = kernels().get(device, name);
  const Driver& d = use_device(device);
  const auto grid = static_cast<unsigned>(std::min(blocks, kMaxBlocks));
  d.check(d.launch(function, grid, 1, 1, block, 1, 1, static_cast<unsigned>(shared_bytes), stream(device),
                   arguments.data(), nullptr),
          "cuLaunchKernel");
}

void launch_elementwise(int device, const std::string& name, int64_t n, std::vector<void*> arguments) {
  launch(device, name, (n + kBlock - 1) / kBlock, kBlock, 0, std::move(arguments));
}

namespace {


// ---- names ----

std::string type_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::c64: return "eddy::c64";
    case DType::c128: return "eddy::c128";
    case DType::i32: return "int";
    case DType::i64: return "eddy::i64";
    case DType::b8: return "bool";
    case DType::bf16:
    case DType::f16: break;
  }
  throw Error(cat("cuda: kernels for ", dtype, " are not built yet; cast the tensor to float32 on the GPU"));
}

std::string instance(std::string_view kernel, std::initializer_list<std::string> arguments) {
  std::string name = "eddy::" + std::string(kernel) + "<";
  bool first = true;
  for (const std::string& argument : arguments) {
    name += (first ? "" : ", ") + argument;
    first = false;
  }
  return name + ">";
}

constexpr std::array kAllDTypes = {DType::f32, DType::f64, DType::c64, DType::c128, DType::i32, DType::i64, DType::b8};

// Which dtypes each kernel takes: the CPU backend's dispatch sets (backends/cpu/kernel_util.h).
bool numeric(DType d) { return d != DType::b8; }
bool real_numeric(DType d) { return numeric(d) && !is_complex(d); }

// A kernel family's functor (kernel_source.cpp), the dtypes it takes and its output's dtype.
struct KernelSpec {
  const char* functor;
  bool (*accepts)(DType);
  DType (*output)(DType);
};
DType same(DType d) { return d; }

KernelSpec unary_spec(UnaryKernel kind) {
  switch (kind) {
    case UnaryKernel::neg: return {"Neg", numeric, same};
    case UnaryKernel::exp: return {"Exp", is_inexact, same};
    case UnaryKernel::log: return {"Log", is_inexact, same};
    case UnaryKernel::sin: return {"Sin", is_inexact, same};
    case UnaryKernel::cos: return {"Cos", is_inexact, same};
    case UnaryKernel::tanh: return {"Tanh", is_inexact, same};
    case UnaryKernel::gelu: return {"Gelu", is_floating, same};
    case UnaryKernel::sqrt: return {"Sqrt", is_inexact, same};
    case UnaryKernel::abs: return {"Abs", numeric, real_dtype};
    case UnaryKernel::sign: return {"Sign", real_numeric, same};
    case UnaryKernel::real: return {"Real", is_complex, real_dtype};
    case UnaryKernel::imag: return {"Imag", is_complex, real_dtype};
    case UnaryKernel::conj: return {"Conj", is_complex, same};
    case UnaryKernel::angle: return {"Angle", is_complex, real_dtype};
  }
  return {};
}
constexpr std::array kAllUnary = {UnaryKernel::neg,  UnaryKernel::exp,  UnaryKernel::log,  UnaryKernel::sin,
                                  UnaryKernel::cos,  UnaryKernel::tanh, UnaryKernel::gelu, UnaryKernel::sqrt,
                                  UnaryKernel::abs,  UnaryKernel::sign, UnaryKernel::real, UnaryKernel::imag,
                                  UnaryKernel::conj, UnaryKernel::angle};

DType boolean(DType) { return DType::b8; }
bool any(DType) { return true; }

KernelSpec binary_spec(BinaryKernel kind, DType dtype) {
  switch (kind) {
    case BinaryKernel::add: return {"Add", numeric, same};
    case BinaryKernel::sub: return {"Sub", numeric, same};
    case BinaryKernel::mul: return {"Mul", numeric, same};
    case BinaryKernel::div: return {is_integral(dtype) ? "IntDiv" : "Div", numeric, same};
    case BinaryKernel::pow: return {"Pow", is_inexact, same};
    case BinaryKernel::maximum: return {"Maximum", real_numeric, same};
    case BinaryKernel::minimum: return {"Minimum", real_numeric, same};
    case BinaryKernel::eq: return {"Eq", any, boolean};
    case BinaryKernel::ne: return {"Ne", any, boolean};
    case BinaryKernel::lt: return {"Lt", real_numeric, boolean};
    case BinaryKernel::le: return {"Le", real_numeric, boolean};
    case BinaryKernel::gt: return {"Gt", real_numeric, boolean};
    case BinaryKernel::ge: return {"Ge", real_numeric, boolean};
    case BinaryKernel::complex: return {"MakeComplex", is_floating, complex_dtype};
  }
  return {};
}
constexpr std::array kAllBinary = {BinaryKernel::add, BinaryKernel::sub, BinaryKernel::mul, BinaryKernel::div,
                                   BinaryKernel::pow, BinaryKernel::maximum, BinaryKernel::minimum, BinaryKernel::eq,
                                   BinaryKernel::ne,  BinaryKernel::lt, BinaryKernel::le, BinaryKernel::gt,
                                   BinaryKernel::ge,  BinaryKernel::complex};

const char* reduce_functor(ReduceKernel kind) {
  switch (kind) {
    case ReduceKernel::sum: return "Sum";
    case ReduceKernel::prod: return "Prod";
    case ReduceKernel::max: return "Max";
    case ReduceKernel::min: return "Min";
  }
  return "";
}
bool reduce_accepts(ReduceKernel kind, DType d) {
  return kind == ReduceKernel::max || kind == ReduceKernel::min ? real_numeric(d) : numeric(d);
}
constexpr std::array kAllReduce = {ReduceKernel::sum, ReduceKernel::prod, ReduceKernel::max, ReduceKernel::min};

[[noreturn]] void unsupported(std::string_view kernel, DType dtype) {
  throw Error(cat("cuda kernel ", kernel, " does not support dtype ", dtype));
}

std::string unary_name(UnaryKernel kind, DType in) {
  const KernelSpec spec = unary_spec(kind);
  if (!spec.accepts(in)) unsupported(spec.functor, in);
  return instance("unary", {type_name(in), type_name(spec.output(in)), std::string("eddy::") + spec.functor});
}
std::string binary_name(BinaryKernel kind, DType in) {
  const KernelSpec spec = binary_spec(kind, in);
  if (!spec.accepts(in)) unsupported(spec.functor, in);
  return instance("binary", {type_name(in), type_name(spec.output(in)), std::string("eddy::") + spec.functor});
}
std::string copy_name(DType from, DType to) { return instance("unary", {type_name(from), type_name(to), "eddy::Identity"}); }
std::string reduce_name(ReduceKernel kind, DType dtype) {
  if (!reduce_accepts(kind, dtype)) unsupported(reduce_functor(kind), dtype);
  return instance("reduce", {type_name(dtype), std::string("eddy::") + reduce_functor(kind)});
}
std::string index_type(const Tensor& index, std::string_view op) {
  EDDY_CHECK(index.dtype() == DType::i32 || index.dtype() == DType::i64, op,
             ": index tensor must be int32 or int64, got ", index.dtype());
  return type_name(index.dtype());
}

// Host bytes of `value` as dtype `dtype`, for a kernel argument.
struct ScalarBytes {
  alignas(16) unsigned char bytes[16] = {};
};
ScalarBytes scalar_bytes(std::complex<double> value, DType dtype) {
  ScalarBytes out;
  EDDY_DISPATCH_ALL(dtype, T, {
    const T converted = cpu_kernels::convert<T>(value);
    std::memcpy(out.bytes, &converted, sizeof(T));
  });
  return out;
}

}  // namespace

Allocator& device_allocator(int index) {
  static std::mutex mutex;
  static std::map<int, Allocator*> allocators;  // leaked: tensors in statics outlive main
  std::lock_guard lock(mutex);
  Allocator*& allocator = allocators[index];
  if (!allocator) allocator = make_caching_allocator(std::make_unique<DeviceMemory>(index)).release();
  return *allocator;
}

std::vector<std::string> all_kernel_names() {
  std::vector<std::string> names{instance("check_indices", {"int"}), instance("check_indices", {"eddy::i64"})};
  for (DType in : kAllDTypes) {
    for (UnaryKernel kind : kAllUnary) {
      if (unary_spec(kind).accepts(in)) names.push_back(unary_name(kind, in));
    }
    for (BinaryKernel kind : kAllBinary) {
      if (binary_spec(kind, in).accepts(in)) names.push_back(binary_name(kind, in));
    }
    for (ReduceKernel kind : kAllReduce) {
      if (reduce_accepts(kind, in)) names.push_back(reduce_name(kind, in));
    }
    for (DType to : kAllDTypes) names.push_back(copy_name(in, to));
    names.push_back(instance("fill", {type_name(in)}));
    names.push_back(instance("select", {type_name(in)}));
    for (const char* index : {"int", "eddy::i64"}) {
      names.push_back(instance("gather", {type_name(in), index}));
      names.push_back(instance("index_select", {type_name(in), index}));
      if (numeric(in)) names.push_back(instance("scatter_add", {type_name(in), index}));
    }
    if (real_numeric(in)) names.push_back(instance("arange", {type_name(in)}));
    if (is_floating(in)) {
      names.push_back(instance("random_uniform", {type_name(in)}));
      names.push_back(instance("random_normal", {type_name(in)}));
    }
  }
  return names;
}

void CudaBackend::copy(const Tensor& src, const Tensor& out) {
  const int device = device_of(out);
  auto layout = layout_of<2>(out.shape(), {&out, &src});
  void* in_ptr = element_address(src);
  void* out_ptr = element_address(out);
  int64_t n = out.numel();
  launch_elementwise(device, copy_name(src.dtype(), out.dtype()), n, {&in_ptr, &out_ptr, &layout, &n});
}

void CudaBackend::fill(const Tensor& out, std::complex<double> value) {
  const int device = device_of(out);
  auto layout = layout_of<1>(out.shape(), {&out});
  void* out_ptr = element_address(out);
  ScalarBytes bytes = scalar_bytes(value, out.dtype());
  int64_t n = out.numel();
  launch_elementwise(device, instance("fill", {type_name(out.dtype())}), n, {&out_ptr, bytes.bytes, &layout, &n});
}

void CudaBackend::unary(UnaryKernel kind, const Tensor& in, const Tensor& out) {
  const int device = device_of(out);
  const std::string name = unary_name(kind, in.dtype());
  auto layout = layout_of<2>(out.shape(), {&out, &in});
  void* in_ptr = element_address(in);
  void* out_ptr = element_address(out);
  int64_t n = out.numel();
  launch_elementwise(device, name, n, {&in_ptr, &out_ptr, &layout, &n});
}

// A primitive's own host loops (ArrayFunction) have no GPU spelling: its operand goes to the host
// and back. Correct for every dtype they take, and as slow as two copies; the special functions
// (erf, lgamma, ...) are the ones that come this way.
void CudaBackend::apply(const ArrayFunction& function, const Tensor& in, const Tensor& out) {
  Tensor host_in = Tensor::empty(in.shape(), in.dtype());
  Tensor host_out = Tensor::empty(out.shape(), out.dtype());
  download(in, host_in);
  backend_for(cpu()).apply(function, host_in, host_out);
  upload(host_out, out);
}

void CudaBackend::binary(BinaryKernel kind, const Tensor& a, const Tensor& b, const Tensor& out) {
  const int device = device_of(out);
  const std::string name = binary_name(kind, a.dtype());
  auto layout = layout_of<3>(out.shape(), {&out, &a, &b});
  void* a_ptr = element_address(a);
  void* b_ptr = element_address(b);
  void* out_ptr = element_address(out);
  int64_t n = out.numel();
  launch_elementwise(device, name, n, {&a_ptr, &b_ptr, &out_ptr, &layout, &n});
}

void CudaBackend::where(const Tensor& condition, const Tensor& a, const Tensor& b, const Tensor& out) {
  const int device = device_of(out);
  auto layout = layout_of<4>(out.shape(), {&out, &condition, &a, &b});
  void* c_ptr = element_address(condition);
  void* a_ptr = element_address(a);
  void* b_ptr = element_address(b);
  void* out_ptr = element_address(out);
  int64_t n = out.numel();
  launch_elementwise(device, instance("select", {type_name(out.dtype())}), n, {&c_ptr, &a_ptr, &b_ptr, &out_ptr, &layout, &n});
}

void CudaBackend::reduce(ReduceKernel kind, const Tensor& in, const std::vector<int64_t>& axes, const Tensor& out) {
  const int device = device_of(out);
  const std::string name = reduce_name(kind, in.dtype());
  // Kept axes first, then the reduced ones, each group merged where its strides allow.
  struct {
    int64_t shape[kMaxRank];
    int64_t strides[kMaxRank];
    int kept, rank;
    int64_t outputs, count, chunks, chunk_length;
  } layout{};
  std::vector<int64_t> extents, strides;
  auto add_group = [&](bool reduced) {
    const size_t group_start = extents.size();
    for (int64_t d = 0; d < in.dim(); ++d) {
      const bool is_reduced = std::binary_search(axes.begin(), axes.end(), d);
      if (is_reduced != reduced || in.shape()[d] == 1) continue;
      if (extents.size() > group_start && strides.back() == in.strides()[d] * in.shape()[d]) {
        extents.back() *= in.shape()[d];
        strides.back() = in.strides()[d];
      } else {
        extents.push_back(in.shape()[d]);
        strides.push_back(in.strides()[d]);
      }
    }
  };
  add_group(false);
  layout.kept = static_cast<int>(extents.size());
  add_group(true);
  EDDY_CHECK(extents.size() <= kMaxRank, "cuda reduce: the input of shape ", in.shape(), " has ", extents.size(),
             " axes that cannot be merged; the kernel takes at most ", kMaxRank);
  layout.rank = static_cast<int>(extents.size());
  layout.outputs = 1;
  layout.count = 1;
  for (int d = 0; d < layout.rank; ++d) {
    layout.shape[d] = extents[d];
    layout.strides[d] = strides[d];
    (d < layout.kept ? layout.outputs : layout.count) *= extents[d];
  }
  if (in.numel() == 0 && out.numel() > 0) layout.count = 0;
  // Few outputs of many elements each are cut into chunks, so that about kBlocksToFill blocks run.
  constexpr int64_t kBlocksToFill = 1024, kShortestChunk = 2048;
  layout.chunks = std::clamp<int64_t>(std::min((layout.count + kShortestChunk - 1) / kShortestChunk,
                                               kBlocksToFill / std::max<int64_t>(layout.outputs, 1)),
                                      1, kBlocksToFill);
  layout.chunk_length = (layout.count + layout.chunks - 1) / layout.chunks;
  Tensor partials = layout.chunks > 1 ? Tensor::empty({layout.outputs, layout.chunks}, in.dtype(), in.device()) : out;
  void* in_ptr = element_address(in);
  void* out_ptr = element_address(partials);
  // A power of two from 32 to 256 threads, so that small reductions leave few threads idle.
  const int64_t per_block = std::max<int64_t>(layout.chunk_length, 1);
  const unsigned block = std::clamp<unsigned>(std::bit_ceil(static_cast<uint64_t>(per_block)), 32, kBlock);
  launch(device, name, layout.outputs * layout.chunks, block, block * dtype_size(in.dtype()),
         {&in_ptr, &out_ptr, &layout});
  if (layout.chunks > 1) reduce(kind, partials, {1}, make_view(out, {layout.outputs, 1}, {1, 1}, out.offset()));
}

namespace {

// Device memory for a kernel to report the first bad index in: a flag word and the index.
class BadIndexReport {
 public:
  explicit BadIndexReport(int device) : device_(device), words_(Storage::allocate(2 * sizeof(int64_t), Device::cuda(device))) {
    const Driver& d = use_device(device);
    d.check(d.fill_bytes_async(reinterpret_cast<CUdeviceptr>(words_->data()), 0, 2 * sizeof(int64_t), stream(device)),
            "cuMemsetD8Async");
  }
  void* pointer() { return words_->data(); }
  // Waits for the kernel and throws when it met an index outside [-bound, bound).
  void check(std::string_view op, int64_t bound) {
    int64_t host[2] = {0, 0};
    const Driver& d = use_device(device_);
    d.check(d.to_host_async(host, reinterpret_cast<CUdeviceptr>(words_->data()), sizeof host, stream(device_)),
            "cuMemcpyDtoHAsync");
    synchronize(device_);
    EDDY_CHECK(host[0] == 0, op, ": index ", host[1], " is out of range for a dimension of size ", bound);
  }

 private:
  int device_;
  std::shared_ptr<Storage> words_;
};

struct IndexLayout {
  int64_t shape[kMaxRank];
  int64_t target_strides[kMaxRank];
  int rank, axis;
  int64_t bound, n;
};

IndexLayout index_layout(const Shape& index_shape, const Shape& target_shape, int64_t axis, std::string_view op) {
  EDDY_CHECK(index_shape.size() <= kMaxRank, "cuda ", op, ": indices of rank ", index_shape.size(),
             "; the kernel takes at most ", kMaxRank);
  IndexLayout layout{};
  const Shape target_strides = contiguous_strides(target_shape);
  layout.rank = static_cast<int>(index_shape.size());
  layout.axis = static_cast<int>(axis);
  layout.bound = target_shape[axis];
  layout.n = 1;
  for (int d = 0; d < layout.rank; ++d) {
    layout.shape[d] = index_shape[d];
    layout.target_strides[d] = target_strides[d];
    layout.n *= index_shape[d];
  }
  return layout;
}

}  // namespace

void CudaBackend::gather(const Tensor& in, int64_t axis, const Tensor& index, const Tensor& out) {
  const int device = device_of(out);
  const std::string name = instance("gather", {type_name(in.dtype()), index_type(index, "gather")});
  IndexLayout layout = index_layout(index.shape(), in.shape(), axis, "gather");
  BadIndexReport bad(device);
  void* in_ptr = element_address(in);
  void* index_ptr = element_address(index);
  void* out_ptr = element_address(out);
  void* bad_ptr = bad.pointer();
  launch_elementwise(device, name, layout.n, {&in_ptr, &index_ptr, &out_ptr, &layout, &bad_ptr});
  bad.check("gather", layout.bound);
}

void CudaBackend::index_select(const Tensor& in, int64_t axis, const Tensor& index, const Tensor& out) {
  const int device = device_of(out);
  const std::string name = instance("index_select", {type_name(in.dtype()), index_type(index, "index_select")});
  int64_t outer = 1, inner = 1, size = in.shape()[axis], count = index.numel();
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (d < axis) outer *= in.shape()[d];
    if (d > axis) inner *= in.shape()[d];
  }
  BadIndexReport bad(device);
  void* in_ptr = element_address(in);
  void* index_ptr = element_address(index);
  void* out_ptr = element_address(out);
  void* bad_ptr = bad.pointer();
  launch_elementwise(device, name, outer * count * inner,
                     {&in_ptr, &index_ptr, &out_ptr, &outer, &size, &count, &inner, &bad_ptr});
  bad.check("index_select", size);
}

// Atomic additions: where indices repeat, the order of the additions (and so the last bits of a
// float sum) can differ from run to run, as in PyTorch's CUDA index_add.
void CudaBackend::scatter_add(const Tensor& out, int64_t axis, const Tensor& index, const Tensor& src) {
  const int device = device_of(out);
  EDDY_CHECK(numeric(out.dtype()), "cuda kernel scatter_add does not support dtype ", out.dtype());
  const std::string name = instance("scatter_add", {type_name(out.dtype()), index_type(index, "scatter_add")});
  IndexLayout layout = index_layout(index.shape(), out.shape(), axis, "scatter_add");
  BadIndexReport bad(device);
  void* out_ptr = element_address(out);
  void* index_ptr = element_address(index);
  void* src_ptr = element_address(src);
  void* bad_ptr = bad.pointer();
  // The indices first, so that a bad one throws before anything is added (as on the CPU).
  launch_elementwise(device, instance("check_indices", {type_name(index.dtype())}), layout.n,
                     {&index_ptr, &layout.n, &layout.bound, &bad_ptr});
  bad.check("scatter_add", layout.bound);
  launch_elementwise(device, name, layout.n, {&out_ptr, &index_ptr, &src_ptr, &layout, &bad_ptr});
}

void CudaBackend::arange(const Tensor& out, double start, double step) {
  EDDY_CHECK(real_numeric(out.dtype()), "cuda kernel arange does not support dtype ", out.dtype());
  void* out_ptr = element_address(out);
  int64_t n = out.numel();
  launch_elementwise(device_of(out), instance("arange", {type_name(out.dtype())}), n, {&out_ptr, &start, &step, &n});
}

void CudaBackend::random_uniform(const Tensor& out, uint64_t seed, uint64_t offset) {
  EDDY_CHECK(is_floating(out.dtype()), "cuda kernel random_uniform does not support dtype ", out.dtype());
  void* out_ptr = element_address(out);
  int64_t n = out.numel();
  launch_elementwise(device_of(out), instance("random_uniform", {type_name(out.dtype())}), n,
                     {&out_ptr, &seed, &offset, &n});
}

void CudaBackend::random_normal(const Tensor& out, uint64_t seed, uint64_t offset) {
  EDDY_CHECK(is_floating(out.dtype()), "cuda kernel random_normal does not support dtype ", out.dtype());
  void* out_ptr = element_address(out);
  int64_t n = out.numel();
  launch_elementwise(device_of(out), instance("random_normal", {type_name(out.dtype())}), n,
                     {&out_ptr, &seed, &offset, &n});
}

void CudaBackend::upload(const Tensor& host, const Tensor& device_out) {
  const int device = device_of(device_out);
  const size_t bytes = static_cast<size_t>(host.numel()) * dtype_size(host.dtype());
  if (bytes == 0) return;
  const Driver& d = use_device(device);
  // From pageable memory the driver stages the bytes before it returns, so `host` may go at once.
  d.check(d.to_device_async(reinterpret_cast<CUdeviceptr>(element_address(device_out)), host.raw_data(), bytes,
                            stream(device)),
          "cuMemcpyHtoDAsync");
}

void CudaBackend::download(const Tensor& device_in, const Tensor& host_out) {
  const int device = device_of(device_in);
  const size_t bytes = static_cast<size_t>(host_out.numel()) * dtype_size(host_out.dtype());
  if (bytes == 0) return;
  const Driver& d = use_device(device);
  d.check(d.to_host_async(host_out.raw_data(), reinterpret_cast<CUdeviceptr>(element_address(device_in)), bytes,
                          stream(device)),
          "cuMemcpyDtoHAsync");
  cuda::synchronize(device);
}

void CudaBackend::synchronize(Device device) { cuda::synchronize(device.index); }

std::string CudaBackend::unavailable_reason(int index) const { return cuda::unavailable_reason(index); }

intptr_t CudaBackend::stream_handle(int index) const {
  use_device(index);
  return reinterpret_cast<intptr_t>(stream(index));
}

namespace {
// Registered while the program starts, as the CPU backend is; nothing here touches the driver
// until a cuda tensor is made.
const bool cuda_backend_registered = [] {
  static CudaBackend backend;
  register_backend(DeviceType::cuda, &backend);
  register_allocator(DeviceType::cuda, [](int index) -> Allocator& {
    const std::string unavailable = unavailable_reason(index);
    EDDY_CHECK(unavailable.empty(), "cuda:", index, ": ", unavailable);
    return device_allocator(index);
  });
  return true;
}();
}  // namespace

}  // namespace eddy::cuda
