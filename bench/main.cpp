// eddy_bench: Google Benchmark runs of GEMM, elementwise ops, a PINN step, the PINN Laplacian,
// FFTs and an FNO layer, then markdown tables from interleaved timings: eddy GEMM against
// OpenBLAS, elementwise ops against Eigen, the PINN step per thread count, the Laplacian by Taylor
// mode against nested reverse mode, eddy FFTs against FFTW and the parts of the FNO layer.
// `--no_gemm_table`, `--no_elementwise_table`, `--no_pinn_table`, `--no_laplacian_table`,
// `--no_fft_table` and `--no_fno_table` skip those tables.

#include <cstring>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_util.h"

int main(int argc, char** argv) {
  bool gemm_table = true, elementwise_table = true, pinn_table = true, laplacian_table = true, fft_table = true,
       fno_table = true;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no_gemm_table") == 0) {
      gemm_table = false;
    } else if (std::strcmp(argv[i], "--no_elementwise_table") == 0) {
      elementwise_table = false;
    } else if (std::strcmp(argv[i], "--no_pinn_table") == 0) {
      pinn_table = false;
    } else if (std::strcmp(argv[i], "--no_laplacian_table") == 0) {
      laplacian_table = false;
    } else if (std::strcmp(argv[i], "--no_fft_table") == 0) {
      fft_table = false;
    } else if (std::strcmp(argv[i], "--no_fno_table") == 0) {
      fno_table = false;
    } else {
      args.push_back(argv[i]);
    }
  }
  int benchmark_argc = static_cast<int>(args.size());
  benchmark::Initialize(&benchmark_argc, args.data());
  if (benchmark::ReportUnrecognizedArguments(benchmark_argc, args.data())) return 1;

  eddy_bench::register_gemm_benchmarks();
  eddy_bench::register_elementwise_benchmarks();
  eddy_bench::register_mlp_benchmarks();
  eddy_bench::register_laplacian_benchmarks();
  eddy_bench::register_fft_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  if (gemm_table) eddy_bench::print_gemm_table();
  if (elementwise_table) eddy_bench::print_elementwise_table();
  if (pinn_table) eddy_bench::print_pinn_table();
  if (laplacian_table) eddy_bench::print_laplacian_table();
  if (fft_table) eddy_bench::print_fft_table();
  if (fno_table) eddy_bench::print_fno_table();
  return 0;
}
