// The PINN solver's fused interior pass (solvers/pinn/taylor_mlp_pass.cpp) alone: the Burgers
// interior term of `make bench-peers` (2 -> depth x width -> 1, 10,000 points, u, u_x, u_t and u_xx,
// the residual u_t + u u_x - nu u_xx and the mean of its square) through `taylor_mlp_pass`, timed
// call by call in one process. The shortest and the median call are printed: on this shared host a
// change to the pass is measured by the shortest call of each build, run one after the other, as
// the host's slow stretches last seconds and move whole `eddy solve` runs by more than the change.
//
//   OMP_NUM_THREADS=1 build/bench/pinn_pass [--seconds S] [--width W] [--depth D] [--float64]
//                                           [--activation tanh|sin|gelu|silu]

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "eddy/eddy.h"
#include "solvers/pinn/taylor_mlp_pass.h"

namespace {

using namespace eddy;

struct Options {
  double seconds = 3;
  int64_t width = 20, depth = 8, points = 10000;
  DType dtype = DType::f32;
  nn::ActivationKind activation = nn::ActivationKind::tanh;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) throw Error(cat("pinn_pass: ", a, " needs a value"));
      return argv[++i];
    };
    if (a == "--seconds") o.seconds = std::atof(next());
    else if (a == "--width") o.width = std::atoll(next());
    else if (a == "--depth") o.depth = std::atoll(next());
    else if (a == "--points") o.points = std::atoll(next());
    else if (a == "--float64") o.dtype = DType::f64;
    else if (a == "--activation") o.activation = nn::parse_activation(next());
    else throw Error(cat("pinn_pass: unknown option ", a));
  }
  return o;
}

// r = u_t + u u_x - nu u_xx per point; the chunk's sum of r^2 / N and its cotangents.
template <typename T>
double burgers_head(const pinn::HeadChunk& chunk, int64_t points) {
  constexpr double kNu = 0.01 / 3.141592653589793;
  const T* u = static_cast<const T*>(chunk.streams[0]);
  const T* u_x = static_cast<const T*>(chunk.streams[1]);
  const T* u_t = static_cast<const T*>(chunk.streams[2]);
  const T* u_xx = static_cast<const T*>(chunk.streams[3]);
  T* g[4];
  for (int s = 0; s < 4; ++s) g[s] = static_cast<T*>(chunk.cotangents[static_cast<size_t>(s)]);
  const T scale = T(2) / static_cast<T>(points);
  double loss = 0;
  for (int64_t j = 0; j < chunk.capacity; ++j) {
    const T r = j < chunk.count ? u_t[j] + u[j] * u_x[j] - T(kNu) * u_xx[j] : T(0);
    loss += static_cast<double>(r) * r / static_cast<double>(points);
    g[0][j] = scale * r * u_x[j];
    g[1][j] = scale * r * u[j];
    g[2][j] = scale * r;
    g[3][j] = -scale * r * T(kNu);
  }
  return loss;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    Generator generator(0);
    nn::PlainMlp mlp;
    mlp.activation = o.activation;
    std::vector<int64_t> widths{2};
    for (int64_t l = 0; l < o.depth; ++l) widths.push_back(o.width);
    widths.push_back(1);
    for (size_t l = 0; l + 1 < widths.size(); ++l) {
      const double bound = 1.0 / std::sqrt(static_cast<double>(widths[l]));
      mlp.weights.push_back((rand({widths[l], widths[l + 1]}, o.dtype, &generator) * 2.0 - 1.0) * bound);
      mlp.biases.push_back(zeros({widths[l + 1]}, o.dtype));
    }
    mlp.input_scale = {1.0, 2.0};
    mlp.input_shift = {0.0, -1.0};
    const Tensor points = rand({o.points, 2}, o.dtype, &generator) * 2.0 - 1.0;
    const pinn::ChunkHead head = [&](const pinn::HeadChunk& chunk) {
      return o.dtype == DType::f32 ? burgers_head<float>(chunk, o.points) : burgers_head<double>(chunk, o.points);
    };

    using Clock = std::chrono::steady_clock;
    std::vector<double> calls;
    double loss = 0;
    const Clock::time_point start = Clock::now();
    while (std::chrono::duration<double>(Clock::now() - start).count() < o.seconds || calls.size() < 5) {
      const Clock::time_point before = Clock::now();
      loss = pinn::taylor_mlp_pass(mlp, points, {0}, head).loss;
      calls.push_back(std::chrono::duration<double, std::milli>(Clock::now() - before).count());
    }
    std::sort(calls.begin(), calls.end());
    std::printf("pinn_pass %s %s width %lld depth %lld points %lld: shortest %.3f ms, median %.3f ms over %zu calls "
                "(loss %.6g)\n",
                std::string(nn::activation_name(o.activation)).c_str(), o.dtype == DType::f32 ? "float32" : "float64",
                static_cast<long long>(o.width), static_cast<long long>(o.depth), static_cast<long long>(o.points),
                calls.front(), calls[calls.size() / 2], calls.size(), loss);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
