#pragma once
// The hooks through which a capture (compiler/trace.h) hears of what happens outside dispatch.
// Ops reach the capture's graph recorder through the interpreter stack (ops/primitive.h); the
// few ways a program can step outside a graph (reading values on the host, writing in place,
// drawing random numbers from a generator) report themselves here, so capture can refuse them
// with a clear message instead of silently baking them into the graph.

#include <cstdint>
#include <string_view>

namespace eddy {

class Tensor;
namespace dist {
class Communicator;
}

class TraceRecorder {
 public:
  TraceRecorder();
  virtual ~TraceRecorder() = default;
  // Unique over the process's life. What outlives a capture names it by this rather than by its
  // address, which the next capture's recorder (made in the same stack frame) usually reuses.
  uint64_t capture_id() const { return capture_id_; }
  // The program reads `tensor`'s elements on the host (item, to_vector).
  virtual void host_read(const Tensor& tensor, std::string_view operation) = 0;
  // Whether host_read would accept `tensor`: its values do not depend on the captured function's
  // inputs or parameters (a constant), so code may check them on the host while capturing.
  virtual bool readable_on_host(const Tensor& tensor) = 0;
  // The program is right only while `tensor` keeps its values, which it does not read (a solver's
  // coefficients, computed from a viscosity before the capture): a later call whose `tensor` has
  // changed captures again, and the checks that run while capturing see the change.
  virtual void guard_unchanged(const Tensor& tensor) = 0;
  // The program overwrites `tensor`'s elements in place (copy_, fill_).
  virtual void inplace_write(const Tensor& tensor, std::string_view operation) = 0;
  virtual void random_draw(std::string_view operation) = 0;
  // Every rank of `communicator` holds `local` alike: the distributed interpreter says so of each
  // local part it uses or makes placed Replicate on that mesh axis. A rank's graph alone cannot
  // tell, and the compiler drops collectives over such values (compiler/passes.h).
  virtual void replicated_over(const Tensor& local, dist::Communicator& communicator) = 0;

 private:
  uint64_t capture_id_;
};

// The calling thread's recorder, or null when nothing is being captured.
TraceRecorder* active_trace_recorder();
// The active recorder's capture_id, 0 when nothing is being captured.
uint64_t active_capture_id();

// Installs a recorder (or, with null, pauses recording) for a scope, restoring the previous one
// on exit. The kernel evaluator pauses recording while a primitive evaluates, so that ops a
// kernel runs internally stay inside that primitive's node.
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
