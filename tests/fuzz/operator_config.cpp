// An operator-learning run file as `eddy train` reads it before opening any data: YAML parsed,
// every key read and validated, unknown keys refused.
#include "fuzz_support.h"
#include "eddy/io/config.h"
#include "solvers/operator/problem.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace eddy;
  fuzz::expecting_errors([&] {
    auto config = io::Config::parse(std::string(fuzz::as_text(data, size)), "run.yaml");
    operator_learning::read_operator_problem(*config);
  });
  return 0;
}
