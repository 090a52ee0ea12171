#pragma once
// A small synthetic corpus for the language-model tests: short, regular sentences, one document
// per "%"-separated block, which a model of a few thousand weights learns in a hundred steps.

#include <filesystem>
#include <fstream>

namespace eddy {

// Writes 120 documents; `part` 0 and 1 give two files with different documents.
inline void write_small_corpus(const std::filesystem::path& path, int part) {
  const char* animals[] = {"cat", "dog", "bird", "fox"};
  const char* verbs[] = {"sees", "likes", "chases"};
  const char* things[] = {"the ball", "a red box", "the old tree", "some water"};
  std::ofstream out(path);
  for (int i = 0; i < 120; ++i) {
    const int k = i + 120 * part;
    out << "The " << animals[k % 4] << " " << verbs[k % 3] << " " << things[(k / 3) % 4] << ".\n";
    out << "Then the " << animals[(k + 1) % 4] << " sleeps.\n%\n";
  }
}

}  // namespace eddy
