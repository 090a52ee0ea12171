// A PINN problem file as `eddy check` and `eddy solve` load it: YAML parsed, every key read and
// validated (geometry, conditions, expressions, training, output), unknown keys refused, and the
// model built. Files a config names are looked for in the scratch folder, where there are none.
//
// The model is built only when it is small (kMaxWeights): read_problem refuses one that cannot fit
// in this machine's memory, and one that can fit but is larger than the fuzzer's memory limit is
// not a fault.
#include "fuzz_support.h"
#include "eddy/io/config.h"
#include "solvers/pinn/problem.h"
#include "solvers/pinn/solver.h"

namespace {

constexpr double kMaxWeights = 1 << 20;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace eddy;
  fuzz::expecting_errors([&] {
    auto config = io::Config::parse(std::string(fuzz::as_text(data, size)), "problem.yaml");
    const pinn::Problem problem = pinn::read_problem(*config);
    const auto width = static_cast<double>(problem.model.width);
    const auto inputs = static_cast<double>(problem.model.inputs + 2 * problem.model.fourier_features);
    if (width * (width + inputs) * static_cast<double>(problem.model.depth + 1) > kMaxWeights) return;
    pinn::PinnState state(problem);
    volatile int64_t parameters = state.model().parameter_count();
    (void)parameters;
  });
  return 0;
}
