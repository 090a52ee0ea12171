// `device:` in a language-model file, on the stand-in GPU (support/host_memory_device.h): a GPT
// trained there, dropout, gradient accumulation and ZeRO-1 included, equals the CPU run bit for
// bit, so no tensor of the run stayed on the CPU. Also run under `mpirun -np 2`
// (stand_in_device_tests_np2), each rank on its own stand-in GPU, where ZeRO-1 shards AdamW's
// state and the gradients cross the ranks through MPI from device memory.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "eddy/eddy.h"
#include "eddy/io/hdf5.h"
#include "solvers/lm/trainer.h"
#include "support/equal_checkpoints.h"
#include "support/host_memory_device.h"
#include "support/job_directory.h"
#include "support/small_corpus.h"

namespace eddy::lm {
namespace {

namespace fs = std::filesystem;

TEST(LmOnDevice, EqualsTheCpuRunBitForBit) {
  testing::install_host_memory_device();
  const JobDirectory job("eddy_lm_on_device_");
  const fs::path& dir = job.path();
  if (world().rank() == 0) {
    fs::create_directories(dir / "corpus");
    write_small_corpus(dir / "corpus" / "a.txt", 0);
  }
  world().barrier();
  auto train_on = [&](const std::string& device) {
    const std::string text =
        cat("device: ", device, "\ndata:\n  files: ", (dir / "corpus" / "*.txt").string(),
            "\n  separator: '%'\n  validation_fraction: 0.1\n"
            "tokenizer: {vocab_size: 300}\n"
            "model: {type: gpt2, context: 16, hidden_size: 32, layers: 2, heads: 4, dropout: 0.1}\n"
            "training: {steps: 4, batch_size: 4, accumulation: 2, evaluate_every: 2, evaluation_batches: 1, "
            "zero_stage: 1}\n"
            "output: {dir: ", (dir / device).string(), ", checkpoint_every: 2}\n");
    auto config = io::Config::parse(text, "lm.yaml", {});
    TrainOptions options;
    options.eager = true;  // a compiled program for a cuda device runs CUDA kernels: a real GPU's
    const TrainResult result = train(read_lm_problem(*config), options);
    EXPECT_TRUE(result.finished) << result.message;
    return result;
  };
  const auto [on_cpu, on_device] = testing::on_cpu_and_stand_in(train_on, 1000);
  EXPECT_EQ(on_device.train_loss, on_cpu.train_loss);
  EXPECT_EQ(on_device.validation_loss, on_cpu.validation_loss);
  world().barrier();  // rank 0 writes the results
  if (world().rank() != 0) return;
  EXPECT_EQ(element_bytes(io::read_hdf5((dir / "cuda/history.h5").string(), "train_loss")),
            element_bytes(io::read_hdf5((dir / "cpu/history.h5").string(), "train_loss")));
  expect_equal_checkpoints((dir / "cuda/checkpoint.safetensors").string(), (dir / "cpu/checkpoint.safetensors").string());
}

}  // namespace
}  // namespace eddy::lm
