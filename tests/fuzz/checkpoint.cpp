// Checkpoints as `--resume` reads them: a safetensors file loaded into a small model (every
// tensor's name, shape and dtype checked against it) with the optimiser state, and the run
// settings the checkpoint records decoded and compared with a run's, as the solvers do.
#include "eddy/io/checkpoint.h"
#include "eddy/nn/layers.h"
#include "fuzz_support.h"
#include "solvers/common/resume_settings.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace eddy;
  const fuzz::TempFile file("checkpoint.safetensors", fuzz::as_text(data, size));
  fuzz::expecting_errors([&] {
    Generator generator(0);
    nn::Sequential model({std::make_shared<nn::Linear>(2, 3, generator), std::make_shared<nn::Linear>(3, 1, generator)});
    nn::StateDict training_state;
    const solvers::Settings this_run = {{"model.width", "3"}, {"seed", "0"}};
    io::resume_from_checkpoint(
        file.path(),
        [&](const io::CheckpointInfo& info) {
          if (!info.settings.empty()) {
            solvers::check_same_settings(solvers::decode_settings(info.settings, file.path()), this_run, {"training"}, file.path());
          }
        },
        model, training_state);
    for (const auto& [name, tensor] : training_state) fuzz::read_every_byte(tensor);
  });
  return 0;
}
