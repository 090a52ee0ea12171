#pragma once
// A graph on disk, for inference without the code that traced it: a folder holding
//   graph.json           format and version, every value (shape, dtype, source), the inputs and
//                        outputs, and every node (primitive name, every Attrs field, input ids,
//                        output id);
//   weights.safetensors  every captured tensor by value, named "parameter.<id>" (a tensor the
//                        traced function read from outside, such as model weights) or
//                        "constant.<id>" (one it created).
// Primitives are stored by name and found again in eddy::all_primitives() when loading.
//
// Each file is written atomically; both carry one export id, so a graph.json paired with the
// weights of another export (a write interrupted between the two) is refused, not run.

#include <string>

#include "eddy/compiler/graph.h"

namespace eddy::compiler {

inline constexpr int kGraphFormatVersion = 1;

// Every Attrs field but the payload, as the text graph.json stores: equal texts, Attrs equal but
// for their payloads.
std::string attrs_text(const Attrs& attrs);

// Creates `dir` when needed and writes both files; returns the export's id, which both record
// (a file written beside them, such as a predictor's meta.json, records it too). Throws
// eddy::Error for a node whose Attrs carries a payload (checkpoint segments, collectives): it
// refers to live code or objects that no file can hold.
std::string save_graph(const Graph& graph, const std::string& dir);

// Reads both files back, and sets `export_id` to the id they record when given. Throws
// eddy::Error, naming the file and the key, on an unknown primitive, another format version, a
// missing or extra tensor, a tensor whose shape or dtype differs from its value's, or a node whose
// value's shape or dtype differs from the one its primitive infers from its inputs.
Graph load_graph(const std::string& dir, std::string* export_id = nullptr);

}  // namespace eddy::compiler
