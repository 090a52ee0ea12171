#pragma once
// Checkpoints of distributed state (dist/dtensor.h): every rank writes its part of each tensor
// with the global layout beside it, and the folder loads on any number of ranks and any mesh,
// one process included.
//
//   DIRECTORY/rank-R-of-N.safetensors  rank R's local part of every distributed tensor, and (rank
//                                      0 only) the ordinary tensors whole; the metadata holds
//                                      each part's global shape, mesh, coordinates and placements
//   DIRECTORY/complete                 written by rank 0 after every rank's file is in place, so
//                                      a folder without it (a job that died while saving) is
//                                      refused rather than read half-written
// Files are written atomically; saving over an earlier checkpoint replaces it file by file.

#include <string>

#include "eddy/nn/state_dict.h"

namespace eddy::io {

// Collective over the ranks of the job. Partial(max) tensors are refused (reshard them first).
void save_distributed_state(const std::string& directory, const nn::StateDict& state);

// Fills every tensor of `targets` in place: an ordinary one with the whole saved value, a
// distributed one with its own part under its own placements (resharded from the saved layout,
// which may come from another mesh and rank count). The keys, global shapes and dtypes must match
// the saved ones exactly; errors name the key and the file. Every rank reads every rank file, so
// the whole of each tensor passes through each rank's memory.
void load_distributed_state(const std::string& directory, const nn::StateDict& targets);

}  // namespace eddy::io
