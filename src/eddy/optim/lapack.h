#pragma once
// The LAPACK routines the optimisers' helpers call, from the OpenBLAS that eddy links: Debian's
// openblas-openmp package ships LAPACK inside the library but no header, and LAPACKE is not
// installed, so the Fortran entry points are declared here. The trailing size_t lengths are the
// hidden arguments gfortran passes for CHARACTER parameters. Internal to optim/.

#include <cstddef>

#include "eddy/backends/backend.h"

extern "C" {
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t jobz_length, size_t uplo_length);
void dgelsd_(const int* m, const int* n, const int* nrhs, double* a, const int* lda, double* b, const int* ldb,
             double* s, const double* rcond, int* rank, double* work, const int* lwork, int* iwork, int* info);
}

namespace eddy::optim {

// Runs a LAPACK call on one thread. On OpenBLAS's threads its bits could depend on the thread
// count, which the training loop's tuner varies (backends/backend.h), and a resumed run would then
// part from an uninterrupted one; the matrices these helpers see are small.
template <typename Call>
void on_one_thread(Call call) {
  const int threads = num_threads();
  set_num_threads(1);
  call();
  set_num_threads(threads);
}

}  // namespace eddy::optim
