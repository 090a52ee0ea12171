// A small command-line bridge for the Python interop tests:
//   safetensors_tool write PATH   writes a fixed set of tensors (values defined below, and
//                                 mirrored in tests/python/test_safetensors_interop.py);
//   safetensors_tool dump PATH    loads a file with eddy and prints it as JSON:
//                                 {"metadata": {...}, "tensors": {name: {dtype, shape, values}}}.

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "eddy/eddy.h"
#include "eddy/io/safetensors.h"

using namespace eddy;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: safetensors_tool write|dump PATH\n";
    return 2;
  }
  const std::string command = argv[1], path = argv[2];
  try {
    if (command == "write") {
      nn::StateDict tensors{
          {"layer.weight", reshape(arange(0, 6, 1, DType::f32) * 0.5 - 1.0, {2, 3})},
          {"layer.bias", tensor<double>({0.125, -3.5})},
          {"step", tensor<int64_t>({1234567890123})},
          {"ids", tensor<int32_t>({-2, 0, 7}, {3, 1})},
          {"mask", tensor<bool>({true, false})},
          {"spectrum", complex(tensor<double>({1.0, -2.0}), tensor<double>({0.5, 3.0}))},
      };
      io::save_safetensors(path, tensors, {{"eddy.step", "17"}});
      return 0;
    }
    if (command == "dump") {
      io::SafetensorsContents contents = io::load_safetensors(path);
      nlohmann::json out;
      out["metadata"] = contents.metadata;
      out["tensors"] = nlohmann::json::object();
      for (const auto& [name, t] : contents.tensors) {
        nlohmann::json entry{{"dtype", dtype_name(t.dtype())}, {"shape", t.shape()}};
        if (is_complex(t.dtype())) {
          nlohmann::json values = nlohmann::json::array();
          for (c128 v : t.to_vector<c128>()) values.push_back({v.real(), v.imag()});
          entry["values"] = values;
        } else {
          entry["values"] = t.to_vector<double>();
        }
        out["tensors"][name] = entry;
      }
      std::cout << out.dump() << "\n";
      return 0;
    }
    std::cerr << "unknown command " << command << "\n";
    return 2;
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
