#include "eddy/core/tracing.h"

namespace eddy {
namespace {
thread_local TraceRecorder* current_recorder = nullptr;
}  // namespace

TraceRecorder* active_trace_recorder() { return current_recorder; }

TraceRecorderScope::TraceRecorderScope(TraceRecorder* recorder) : previous_(current_recorder) {
  current_recorder = recorder;
}

TraceRecorderScope::~TraceRecorderScope() { current_recorder = previous_; }

}  // namespace eddy
