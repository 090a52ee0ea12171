// DefaultDeviceScope (core/device.h): where creation ops, tensors from host values and file
// readers put their output when the caller names no device. Run on the stand-in GPU
// (support/host_memory_device.h), so that it is checked on machines without one.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "eddy/core/backend.h"
#include "eddy/eddy.h"
#include "eddy/io/hdf5.h"
#include "eddy/io/safetensors.h"
#include "support/expect_error.h"
#include "support/host_memory_device.h"

namespace eddy {
namespace {

const Device kGpu = Device::cuda(0);

class DefaultDevice : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing::install_host_memory_device(); }
};

TEST_F(DefaultDevice, IsTheCpuOutsideAScopeAndNestsInside) {
  EXPECT_EQ(default_device(), cpu());
  {
    DefaultDeviceScope outer(kGpu);
    EXPECT_EQ(default_device(), kGpu);
    {
      DefaultDeviceScope inner(cpu());
      EXPECT_EQ(zeros({2}).device(), cpu());
    }
    EXPECT_EQ(default_device(), kGpu);
  }
  EXPECT_EQ(default_device(), cpu());
}

TEST_F(DefaultDevice, CreationOpsAndHostValuesGoThere) {
  const std::vector<double> values = {1.5, -2, 3};
  const Tensor on_cpu_draw = rand({5}, DType::f64);
  const Tensor on_cpu_ones = tensor(values);
  DefaultDeviceScope on_gpu(kGpu);
  const std::vector<Tensor> made = {zeros({2, 3}), ones({2}), full({2}, 7.0), scalar(1.0), arange(0, 4),
                                    linspace(0, 1, 5), eye(3), tensor(values), tensor(std::vector<bool>{true, false}),
                                    rand({4}), randn({4}), random_key(1)};
  for (size_t i = 0; i < made.size(); ++i) EXPECT_EQ(made[i].device(), kGpu) << "creation " << i;
  EXPECT_EQ(tensor(values).to_vector<double>(), values);
  EXPECT_EQ(tensor(values, {3}, cpu()).device(), cpu());  // a caller may still name the host
  // The same counter-based draws as on the host: the generator state continues across devices.
  Generator generator(0);
  Generator host_generator(0);
  const Tensor drawn = rand({5}, DType::f64, &generator);
  EXPECT_EQ(element_bytes(drawn), element_bytes(to(rand({5}, DType::f64, &host_generator), kGpu)));
  EXPECT_EQ(on_cpu_draw.device(), cpu());
  EXPECT_EQ(on_cpu_ones.device(), cpu());
}

TEST_F(DefaultDevice, FilesAreReadOntoItAndWrittenFromIt) {
  const std::string path = (std::filesystem::temp_directory_path() / ("eddy_default_device_" +
                                                                      std::to_string(::getpid()))).string();
  const Tensor values = tensor(std::vector<float>{1, 2, 3, 4}, {2, 2}, kGpu);
  {
    io::Hdf5Writer writer(path + ".h5");
    writer.write("a", values);
    writer.write_rows("b", values, 0, 2);
    writer.commit();
  }
  io::save_safetensors(path + ".safetensors", {{"a", values}});
  {
    DefaultDeviceScope on_gpu(kGpu);
    EXPECT_EQ(io::read_hdf5(path + ".h5", "a").device(), kGpu);
    EXPECT_EQ(io::load_safetensors(path + ".safetensors").tensors.at("a").device(), kGpu);
  }
  const Tensor read_back = io::read_hdf5(path + ".h5", "b");
  EXPECT_EQ(read_back.device(), cpu());
  EXPECT_EQ(element_bytes(read_back), element_bytes(values));
  EXPECT_EQ(element_bytes(io::load_safetensors(path + ".safetensors").tensors.at("a")), element_bytes(values));
  std::filesystem::remove(path + ".h5");
  std::filesystem::remove(path + ".safetensors");
}

TEST_F(DefaultDevice, MixingDevicesIsRefusedNamingBoth) {
  const Tensor on_gpu = zeros({2}, DType::f32, kGpu);
  expect_error([&] { add(on_gpu, zeros({2})); }, {"add: input 1 is on cpu:0 but input 0 is on cuda:0"});
}

}  // namespace
}  // namespace eddy
