#pragma once
// The memory a process can use, for refusing a size that cannot fit before allocating it: a
// config that asks for more than the machine has gets an error naming the key and both sizes,
// instead of a bare std::bad_alloc (or the kernel's OOM killer) after minutes of work.

#include <cstdint>
#include <string>

namespace eddy {

struct UsableMemory {
  int64_t bytes = 0;        // 0 when the system cannot say
  bool address_limit = false;  // bytes is the address-space limit (ulimit -v), below physical memory
};

// Physical memory (sysconf's pages times the page size), or the process's address-space limit
// where that is lower.
UsableMemory usable_memory();

// A byte count for messages, in binary units with three significant digits: "512 B", "1.50 KiB",
// "24.0 GiB", "7.28 TiB".
std::string memory_text(double bytes);

// "; this machine has 24.0 GiB" (or "; this process may use 2.00 GiB (ulimit -v)"), or nothing
// when the memory is unknown: the end of an error that refuses a size.
std::string usable_memory_note();

}  // namespace eddy
