// The dense GPU benchmark's peers (bench/dense_gpu/dense_gpu_bench.cc runs them beside the
// engine): cuSOLVER getrf + getrs with A on the device, cuBLAS DGEMM at a given shape, and the
// CUDA plumbing they share. Errors throw CudaError, so that one failing peer leaves the others'
// results in the JSON.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <nlohmann/json.hpp>

namespace dense_gpu_bench {

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CudaError(std::string(what) + ": " + cudaGetErrorString(e));
}
inline void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw CudaError(std::string(what) + ": " + cublasGetStatusString(s));
  }
}
inline void check(cusolverStatus_t s, const char* what) {
  if (s != CUSOLVER_STATUS_SUCCESS) {
    throw CudaError(std::string(what) + ": cusolver status " + std::to_string(int(s)));
  }
}
#define CK(call) check((call), #call)

template <typename T>
struct DeviceArray {
  T* p = nullptr;
  size_t count = 0;
  DeviceArray() = default;
  explicit DeviceArray(size_t n) : count(n) {
    CK(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(1, n) * sizeof(T)));
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() {
    if (p != nullptr) cudaFree(p);
  }
  size_t bytes() const { return count * sizeof(T); }
};

struct Cuda {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cusolverDnHandle_t solver = nullptr;
  cusolverDnParams_t params = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr, e2 = nullptr;

  Cuda() {
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(cublasCreate(&blas));
    CK(cublasSetStream(blas, stream));
    CK(cusolverDnCreate(&solver));
    CK(cusolverDnSetStream(solver, stream));
    CK(cusolverDnCreateParams(&params));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventCreate(&e2));
  }
  Cuda(const Cuda&) = delete;
  Cuda& operator=(const Cuda&) = delete;
  ~Cuda() {
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaEventDestroy(e2);
    cusolverDnDestroyParams(params);
    cusolverDnDestroy(solver);
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
  }
  void sync() { CK(cudaStreamSynchronize(stream)); }
  double elapsed(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1e-3;
  }
};

uint64_t device_free_bytes();
std::string gib(double bytes);
// Fills `count` device doubles with uniform values on [-0.5, 0.5] (a 32 MiB host pattern copied
// repeatedly): DGEMM on zeros would run at a higher clock than on real data.
void fill_device_random(double* d, size_t count, uint64_t seed);
nlohmann::json device_json();

double factor_flops(int64_t n);               // 2/3 n^3
double solve_flops(int64_t n, int64_t nrhs);  // factor_flops + 2 n^2 nrhs
// ||A||_inf of the column-major n x n matrix, rows split over the host's threads.
double norm_inf(const std::vector<double>& a, int64_t n);
// cuSOLVER getrf + getrs with A on the device (copied before each rep, untimed). Adds the
// residual of the engine's solution (engine_x, if not empty) computed by the same routine.
nlohmann::json run_cusolver(Cuda& cu, const std::vector<double>& a, int64_t n,
                            const std::vector<double>& b, int64_t nrhs, int reps,
                            const std::string& api, double norm_a,
                            const std::vector<double>& engine_x);
// cuBLAS DGEMM C(m x nc) -= A(m x k) B(k x nc), best of reps after one warm-up; a CUDA error
// becomes the result's "error".
nlohmann::json dgemm_or_error(Cuda* cu, const std::string& role, int64_t m, int64_t nc, int64_t k,
                              int reps);

}  // namespace dense_gpu_bench
