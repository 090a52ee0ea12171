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

// Keeps memory that the C library's malloc frees at the top of its heap, instead of returning it
// to the kernel past 128 KiB, and leaves blocks below 32 MiB on the heap. Called once at start by
// the `eddy` command and the Python module; a C++ program may call it too. Does nothing beyond
// glibc.
//
// Why: a training step allocates and frees the same short-lived buffers (pointer lists, sums,
// graph bookkeeping) every step. With glibc's defaults the heap shrank below them at each step's
// end and grew again in the next, and the kernel cleared the pages it faulted back in: 60 page
// faults a step in `eddy solve` of the Burgers problem, 5% of its CPU time at one thread
// (clear_page and malloc's own page touches in `perf`). Tensors do not need this (their blocks
// are cached by cpu_allocator()); up to 128 MiB of freed heap stays with the process.
void keep_freed_heap_memory();

}  // namespace eddy
