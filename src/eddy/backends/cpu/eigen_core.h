// Eigen's Core, for the CPU kernels and the benchmarks that use it.
//
// GCC 12's AVX-512 intrinsics pass a deliberately undefined vector (_mm512_undefined_ps) as the
// merge operand of unmasked operations, and wherever Eigen's packet code is inlined GCC warns
// that it "is" or "may be used uninitialized": about 300 false warnings per build (GCC bug
// 105593, fixed in GCC 13). They are silenced for the headers included here only, so this must
// be the first include of <immintrin.h> in its translation unit.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <Eigen/Core>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
