#pragma once
// The hook through which a function is captured into a graph while it runs eagerly
// (compiler/trace.h). Dispatch reports every primitive it evaluates. The few ways a program can
// step outside a graph (reading values on the host, writing in place, drawing random numbers)
// report themselves too, so capture can refuse them with a clear message instead of silently
// baking them into the graph.

#include <span>
#include <string_view>

namespace eddy {

struct Primitive;
struct Attrs;
class Tensor;

class TraceRecorder {
 public:
  virtual ~TraceRecorder() = default;
  virtual void record(const Primitive& primitive, std::span<const Tensor> inputs, const Attrs& attrs,
                      const Tensor& output) = 0;
  // The program reads `tensor`'s elements on the host (item, to_vector).
  virtual void host_read(const Tensor& tensor, std::string_view operation) = 0;
  // The program overwrites `tensor`'s elements in place (copy_, fill_).
  virtual void inplace_write(const Tensor& tensor, std::string_view operation) = 0;
  virtual void random_draw(std::string_view operation) = 0;
};

// The calling thread's recorder, or null when nothing is being captured.
TraceRecorder* active_trace_recorder();

// Installs a recorder (or, with null, pauses recording) for a scope, restoring the previous one
// on exit. Dispatch pauses recording while a primitive evaluates, so that ops a kernel runs
// internally stay inside that primitive's node.
class TraceRecorderScope {
 public:
  explicit TraceRecorderScope(TraceRecorder* recorder);
  ~TraceRecorderScope();
  TraceRecorderScope(const TraceRecorderScope&) = delete;
  TraceRecorderScope& operator=(const TraceRecorderScope&) = delete;

 private:
  TraceRecorder* previous_;
};

}  // namespace eddy
