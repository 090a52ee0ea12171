#pragma once
// A stand-in GPU for tests on machines without one. install_host_memory_device() registers, for
// DeviceType::cuda, a backend of two devices (cuda:0 and cuda:1, so that two ranks of an MPI test
// each have one) that keeps cuda tensors in host memory and runs the CPU kernels on them. To the engine such a tensor is a cuda:0 tensor in every way it can see: its device, the
// checks that refuse inputs on two devices, host_copy, upload and download. So a solver that
// leaves one tensor on the CPU fails here as it would on a GPU, and where it leaves none its
// results equal the CPU run's bit for bit (the same kernels ran).
//
// Compiled programs are not covered: a program for a cuda device runs CUDA kernels, which need a
// GPU. Tests with the stand-in run eagerly. Install it in a test binary of its own: it replaces
// the real CUDA backend for the rest of the process.

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

namespace eddy::testing {

void install_host_memory_device();
// Kernels the stand-in has run since the process started, so a test can tell that work ran there.
int64_t host_memory_device_kernel_calls();

// run("cpu") and then run("cuda"), which must have run at least `kernels` kernels on the
// stand-in: the two results, for a test to compare.
template <typename Run>
auto on_cpu_and_stand_in(Run&& run, int64_t kernels) {
  auto on_cpu = run("cpu");
  const int64_t before = host_memory_device_kernel_calls();
  auto on_device = run("cuda");
  EXPECT_GT(host_memory_device_kernel_calls() - before, kernels);
  return std::pair{std::move(on_cpu), std::move(on_device)};
}

}  // namespace eddy::testing
