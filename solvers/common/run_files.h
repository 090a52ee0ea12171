#pragma once
// The files each command writes a run's results to (ECMAScript regular expressions of file names).
// A run that starts anew in a folder removes every command's, not only its own: `eddy train` in a
// folder where `eddy solve` wrote left solution.h5 and its ParaView series beside the new
// checkpoint, where they read as the new run's.

#include <string>

namespace eddy::solvers {

// eddy solve: the ParaView files (solution.vti or .pvti and its pieces, a series' slices and
// solution.pvd, points.vtp), and with them solution.h5.
inline constexpr const char* kPinnVtkFiles = R"(solution(_\d+)?(_piece\d+)?\.(vti|pvti)|solution\.pvd|points\.vtp)";
inline const std::string kPinnResultFiles = std::string(R"(solution\.h5|)") + kPinnVtkFiles;

// eddy train: each test set's first sample as a ParaView image, and with them predictions.h5.
inline constexpr const char* kOperatorSampleImages = R"(sample0_.*\.vti)";
inline const std::string kOperatorResultFiles = std::string(R"(predictions\.h5|)") + kOperatorSampleImages;

// eddy lm train: its history.
inline constexpr const char* kLmResultFiles = R"(history\.h5)";

inline const std::string kEveryRunsResultFiles =
    kPinnResultFiles + "|" + kOperatorResultFiles + "|" + kLmResultFiles;

}  // namespace eddy::solvers
