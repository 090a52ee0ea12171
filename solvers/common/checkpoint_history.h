#pragma once
// A trainer's history (losses, errors, weights per recorded step) travels in its checkpoint as
// float64 series "history.<name>", so that the results a resumed run writes hold the records from
// before the checkpoint too, as an uninterrupted run's do.

#include <string>
#include <vector>

#include "eddy/nn/module.h"

namespace eddy::solvers {

void save_series(nn::StateDict& state, const std::string& name, const std::vector<double>& values);

// The series `name` of a checkpoint's training state; an error names the key and `checkpoint`
// when it has none.
std::vector<double> restored_series(const nn::StateDict& state, const std::string& name,
                                    const std::string& checkpoint);

}  // namespace eddy::solvers
