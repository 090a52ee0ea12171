#include "eddy/io/distributed_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>

#include "eddy/autodiff/tape.h"
#include "eddy/dist/dtensor.h"
#include "eddy/io/atomic_file.h"
#include "eddy/io/safetensors.h"
#include "eddy/ops/ops.h"

namespace eddy::io {
namespace {

namespace fs = std::filesystem;

std::string rank_file(const std::string& directory, int rank, int ranks) {
  return (fs::path(directory) / cat("rank-", rank, "-of-", ranks, ".safetensors")).string();
}

std::string join(const std::vector<int64_t>& values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ',';
    text += std::to_string(values[i]);
  }
  return text;
}

std::vector<int64_t> split_numbers(const std::string& text, const std::string& source) {
  std::vector<int64_t> values;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');) {
    try {
      values.push_back(std::stoll(item));
    } catch (const std::exception&) {
      throw Error(cat(source, ": '", text, "' is not a list of integers"));
    }
  }
  return values;
}

// A saved part's layout, as its metadata entry "layout.<key>" spells it:
// "global=4,8;mesh=2,2;coordinates=0,1;placements=R,S0,P".
struct SavedLayout {
  Shape global;
  Shape mesh{1};
  std::vector<int64_t> coordinates{0};
  std::vector<Placement> placements{Placement::replicate()};
};

std::string encode(const SavedLayout& layout) {
  std::string placements;
  for (const Placement& p : layout.placements) {
    if (!placements.empty()) placements += ',';
    placements += p.is_shard() ? cat("S", p.axis) : p.is_partial() ? "P" : "R";
  }
  return cat("global=", join(layout.global), ";mesh=", join(layout.mesh), ";coordinates=", join(layout.coordinates),
             ";placements=", placements);
}

SavedLayout decode(const std::string& text, const std::string& source) {
  SavedLayout layout;
  std::stringstream stream(text);
  for (std::string field; std::getline(stream, field, ';');) {
    const size_t equals = field.find('=');
    const std::string name = field.substr(0, equals), value = equals == std::string::npos ? "" : field.substr(equals + 1);
    if (name == "global") {
      layout.global = split_numbers(value, source);
    } else if (name == "mesh") {
      layout.mesh = split_numbers(value, source);
    } else if (name == "coordinates") {
      layout.coordinates = split_numbers(value, source);
    } else if (name == "placements") {
      layout.placements.clear();
      std::stringstream items(value);
      for (std::string item; std::getline(items, item, ',');) {
        if (item == "R") layout.placements.push_back(Placement::replicate());
        else if (item == "P") layout.placements.push_back(Placement::partial_sum());
        else if (item.size() > 1 && item[0] == 'S') layout.placements.push_back(Placement::shard(split_numbers(item.substr(1), source)[0]));
        else throw Error(cat(source, ": unknown placement '", item, "' in '", text, "'"));
      }
    } else {
      throw Error(cat(source, ": unknown layout field '", name, "' in '", text, "'"));
    }
  }
  EDDY_CHECK(layout.mesh.size() == layout.coordinates.size() && layout.mesh.size() == layout.placements.size(), source,
             ": layout '", text, "' has a mesh, coordinates and placements of different lengths");
  return layout;
}

// Where a saved part lies in the whole: [start, stop) along each axis; empty when the part
// adds nothing (a replicated copy other than coordinate 0's).
std::optional<std::pair<Shape, Shape>> region(const SavedLayout& layout, const Shape& part_shape) {
  Shape start(layout.global.size(), 0), stop = layout.global;
  for (size_t m = 0; m < layout.mesh.size(); ++m) {
    const Placement& p = layout.placements[m];
    if (p.kind == Placement::Kind::replicate && layout.coordinates[m] != 0) return std::nullopt;
    if (!p.is_shard()) continue;
    const auto axis = static_cast<size_t>(p.axis);
    start[axis] = shard_range(layout.global[axis], layout.mesh[m], layout.coordinates[m]).first;
    stop[axis] = start[axis] + part_shape[axis];
  }
  return std::pair{start, stop};
}

}  // namespace

