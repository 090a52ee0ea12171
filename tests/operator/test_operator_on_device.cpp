// `device:` in an operator training file, on the stand-in GPU (support/host_memory_device.h): an
// FNO trained there equals the CPU run bit for bit, so no tensor of the run stayed on the CPU.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "eddy/eddy.h"
#include "eddy/io/hdf5.h"
#include "solvers/operator/trainer.h"
#include "support/equal_checkpoints.h"
#include "support/host_memory_device.h"
#include "support/job_directory.h"
#include "support/smoothing_data.h"

namespace eddy::operator_learning {
namespace {

namespace fs = std::filesystem;

TEST(OperatorOnDevice, EqualsTheCpuRunBitForBit) {
  testing::install_host_memory_device();
  const JobDirectory job("eddy_operator_on_device_");
  const fs::path& dir = job.path();
  write_smoothing_data((dir / "smooth.h5").string(), {{"train", 32, 32}, {"test", 8, 64}}, 4, 3);
  auto train_on = [&](const std::string& device) {
    const std::string text = cat("device: ", device, "\ndata:\n  file: ", (dir / "smooth.h5").string(),
                                 "\n  train: {input: train/u, output: train/smooth}\n"
                                 "  test:\n    - {name: fine, input: test/u, output: test/smooth}\n"
                                 "model: {type: fno, modes: [6], width: 8, layers: 2, projection_width: 16}\n"
                                 "training: {epochs: 3, batch_size: 8, learning_rate: 1.0e-2, dtype: float64}\n"
                                 "output: {dir: ", (dir / device).string(), ", checkpoint_every: 2}\n");
    auto config = io::Config::parse(text, "smooth.yaml", {});
    TrainOptions options;
    options.eager = true;  // a compiled program for a cuda device runs CUDA kernels: a real GPU's
    const TrainResult result = train(read_operator_problem(*config), options);
    EXPECT_TRUE(result.finished) << result.message;
    return result;
  };
  const auto [on_cpu, on_device] = testing::on_cpu_and_stand_in(train_on, 1000);
  EXPECT_EQ(on_device.train_loss, on_cpu.train_loss);
  EXPECT_EQ(on_device.test_relative_l2.at("fine"), on_cpu.test_relative_l2.at("fine"));
  for (const char* dataset : {"history/train_loss", "test/fine/prediction"}) {
    EXPECT_EQ(element_bytes(io::read_hdf5((dir / "cuda/predictions.h5").string(), dataset)),
              element_bytes(io::read_hdf5((dir / "cpu/predictions.h5").string(), dataset)))
        << dataset;
  }
  expect_equal_checkpoints((dir / "cuda/checkpoint.safetensors").string(), (dir / "cpu/checkpoint.safetensors").string());
}

}  // namespace
}  // namespace eddy::operator_learning
