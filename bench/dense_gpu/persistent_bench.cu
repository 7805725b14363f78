// The panel in one launch on a few SMs (backend/cuda/persistent_panel.h) against the engine's panel
// today (the stripe transposed, cuSOLVER getrf, transposed back: backend/cuda/lane_factor.cc),
// alone and beside two streams of J-update GEMMs (gm x gn x gk, cuBLAS dgemm, low priority; the
// panel at high priority). Checks first that the persistent panel's pivots and factors match
// getrf's.
//
//   build/release/bench/dense_gpu/bench_persistent_panel [m=57344] [h=1024] [blocks: 28,32,48]
//     [gm=1024] [gn=49152] [gk=8192] [ld=h: the row stride of the panel held by rows]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include "backend/cuda/persistent_panel.h"
#include "bench_device.cuh"
#include "cuda_check.cuh"

namespace {

using stripesolve::backend::cuda::PersistentPanel;

struct Bench {
  int m, h, gm, gn, gk;
  int ld;  // of the panel held by rows (h, or wider to move its rows off power-of-two strides)
  double *pristine, *work, *rows, *solver_work;  // work: m x h by columns; rows: by rows
  int *ipiv, *info;
  void* scratch;
  double *ga, *gb, *gc[2];
  cublasHandle_t blas, gemm_blas[2];
  cusolverDnHandle_t solver;
  cudaStream_t panel, gemm[2];
};

float elapsed(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

// The engine's panel: transpose the stripe (held by rows), getrf, transpose back.
void getrf_path(Bench& b) {
  const double one = 1.0, zero = 0.0;
  CK(cublasDgeam(b.blas, CUBLAS_OP_T, CUBLAS_OP_N, b.m, b.h, &one, b.rows, b.ld, &zero, b.work, b.m,
                 b.work, b.m));
  CK(cusolverDnDgetrf(b.solver, b.m, b.h, b.work, b.m, b.solver_work, b.ipiv, b.info));
  CK(cublasDgeam(b.blas, CUBLAS_OP_T, CUBLAS_OP_N, b.h, b.m, &one, b.work, b.m, &zero, b.rows, b.ld,
                 b.rows, b.ld));
}

void persistent(Bench& b, int blocks) {
  CK(PersistentPanel::factor(b.rows, b.ld, b.m, b.h, b.ipiv, b.info, blocks, b.scratch, b.panel));
}

// The panel held by rows, fresh from the pristine one (by columns).
void reset(Bench& b) {
  const double one = 1.0, zero = 0.0;
  CK(cublasDgeam(b.blas, CUBLAS_OP_T, CUBLAS_OP_N, b.h, b.m, &one, b.pristine, b.m, &zero, b.rows,
                 b.ld, b.rows, b.ld));
}

// `panels` panels on the panel stream while (gemms > 0) two streams run `gemms` GEMMs each;
// returns the panels' mean time (ms) and prints it with `reference` / mean where reference > 0
// (the getrf path's mean in the same conditions: > 1 means quicker than it).
float run(Bench& b, const std::function<void()>& panel, int panels, int gemms, const char* label,
          float reference = 0) {
  cudaEvent_t g0[2], g1[2], p0, p1;
  for (int i = 0; i < 2; ++i) {
    CK(cudaEventCreate(&g0[i]));
    CK(cudaEventCreate(&g1[i]));
  }
  CK(cudaEventCreate(&p0));
  CK(cudaEventCreate(&p1));
  CK(cudaDeviceSynchronize());
  const double one = 1.0, minus = -1.0;
  for (int i = 0; i < 2 && gemms > 0; ++i) {
    CK(cudaEventRecord(g0[i], b.gemm[i]));
    for (int r = 0; r < gemms; ++r) {
      CK(cublasDgemm(b.gemm_blas[i], CUBLAS_OP_N, CUBLAS_OP_N, b.gm, b.gn, b.gk, &minus, b.ga, b.gm,
                     b.gb, b.gk, &one, b.gc[i], b.gm));
    }
    CK(cudaEventRecord(g1[i], b.gemm[i]));
  }
  float total = 0, best = 1e30f;
  for (int r = 0; r < panels; ++r) {
    reset(b);
    CK(cudaEventRecord(p0, b.panel));
    panel();
    CK(cudaEventRecord(p1, b.panel));
    CK(cudaEventSynchronize(p1));
    const float ms = elapsed(p0, p1);
    total += ms;
    best = ms < best ? ms : best;
  }
  CK(cudaDeviceSynchronize());
  double rate = 0;
  if (gemms > 0) {
    const double flops = 2.0 * b.gm * double(b.gn) * b.gk * gemms;
    rate = (flops / (elapsed(g0[0], g1[0]) * 1e-3) + flops / (elapsed(g0[1], g1[1]) * 1e-3)) / 1e12;
  }
  const float mean = panels ? total / panels : 0.f;
  std::printf("%-40s panel mean %7.2f ms best %7.2f ms | GEMM %6.2f TFLOP/s", label, mean,
              panels ? best : 0.f, rate);
  if (reference > 0 && mean > 0) std::printf(" | %.2fx the getrf path", reference / mean);
  std::printf("\n");
  std::fflush(stdout);
  return mean;
}

double max_abs_diff(const std::vector<double>& x, const std::vector<double>& y) {
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::fmax(d, std::fabs(x[i] - y[i]));
  return d;
}

// getrf's factors and pivots against the persistent panel's with `blocks` blocks.
void verify(Bench& b, int blocks) {
  const size_t count = size_t(b.m) * b.ld;
  std::vector<double> ref(count), got(count);
  std::vector<int> ref_piv(b.h), got_piv(b.h);
  int ref_info = 0, got_info = 0;
  reset(b);
  getrf_path(b);
  CK(cudaMemcpyAsync(ref.data(), b.rows, sizeof(double) * count, cudaMemcpyDeviceToHost, b.panel));
  CK(cudaMemcpyAsync(ref_piv.data(), b.ipiv, sizeof(int) * b.h, cudaMemcpyDeviceToHost, b.panel));
  CK(cudaMemcpyAsync(&ref_info, b.info, sizeof(int), cudaMemcpyDeviceToHost, b.panel));
  reset(b);
  persistent(b, blocks);
  CK(cudaMemcpyAsync(got.data(), b.rows, sizeof(double) * count, cudaMemcpyDeviceToHost, b.panel));
  CK(cudaMemcpyAsync(got_piv.data(), b.ipiv, sizeof(int) * b.h, cudaMemcpyDeviceToHost, b.panel));
  CK(cudaMemcpyAsync(&got_info, b.info, sizeof(int), cudaMemcpyDeviceToHost, b.panel));
  long long phases[PersistentPanel::kPhases];
  CK(cudaMemcpyAsync(phases, PersistentPanel::phase_nanoseconds(b.scratch), sizeof phases,
                     cudaMemcpyDeviceToHost, b.panel));
  CK(cudaStreamSynchronize(b.panel));
  std::printf(
      "block 0's phases (ms): A %.2f, step %.2f, barrier %.2f, winner+rank-1 %.2f, "
      "write-back+update %.2f, D %.2f, moves %.2f\n",
      phases[0] * 1e-6, phases[1] * 1e-6, phases[2] * 1e-6, phases[3] * 1e-6, phases[4] * 1e-6,
      phases[5] * 1e-6, phases[6] * 1e-6);
  int differ = 0, first = -1;
  for (int k = 0; k < b.h; ++k) {
    if (ref_piv[k] != got_piv[k]) {
      ++differ;
      if (first < 0) first = k;
    }
  }
  double l_max = 0, u_max = 0;
  for (size_t r = 0; r < size_t(b.m); ++r) {
    for (size_t c = 0; c < size_t(b.h); ++c) {
      const double y = std::fabs(got[r * b.ld + c]);
      if (r > c)
        l_max = std::fmax(l_max, y);
      else
        u_max = std::fmax(u_max, y);
    }
  }
  std::printf(
      "verify, %d blocks: %d of %d pivots differ from getrf's (first at %d), max |factor "
      "difference| %.3e, max |L| %.3f, max |U| %.3f, info %d / getrf %d\n",
      PersistentPanel::blocks_for(b.m, blocks), differ, b.h, first, max_abs_diff(ref, got), l_max,
      u_max, got_info, ref_info);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Bench b{};
  b.m = argc > 1 ? std::atoi(argv[1]) : 57344;
  b.h = argc > 2 ? std::atoi(argv[2]) : 1024;
  std::vector<int> blocks = {28, 32, 48};
  if (argc > 3) {
    blocks.clear();
    for (char* t = std::strtok(argv[3], ","); t; t = std::strtok(nullptr, ","))
      blocks.push_back(std::atoi(t));
  }
  b.gm = argc > 4 ? std::atoi(argv[4]) : 1024;
  b.gn = argc > 5 ? std::atoi(argv[5]) : 49152;
  b.gk = argc > 6 ? std::atoi(argv[6]) : 8192;
  b.ld = argc > 7 ? std::atoi(argv[7]) : b.h;
  CK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  if (b.ld < b.h || b.ld % 2 != 0) {
    std::fprintf(stderr, "ld %d: must be even and at least h = %d\n", b.ld, b.h);
    return 1;
  }
  std::printf("%s, %d SMs; panel %d x %d (row stride %d); GEMMs %d x %d x %d on two streams\n",
              prop.name, prop.multiProcessorCount, b.m, b.h, b.ld, b.gm, b.gn, b.gk);
  const size_t count = size_t(b.m) * b.h;
  CK(cudaMalloc(&b.rows, sizeof(double) * size_t(b.m) * b.ld));
  CK(cudaMalloc(&b.pristine, sizeof(double) * count));
  CK(cudaMalloc(&b.work, sizeof(double) * count));
  CK(cudaMalloc(&b.ipiv, sizeof(int) * b.h));
  CK(cudaMalloc(&b.info, sizeof(int)));
  int most = 64;
  for (int g : blocks) most = g > most ? g : most;
  CK(cudaMalloc(&b.scratch, PersistentPanel::scratch_bytes(b.h, most)));
  CK(cudaMalloc(&b.ga, sizeof(double) * size_t(b.gm) * b.gk));
  CK(cudaMalloc(&b.gb, sizeof(double) * size_t(b.gk) * b.gn));
  for (auto& c : b.gc) CK(cudaMalloc(&c, sizeof(double) * size_t(b.gm) * b.gn));
  fill<<<1024, 256>>>(b.pristine, count, 1);
  fill<<<1024, 256>>>(b.ga, size_t(b.gm) * b.gk, 2);
  fill<<<1024, 256>>>(b.gb, size_t(b.gk) * b.gn, 3);
  for (auto& c : b.gc) fill<<<1024, 256>>>(c, size_t(b.gm) * b.gn, 4);
  int least = 0, greatest = 0;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CK(cudaStreamCreateWithPriority(&b.panel, cudaStreamNonBlocking, greatest));
  for (auto& s : b.gemm) CK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, least));
  CK(cublasCreate(&b.blas));
  CK(cublasSetStream(b.blas, b.panel));
  for (int i = 0; i < 2; ++i) {
    CK(cublasCreate(&b.gemm_blas[i]));
    CK(cublasSetStream(b.gemm_blas[i], b.gemm[i]));
  }
  CK(cusolverDnCreate(&b.solver));
  CK(cusolverDnSetStream(b.solver, b.panel));
  int lwork = 0;
  CK(cusolverDnDgetrf_bufferSize(b.solver, b.m, b.h, b.work, b.m, &lwork));
  CK(cudaMalloc(&b.solver_work, sizeof(double) * size_t(lwork)));
  CK(cudaDeviceSynchronize());

  for (int g : blocks) verify(b, g);
  auto getrf = [&] { getrf_path(b); };
  run(b, getrf, 3, 0, "warm-up");
  // Alone, then beside two GEMM streams (40 GEMMs each, the GEMMs alone measured first).
  for (const int gemms : {0, 40}) {
    const char* where = gemms ? "beside GEMMs" : "alone";
    char label[64];
    if (gemms) run(b, getrf, 0, 10, "GEMMs alone");
    std::snprintf(label, sizeof label, "getrf path %s", where);
    const float reference = run(b, getrf, 5, gemms, label);
    for (int g : blocks) {
      std::snprintf(label, sizeof label, "persistent, %d blocks, %s",
                    PersistentPanel::blocks_for(b.m, g), where);
      run(
          b, [&] { persistent(b, g); }, 5, gemms, label, reference);
    }
  }
  return 0;
}
