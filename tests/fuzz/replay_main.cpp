// Runs one harness of tests/fuzz/ once over every file of the folders (or files) named on the
// command line: the seed corpora and regression inputs, replayed by ctest in the gcc builds
// without libFuzzer. An input that makes the harness crash, report or throw fails the test.
//
//   fuzz_replay NAME PATH...
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "harnesses.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const Harness* harness = nullptr;
  for (const Harness& candidate : kHarnesses) {
    if (argc > 1 && std::strcmp(argv[1], candidate.name) == 0) harness = &candidate;
  }
  if (!harness || argc < 3) {
    std::fprintf(stderr, "usage: fuzz_replay NAME PATH...; NAME is one of:");
    for (const Harness& candidate : kHarnesses) std::fprintf(stderr, " %s", candidate.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  if (harness->initialize) harness->initialize(&argc, &argv);
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      for (const auto& entry : fs::recursive_directory_iterator(argv[i])) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else {
      files.emplace_back(argv[i]);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "fuzz_replay: no inputs in the paths given\n");
    return 1;
  }
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "fuzz_replay: cannot read %s\n", file.c_str());
      return 1;
    }
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    std::fprintf(stderr, "fuzz_replay %s: %s (%zu bytes)\n", harness->name, file.c_str(), bytes.size());
    harness->run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("fuzz_replay %s: %zu inputs ran\n", harness->name, files.size());
  return 0;
}
