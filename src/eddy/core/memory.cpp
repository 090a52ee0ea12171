#include "eddy/core/memory.h"

#include <sys/resource.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <array>
#include <cstdio>

namespace eddy {

UsableMemory usable_memory() {
  UsableMemory usable;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) usable.bytes = static_cast<int64_t>(pages) * static_cast<int64_t>(page_size);
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const auto address_space = static_cast<int64_t>(limit.rlim_cur);
    if (usable.bytes == 0 || address_space < usable.bytes) usable = {address_space, true};
  }
  return usable;
}

std::string memory_text(double bytes) {
  static constexpr std::array<const char*, 7> units = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  size_t unit = 0;
  while (bytes >= 1024 && unit + 1 < units.size()) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0) {
    std::snprintf(text, sizeof(text), "%.0f B", bytes);
  } else {
    std::snprintf(text, sizeof(text), bytes < 10 ? "%.2f %s" : bytes < 100 ? "%.1f %s" : "%.0f %s", bytes, units[unit]);
  }
  return text;
}

std::string usable_memory_note() {
  const UsableMemory usable = usable_memory();
  if (usable.bytes <= 0) return "";
  const std::string size = memory_text(static_cast<double>(usable.bytes));
  return usable.address_limit ? "; this process may use " + size + " (ulimit -v)" : "; this machine has " + size;
}

void keep_freed_heap_memory() {
#if defined(__GLIBC__)
  // Setting either value ends glibc's own adjustment of the mmap threshold (which rises to 32 MiB
  // as mapped blocks are freed), so both are set: the threshold where that adjustment ends.
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 128 << 20);
#endif
}

}  // namespace eddy
