// safetensors encoding and decoding, checkpoints (save -> load -> identical outputs), atomic
// writes, and rejection of truncated or corrupt files with clear errors.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/expect_error.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "eddy/eddy.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/checkpoint.h"
#include "eddy/io/safetensors.h"
#include "eddy/nn/pinn_models.h"

namespace eddy::io {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("eddy_io_test_" + std::to_string(::getpid()))) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};


nn::StateDict sample_tensors() {
  return {{"weights", tensor<float>({1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -8.5f}, {2, 3})},
          {"steps", tensor<int64_t>({7})},
          {"mask", tensor<bool>({true, false, true})},
          {"spectrum", complex(tensor<double>({1.0, 2.0}), tensor<double>({-0.5, 4.0}))},
          {"scalar", scalar(2.5, DType::f64)},
          {"bf16", cast(tensor<float>({1.0f, -0.375f, 3.0e38f}), DType::bf16)},
          {"f16", cast(tensor<float>({0.5f, 65504.0f}), DType::f16)}};
}

// A file of this header and `data_bytes` zero bytes of data.
std::string with_header(const std::string& json, size_t data_bytes) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return out + json + std::string(data_bytes, '\0');
}

TEST(AtomicFiles, AbandonedTemporariesOfAFileAreRemoved) {
  // A writer killed before its rename leaves NAME.tmp-PID: removed once that process is gone,
  // kept while it runs (this process), and other files' temporaries are left alone.
  const fs::path dir = fs::temp_directory_path() / ("eddy_temporaries_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string own = ".tmp-" + std::to_string(::getpid());
  const std::vector<std::string> names{"data.h5.tmp-999999998", "data.h5" + own, "other.h5.tmp-999999998"};
  for (const std::string& name : names) std::ofstream(dir / name) << "partial";
  remove_abandoned_temporaries_of((dir / "data.h5").string());
  EXPECT_FALSE(fs::exists(dir / "data.h5.tmp-999999998"));
  EXPECT_TRUE(fs::exists(dir / ("data.h5" + own)));
  EXPECT_TRUE(fs::exists(dir / "other.h5.tmp-999999998"));
  fs::remove_all(dir);
}

TEST(Safetensors, RoundTripsEveryDtypeAndMetadata) {
  nn::StateDict original = sample_tensors();
  std::string bytes = encode_safetensors(original, {{"purpose", "test"}});
  // Header length is little-endian and the data starts 8-byte aligned.
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  EXPECT_EQ((8 + length) % 8, 0u);
  EXPECT_EQ(bytes[8], '{');

  SafetensorsContents decoded = decode_safetensors(bytes, "memory");
  EXPECT_EQ(decoded.metadata, (std::map<std::string, std::string>{{"purpose", "test"}}));
  ASSERT_EQ(decoded.tensors.size(), original.size());
  for (const auto& [name, tensor] : original) {
    const Tensor& back = decoded.tensors.at(name);
    EXPECT_EQ(back.dtype(), tensor.dtype()) << name;
    EXPECT_EQ(back.shape(), tensor.shape()) << name;
    auto a = tensor.to_vector<c128>(), b = back.to_vector<c128>();
    EXPECT_EQ(a, b) << name;
  }
}

TEST(Safetensors, WritesNonContiguousTensorsDensely) {
  Tensor base = reshape(arange(0, 6, 1, DType::f64), {2, 3});
  std::string bytes = encode_safetensors({{"t", transpose(base)}}, {});
  Tensor back = decode_safetensors(bytes, "memory").tensors.at("t");
  EXPECT_EQ(back.to_vector<double>(), (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST(Safetensors, RejectsTruncatedAndCorruptFiles) {
  std::string good = encode_safetensors(sample_tensors(), {});
  EXPECT_NE(error_of([&] { decode_safetensors(good.substr(0, 5), "f.safetensors"); }).find("f.safetensors: not a safetensors file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { decode_safetensors(good.substr(0, good.size() - 3), "f.safetensors"); }).find("outside"),
            std::string::npos);
  std::string huge_header = good;
  huge_header[7] = 0x7f;
  EXPECT_NE(error_of([&] { decode_safetensors(huge_header, "f"); }).find("header length"), std::string::npos);
  std::string bad_json = good;
  bad_json[8] = '[';
  EXPECT_NE(error_of([&] { decode_safetensors(bad_json, "f"); }).find("not valid JSON"), std::string::npos);
  // nlohmann's parser throws out_of_range, not parse_error, for a number beyond double's range.
  expect_error([&] { decode_safetensors(with_header(R"({"a":{"dtype":"F32","shape":[1e400],"data_offsets":[0,4]}})", 4), "f.safetensors"); },
               {"f.safetensors: header is not valid JSON", "number overflow"});
  std::string trailing = good + "xyz";
  EXPECT_NE(error_of([&] { decode_safetensors(trailing, "f"); }).find("trailing"), std::string::npos);

  EXPECT_NE(error_of([&] { decode_safetensors(with_header(R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", 1), "f"); })
                .find("unsupported dtype \"F8_E4M3\""),
            std::string::npos);
  EXPECT_NE(error_of([&] { decode_safetensors(with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "f"); })
                .find("needs 12"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              decode_safetensors(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                                             12),
                                 "f");
            }).find("gap"),
            std::string::npos);
  EXPECT_NE(error_of([&] { decode_safetensors(with_header(R"({"a":{"dtype":"F32","shape":[1]}})", 0), "f"); })
                .find("lacks"),
            std::string::npos);
}

TEST(Safetensors, AFilterReadsSomeTensorsAndStillValidatesAll) {
  const std::string good = encode_safetensors(sample_tensors(), {});
  const SafetensorsContents some =
      decode_safetensors(good, "memory", [](const std::string& name) { return name == "steps" || name == "spectrum"; });
  ASSERT_EQ(some.tensors.size(), 2u);
  EXPECT_EQ(some.tensors.at("steps").item<int64_t>(), 7);
  EXPECT_EQ(some.tensors.at("spectrum").dtype(), DType::c128);  // the complex listing applies to what is read
  // An entry left unread is checked all the same.
  expect_error([&] {
    decode_safetensors(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                   R"("b":{"dtype":"F32","shape":[3],"data_offsets":[4,8]}})",
                                   8),
                       "f", [](const std::string& name) { return name == "a"; });
  }, {"tensor \"b\"", "needs 12"});
}

// A BOOL tensor's bytes may hold any nonzero value for true (as NumPy and PyTorch read them); eddy
// stores 1, since its kernels load bool bytes as C++ bool.
TEST(Safetensors, BoolBytesOtherThanZeroAndOneReadAsTrue) {
  std::string file = with_header(R"({"mask":{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]}})", 0);
  file += std::string("\x00\x01\x02\xfa", 4);
  const Tensor mask = decode_safetensors(file, "f.safetensors").tensors.at("mask");
  ASSERT_EQ(mask.dtype(), DType::b8);
  const uint8_t* bytes = static_cast<const uint8_t*>(mask.raw_data());
  EXPECT_EQ(std::vector<uint8_t>(bytes, bytes + 4), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(cast(mask, DType::f64).to_vector<double>(), (std::vector<double>{0, 1, 1, 1}));
}

// 2^61 float64 are 2^64 bytes, which wrap around to 0 in 64 bits: the size of an empty byte range.
// The checkpoint reader reads through the same decoder.
TEST(Safetensors, ShapeWhoseSizeOverflowsIsRefused) {
  TempDir dir;
  const std::string path = dir.file("huge.safetensors");
  write_file_atomically(path, with_header(R"({"model.layers.0.weight":{"dtype":"F64","shape":[2305843009213693952],)"
                                          R"("data_offsets":[0,0]}})",
                                          0));
  const std::string message = "tensor \"model.layers.0.weight\" has shape [2305843009213693952] of F64, too large";
  expect_error([&] { load_safetensors(path); }, {path, message});
  auto model = nn::make_pinn_model(nn::PinnModelOptions{});
  expect_error([&] { load_checkpoint(path, *model); }, {path, message});
}

TEST(Checkpoint, SaveLoadGivesIdenticalOutputsAndKeepsMetadata) {
  TempDir dir;
  nn::PinnModelOptions options;
  options.width = 16;
  options.depth = 3;
  options.fourier_features = 4;
  options.seed = 1;
  auto model = nn::make_pinn_model(options);
  nn::StateDict optimizer{{"adam.step", scalar(12, DType::i64)}, {"adam.m.0", ones({2, 16})}};
  const std::string path = dir.file("run.safetensors");
  save_checkpoint(path, *model, optimizer, {42, "abc123", ""});

  options.seed = 2;  // different initial weights
  auto restored = nn::make_pinn_model(options);
  Tensor x = rand({5, 2});
  EXPECT_GT(max(abs((*model)(x) - (*restored)(x))).item<double>(), 1e-4);
  nn::StateDict optimizer_back;
  CheckpointInfo info = load_checkpoint(path, *restored, &optimizer_back);
  EXPECT_EQ(max(abs((*model)(x) - (*restored)(x))).item<double>(), 0.0);
  EXPECT_EQ(info.step, 42);
  EXPECT_EQ(info.config_hash, "abc123");
  EXPECT_FALSE(info.eddy_version.empty());
  EXPECT_EQ(optimizer_back.at("adam.step").item<int64_t>(), 12);

  options.width = 8;
  auto other_shape = nn::make_pinn_model(options);
  std::string message = error_of([&] { load_checkpoint(path, *other_shape); });
  EXPECT_NE(message.find(path), std::string::npos);
  EXPECT_NE(message.find("has shape"), std::string::npos);
}

// A resume from such a file used to train until the loss was NaN, and then call it the last good
// checkpoint; save_checkpoint wrote one without a word, replacing the last good file.
TEST(Checkpoint, NonFiniteValuesAreRefusedOnSaveAndOnLoad) {
  TempDir dir;
  auto model = nn::make_pinn_model(nn::PinnModelOptions{});
  nn::StateDict optimizer{{"adam.m.0", ones({2, 3})}};
  optimizer.at("adam.m.0").fill_(std::numeric_limits<double>::infinity());
  const std::string path = dir.file("damaged.safetensors");
  expect_error([&] { save_checkpoint(path, *model, optimizer, {7, "abc123", ""}); },
               {"save_checkpoint: ", path, "tensor \"optimizer.adam.m.0\" holds NaN or infinite values; nothing was written"});
  EXPECT_FALSE(fs::exists(path));

  // Written by another program, which recorded no hashes: refused on load.
  nn::StateDict tensors{{"optimizer.adam.m.0", optimizer.at("adam.m.0")}};
  for (const auto& [name, tensor] : model->state_dict()) tensors.emplace("model." + name, tensor);
  save_safetensors(path, tensors, {{"eddy.step", "7"}});
  nn::StateDict optimizer_back;
  expect_error([&] { load_checkpoint(path, *model, &optimizer_back); },
               {path, "tensor \"optimizer.adam.m.0\" holds NaN or infinite values; the checkpoint cannot be used"});
  // Loading the model alone (for inference) does not read the optimizer's state, so its damage
  // does not stand in the way.
  EXPECT_EQ(load_checkpoint(path, *model).step, 7);

  // A run's records may hold them: the relative error against a reference that is zero is NaN.
  nn::StateDict records{{std::string(kRecordPrefix) + "relative_l2.u", ones({3})}};
  records.begin()->second.fill_(std::numeric_limits<double>::quiet_NaN());
  save_checkpoint(path, *model, records, {7, "abc123", ""});
  nn::StateDict loaded;
  EXPECT_EQ(load_checkpoint(path, *model, &loaded).step, 7);
  EXPECT_TRUE(std::isnan(loaded.at(std::string(kRecordPrefix) + "relative_l2.u").to_vector<double>()[0]));

  // The model's own tensors are checked however it is saved.
  {
    NoGradGuard no_grad;
    model->parameters().front().fill_(std::numeric_limits<double>::infinity());
  }
  expect_error([&] { save_checkpoint(path, *model, {}, {8, "abc123", ""}); }, {path, "holds NaN or infinite values"});
  EXPECT_EQ(load_checkpoint(path, *model).step, 7);  // the last good file stays
}

// Flipped bytes in a checkpoint's tensors loaded as if written so: a PINN trained on from them to
// a loss of 3.5e6. The file records a hash of its model and of its optimiser state.
TEST(Checkpoint, BytesChangedAfterWritingAreRefusedOnLoad) {
  TempDir dir;
  auto model = nn::make_pinn_model(nn::PinnModelOptions{});
  const nn::StateDict optimizer{{"adam.m.0", ones({2, 3})}};
  const std::string path = dir.file("run.safetensors");
  auto flip_byte = [&](std::streamoff from_end) {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(-from_end, std::ios::end);
    const char byte = static_cast<char>(file.get() ^ 0x10);
    file.seekp(-from_end, std::ios::end);
    file.put(byte);
  };
  save_checkpoint(path, *model, optimizer, {7, "abc123", ""});
  nn::StateDict optimizer_back;
  ASSERT_EQ(load_checkpoint(path, *model, &optimizer_back).step, 7);
  // The last bytes are the optimiser's (tensors are stored in name order: model.*, optimizer.*).
  flip_byte(1);
  expect_error([&] { load_checkpoint(path, *model, &optimizer_back); },
               {path, ": the hash of the optimizer's state (eddy.optimizer_hash) is not the one written with them"});
  EXPECT_EQ(load_checkpoint(path, *model).step, 7);  // the model alone is intact
  save_checkpoint(path, *model, optimizer, {7, "abc123", ""});
  flip_byte(2 * 3 * 8 + 1);  // the last byte before the optimiser's 48: a model tensor's
  expect_error([&] { load_checkpoint(path, *model); },
               {path, ": the hash of the model's tensors (eddy.model_hash) is not the one written with them"});
}

TEST(AtomicFile, ReplacesWholeFilesAndLeavesNoTemporaries) {
  TempDir dir;
  const std::string path = dir.file("out.bin");
  write_file_atomically(path, "first version");
  write_file_atomically(path, "second");
  EXPECT_EQ(read_file(path), "second");
  // Longer than read_file's chunk, with every byte value.
  std::string long_contents(200000, '\0');
  for (size_t i = 0; i < long_contents.size(); ++i) long_contents[i] = static_cast<char>(i * 7919 % 256);
  write_file_atomically(path, long_contents);
  EXPECT_EQ(read_file(path), long_contents);
  EXPECT_EQ(MappedFile(path).bytes(), long_contents);
  write_file_atomically(path, "");
  EXPECT_TRUE(MappedFile(path).bytes().empty());
  expect_error([&] { MappedFile absent(dir.file("absent")); }, {"cannot open", "absent"});
  expect_error([&] { MappedFile folder(dir.file("")); }, {"is a directory, not a file"});
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(path).parent_path())) entries += entry.is_regular_file();
  EXPECT_EQ(entries, 1);
  EXPECT_NE(error_of([&] { write_file_atomically(dir.file("missing/dir/file"), "x"); }).find("cannot create"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_file(dir.file("absent")); }).find("cannot open"), std::string::npos);
}

// A write through a symbolic link (to a larger disk, say) goes where it leads: the link was
// replaced by a file of its own, and the file it named kept the old data. A dangling link makes
// its target; the temporary sits beside the target, on its file system.
TEST(AtomicFile, WritesThroughSymbolicLinks) {
  TempDir dir;
  fs::create_directories(dir.file("big"));
  const std::string target = dir.file("big/data.bin"), link = dir.file("data.bin");
  write_file_atomically(target, "old");
  fs::create_symlink("big/data.bin", link);
  write_file_atomically(link, "new");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_file(target), "new");
  const std::string dangling = dir.file("later.bin");
  fs::create_symlink(dir.file("big/later.bin"), dangling);
  write_file_atomically(dangling, "made");
  EXPECT_EQ(read_file(dir.file("big/later.bin")), "made");
  EXPECT_EQ(write_destination(link), (fs::path(dir.file("")) / "big/data.bin").string());
}

// A device, pipe or socket at the path is refused and kept: writing a file there replaced it
// (output.path=/dev/null replaced it for every user of the machine).
TEST(AtomicFile, ADeviceOrPipeIsNotReplaced) {
  TempDir dir;
  const std::string pipe = dir.file("pipe"), link = dir.file("link");
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  fs::create_symlink("pipe", link);
  expect_error([&] { write_file_atomically(pipe, "x"); },
               {"cannot write " + pipe, "is a pipe", "give the path of a file"});
  expect_error([&] { refuse_special_file(link, "--output"); }, {"--output: " + link + " (a link to ", "is a pipe"});
  expect_error([&] { refuse_special_file("/dev/null", "output.path"); }, {"output.path: /dev/null is a device"});
  EXPECT_TRUE(fs::is_fifo(pipe));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.file("")), fs::directory_iterator()), 2);  // no temporary left
  // Nor is one removed as a stale result.
  expect_error([&] { remove_stale_file(pipe, "output.dir"); }, {"output.dir: " + pipe, "is a pipe"});
  EXPECT_TRUE(fs::is_fifo(pipe));
  EXPECT_FALSE(remove_stale_file(dir.file("absent"), "output.dir"));
  refuse_special_file(dir.file("absent"), "--output");
  refuse_special_file(dir.file(""), "--output");
}

// std::filesystem's error ("filesystem error: cannot create directories: Not a directory") named
// neither the command nor which part of the path was in the way.
TEST(AtomicFile, FoldersAreMadeOrTheirObstacleNamed) {
  TempDir dir;
  create_folders(dir.file("a/b/c"), "export");
  EXPECT_TRUE(fs::is_directory(dir.file("a/b/c")));
  create_folders(dir.file("a/b/c"), "export");  // already there
  write_file_atomically(dir.file("taken"), "x");
  expect_error([&] { create_folders(dir.file("taken/sub"), "export"); },
               {"export: cannot make the folder " + dir.file("taken/sub") + ": " + dir.file("taken") + " is a file"});
}

}  // namespace
}  // namespace eddy::io
