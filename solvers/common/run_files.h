#pragma once
// The files each command writes a run's results to (ECMAScript regular expressions of file names),
// which a run that starts anew in a folder removes: its own command's, and those of the command
// that wrote the folder before (`eddy train` where `eddy solve` wrote left solution.h5 and its
// ParaView series beside the new checkpoint, where they read as the new run's). Never every
// command's: a user's own file may carry another command's name (observations in predictions.h5).

#include <string>

#include "solvers/common/file_kind.h"

namespace eddy::solvers {

// eddy solve: the ParaView files (solution.vti or .pvti and its pieces, a series' slices and
// solution.pvd, points.vtp), and with them solution.h5.
inline constexpr const char* kPinnVtkFiles = R"(solution(_\d+)?(_piece\d+)?\.(vti|pvti)|solution\.pvd|points\.vtp)";

// eddy train: each test set's first sample as a ParaView image, and with them predictions.h5.
inline constexpr const char* kOperatorSampleImages = R"(sample0_.*\.vti)";

// The HDF5 file of a run of `kind`'s results, marked with the run's config_hash attribute (empty
// for a kind that trains no run).
inline std::string results_file_of(FileKind kind) {
  switch (kind) {
    case FileKind::pinn: return "solution.h5";
    case FileKind::operator_training: return "predictions.h5";
    case FileKind::language_model: return "history.h5";
    case FileKind::dataset:
    case FileKind::unrecognised: break;
  }
  return {};
}

// The result files of a run of `kind` (empty for a kind that trains no run).
inline std::string result_files_of(FileKind kind) {
  std::string results;
  for (const char c : results_file_of(kind)) results += c == '.' ? std::string("\\.") : std::string(1, c);
  switch (kind) {
    case FileKind::pinn: return results + "|" + kPinnVtkFiles;
    case FileKind::operator_training: return results + "|" + kOperatorSampleImages;
    default: return results;
  }
}

}  // namespace eddy::solvers
