#include "solvers/common/checkpoint_history.h"

#include "eddy/core/error.h"
#include "eddy/io/checkpoint.h"
#include "eddy/ops/ops.h"

namespace eddy::solvers {

void save_series(nn::StateDict& state, const std::string& name, const std::vector<double>& values) {
  state[std::string(io::kRecordPrefix) + name] = tensor(values);
}

std::vector<double> restored_series(const nn::StateDict& state, const std::string& name,
                                    const std::string& checkpoint) {
  const std::string key = std::string(io::kRecordPrefix) + name;
  const auto found = state.find(key);
  EDDY_CHECK(found != state.end(), "--resume: ", checkpoint, " has no '", key,
             "'; it was written by an older eddy or by another command");
  return found->second.to_vector<double>();
}

}  // namespace eddy::solvers