void save_distributed_state(const std::string& directory, const nn::StateDict& state) {
  dist::Communicator& world = dist::default_communicator();
  nn::StateDict parts;
  std::map<std::string, std::string> metadata{{"ranks", std::to_string(world.size())}};
  for (const auto& [key, tensor] : state) {
    SavedLayout layout;
    layout.global = tensor.shape();
    if (const Distribution* distribution = distribution_of(tensor)) {
      const dist::ProcessMesh& mesh = dist::mesh_of(tensor);
      layout.mesh = mesh.shape();
      layout.coordinates.clear();
      for (int64_t m = 0; m < mesh.ndim(); ++m) layout.coordinates.push_back(mesh.coordinate(m));
      layout.placements = distribution->placements;
      for (const Placement& p : layout.placements) {
        EDDY_CHECK(p.kind != Placement::Kind::partial_max, "save_distributed_state: \"", key, "\" is placed ",
                   to_string(layout.placements), "; dist::reshard a partial max before saving it");
      }
      parts[key] = distribution->local;
    } else if (world.rank() == 0) {
      parts[key] = tensor;
    } else {
      continue;
    }
    metadata["layout." + key] = encode(layout);
  }
  if (world.rank() == 0) {
    fs::create_directories(directory);
    // An earlier checkpoint here, possibly from another number of ranks, stops counting now.
    fs::remove(fs::path(directory) / "complete");
    for (const auto& entry : fs::directory_iterator(directory)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("rank-", 0) == 0 && name.find("-of-") != std::string::npos) fs::remove(entry.path());
    }
  }
  world.barrier();
  save_safetensors(rank_file(directory, world.rank(), world.size()), parts, metadata);
  world.barrier();
  if (world.rank() == 0) write_file_atomically((fs::path(directory) / "complete").string(), std::to_string(world.size()) + "\n");
  world.barrier();
}

void load_distributed_state(const std::string& directory, const nn::StateDict& targets) {
  const std::string marker = (fs::path(directory) / "complete").string();
  EDDY_CHECK(fs::exists(marker), "load_distributed_state: ", directory, " holds no complete checkpoint (no file "
             "'complete': a job that stopped while saving, or not a distributed checkpoint folder)");
  const std::string count = read_file(marker);
  int ranks = 0;
  try {
    ranks = std::stoi(count);
  } catch (const std::exception&) {
  }
  EDDY_CHECK(ranks >= 1, marker, ": expected the number of ranks that saved, got '", count, "'");

  std::map<std::string, Tensor> wholes;
  std::map<std::string, std::string> found_in;
  for (int rank = 0; rank < ranks; ++rank) {
    const std::string path = rank_file(directory, rank, ranks);
    const SafetensorsContents contents = load_safetensors(path);
    for (const auto& [key, part] : contents.tensors) {
      const auto entry = contents.metadata.find("layout." + key);
      EDDY_CHECK(entry != contents.metadata.end(), path, ": \"", key, "\" has no layout entry");
      const SavedLayout layout = decode(entry->second, path);
      EDDY_CHECK(targets.count(key), path, ": \"", key, "\" is in the checkpoint but not in the state it is loaded "
                 "into (another model or optimiser?)");
      const Tensor& target = targets.at(key);
      EDDY_CHECK(layout.global == target.shape() && part.dtype() == target.dtype(), path, ": \"", key, "\" was saved ",
                 layout.global, " ", part.dtype(), " but is loaded into ", target.shape(), " ", target.dtype());
      const auto placed = region(layout, part.shape());
      if (!placed) continue;
      Tensor& whole = wholes[key];
      if (!whole.defined()) whole = zeros(layout.global, part.dtype());
      Tensor view = whole;
      for (size_t axis = 0; axis < layout.global.size(); ++axis) {
        view = slice(view, static_cast<int64_t>(axis), placed->first[axis], placed->second[axis]);
      }
      const bool partial = std::any_of(layout.placements.begin(), layout.placements.end(),
                                       [](const Placement& p) { return p.is_partial(); });
      view.copy_(partial ? view + part : part);
      found_in[key] = path;
    }
  }
  for (const auto& [key, target] : targets) {
    EDDY_CHECK(wholes.count(key), "load_distributed_state: \"", key, "\" is not in the checkpoint in ", directory);
    NoGradGuard no_grad;
    if (const Distribution* distribution = distribution_of(target)) {
      Tensor local = distribution->local;
      local.copy_(dist::to_local(dist::shard_like(wholes.at(key), target)));
    } else {
      Tensor whole = target;
      whole.copy_(wholes.at(key));
    }
  }
}

}  // namespace eddy::io
