// A language-model run file as `eddy lm train` reads it: YAML parsed, every key read and
// validated, unknown keys refused.
#include "fuzz_support.h"
#include "eddy/io/config.h"
#include "solvers/lm/problem.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace eddy;
  fuzz::expecting_errors([&] {
    auto config = io::Config::parse(std::string(fuzz::as_text(data, size)), "lm.yaml");
    lm::read_lm_problem(*config);
  });
  return 0;
}
