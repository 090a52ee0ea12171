#include "eddy/core/tracing.h"

#include <atomic>

namespace eddy {
namespace {
thread_local TraceRecorder* current_recorder = nullptr;
std::atomic<uint64_t> captures_made{0};
}  // namespace

TraceRecorder::TraceRecorder() : capture_id_(++captures_made) {}

TraceRecorder* active_trace_recorder() { return current_recorder; }

uint64_t active_capture_id() { return current_recorder ? current_recorder->capture_id() : 0; }

TraceRecorderScope::TraceRecorderScope(TraceRecorder* recorder) : previous_(current_recorder) {
  current_recorder = recorder;
}

TraceRecorderScope::~TraceRecorderScope() { current_recorder = previous_; }

}  // namespace eddy
