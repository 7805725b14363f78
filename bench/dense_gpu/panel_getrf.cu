// How fast cuSOLVER factors the GPU tier's panel (the transposed stripe: m x h, m >> h) with each
// of its getrf entry points: the legacy cusolverDnDgetrf and the 64-bit cusolverDnXgetrf with each
// algorithm cusolverDnSetAdvOptions offers. Standalone, alone on the device: the panel's time is
// what bounds the RAM tier (docs/performance.md), so the fastest entry point is the one to use.
//
//   build/release/bench/dense_gpu/bench_panel_getrf [h=1024] [m values: 57344,28672,8192]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <cusolverDn.h>

#include "bench/common/cuda_timing.h"
#include "bench_device.cuh"
#include "cuda_check.cuh"

int main(int argc, char** argv) {
  const int64_t h = argc > 1 ? std::atoll(argv[1]) : 1024;
  std::vector<int64_t> ms = {57344, 28672, 8192};
  if (argc > 2) {
    ms.clear();
    for (std::string list = argv[2]; !list.empty();) {
      const size_t comma = list.find(',');
      ms.push_back(std::atoll(list.substr(0, comma).c_str()));
      list = comma == std::string::npos ? "" : list.substr(comma + 1);
    }
  }
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cusolverDnHandle_t solver;
  CK(cusolverDnCreate(&solver));
  CK(cusolverDnSetStream(solver, s));
  std::printf("getrf of an m x %lld panel, best of 5 (ms; TFLOP/s at m h^2 - h^3 / 3)\n",
              static_cast<long long>(h));
  for (int64_t m : ms) {
    const size_t count = static_cast<size_t>(m * h);
    double* a = nullptr;
    int* info = nullptr;
    int* ipiv32 = nullptr;
    int64_t* ipiv64 = nullptr;
    CK(cudaMalloc(&a, sizeof(double) * count));
    CK(cudaMalloc(&info, sizeof(int)));
    CK(cudaMalloc(&ipiv32, sizeof(int) * h));
    CK(cudaMalloc(&ipiv64, sizeof(int64_t) * h));
    const double flops = double(m) * h * h - double(h) * h * h / 3;
    int lwork = 0;
    CK(cusolverDnDgetrf_bufferSize(solver, int(m), int(h), a, int(m), &lwork));
    double* work = nullptr;
    CK(cudaMalloc(&work, sizeof(double) * lwork));
    // getrf factors in place: a fresh panel before each run.
    const auto refill = [&] { fill<<<1024, 256, 0, s>>>(a, count, 11u); };
    const double legacy = stripesolve::bench::best_cuda_ms(s, 5, refill, [&] {
      CK(cusolverDnDgetrf(solver, int(m), int(h), a, int(m), work, ipiv32, info));
    });
    std::printf("  m %6lld  legacy Dgetrf    %7.2f ms  %5.2f TFLOP/s\n", static_cast<long long>(m),
                legacy, flops / legacy / 1e9);
    for (cusolverAlgMode_t alg : {CUSOLVER_ALG_0, CUSOLVER_ALG_1}) {
      cusolverDnParams_t params;
      CK(cusolverDnCreateParams(&params));
      if (cusolverDnSetAdvOptions(params, CUSOLVERDN_GETRF, alg) != CUSOLVER_STATUS_SUCCESS) {
        std::printf("  m %6lld  Xgetrf ALG_%d     not offered\n", static_cast<long long>(m),
                    int(alg));
        continue;
      }
      size_t device_bytes = 0, host_bytes = 0;
      CK(cusolverDnXgetrf_bufferSize(solver, params, m, h, CUDA_R_64F, a, m, CUDA_R_64F,
                                     &device_bytes, &host_bytes));
      void* dwork = nullptr;
      CK(cudaMalloc(&dwork, device_bytes + 8));
      std::vector<char> hwork(host_bytes + 8);
      const double x = stripesolve::bench::best_cuda_ms(s, 5, refill, [&] {
        CK(cusolverDnXgetrf(solver, params, m, h, CUDA_R_64F, a, m, ipiv64, CUDA_R_64F, dwork,
                            device_bytes, hwork.data(), host_bytes, info));
      });
      std::printf("  m %6lld  Xgetrf ALG_%d     %7.2f ms  %5.2f TFLOP/s\n",
                  static_cast<long long>(m), int(alg), x, flops / x / 1e9);
      CK(cudaFree(dwork));
      CK(cusolverDnDestroyParams(params));
    }
    CK(cudaFree(work));
    CK(cudaFree(ipiv64));
    CK(cudaFree(ipiv32));
    CK(cudaFree(info));
    CK(cudaFree(a));
  }
  return 0;
}
