#pragma once
// What the CUDA backend's files share (cuda_backend.cpp, matmul.cpp): kernel launches and the
// operand layouts the kernels of kernel_source.cpp take.

#include <array>
#include <string>
#include <vector>

#include "eddy/core/tensor.h"

namespace eddy::cuda {

constexpr int kMaxRank = 8;  // axes of a kernel's index space after merging (kernel_source.cpp)

// Launches kernel `name` (a name expression, compiled on first use) on device `device`'s stream:
// `blocks` blocks of `block` threads (the grid is capped; the kernels loop over the rest).
void launch(int device, const std::string& name, int64_t blocks, unsigned block, size_t shared_bytes,
            std::vector<void*> arguments);
// A launch over `n` elements, one thread each.
void launch_elementwise(int device, const std::string& name, int64_t n, std::vector<void*> arguments);

// Element offsets of N operands over one index space, merged to as few axes as they allow;
// matches kernel_source.cpp's Layout<N>.
template <int N>
struct Layout {
  int64_t shape[kMaxRank];
  int64_t strides[N][kMaxRank];
  int rank;
};

template <int N>
Layout<N> layout_of(const Shape& shape, const std::array<const Tensor*, N>& operands) {
  // Axes of extent 1 dropped, then neighbours merged where every operand steps through them as
  // one axis.
  std::vector<int64_t> extents;
  std::array<std::vector<int64_t>, N> strides;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool mergeable = !extents.empty();
    for (int k = 0; k < N && mergeable; ++k) {
      mergeable = strides[k].back() == operands[k]->strides()[d] * shape[d];
    }
    if (mergeable) {
      extents.back() *= shape[d];
      for (int k = 0; k < N; ++k) strides[k].back() = operands[k]->strides()[d];
    } else {
      extents.push_back(shape[d]);
      for (int k = 0; k < N; ++k) strides[k].push_back(operands[k]->strides()[d]);
    }
  }
  EDDY_CHECK(extents.size() <= kMaxRank, "cuda: a strided operand of shape ", shape, " has ", extents.size(),
             " axes that cannot be merged; the kernels take at most ", kMaxRank);
  Layout<N> layout{};
  layout.rank = static_cast<int>(extents.size());
  for (int d = 0; d < layout.rank; ++d) {
    layout.shape[d] = extents[d];
    for (int k = 0; k < N; ++k) layout.strides[k][d] = strides[k][d];
  }
  return layout;
}

inline int device_of(const Tensor& t) {
  EDDY_CHECK(t.device().type == DeviceType::cuda, "cuda backend: a tensor on ", t.device(), " reached a cuda kernel");
  return t.device().index;
}

}  // namespace eddy::cuda
