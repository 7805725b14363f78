// How fast the panel (cuSOLVER getrf of a tall transposed stripe) runs beside the J updates'
// GEMMs, with and without a partition of the SMs (green contexts). Standalone: the question it
// answers decides how the GPU tier splits the device between elim.I and the sweep lanes.
//
// The figures it prints decide whether the sweep lanes run in a green context that leaves SMs
// free for elim.I (docs/performance.md).
//
//   build/release/bench/dense_gpu/bench_panel_sms [m=57344] [h=2048] [panel SM counts: 8,16,24,32]
//     [GEMM k pieces: 2048,1024] [recursive panel leaves: 64,128,256,512; fused:
//     cooperative_panel.h; tournament: tournament_panel.h] [nogreen]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include "bench_device.cuh"
#include "cooperative_panel.h"
#include "cuda_check.cuh"
#include "tournament_panel.h"

// dlaswp on the cols-wide block a: for k < count, rows k and ipiv[k] - 1 swapped, in order
// (thread per column; the pivots staged through shared memory).
__global__ void row_swaps(double* a, int lda, int cols, const int* ipiv, int count) {
  __shared__ int piv[1024];
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  double* col = a + size_t(c) * lda;
  for (int k0 = 0; k0 < count; k0 += 1024) {
    const int len = count - k0 < 1024 ? count - k0 : 1024;
    __syncthreads();
    for (int t = threadIdx.x; t < len; t += blockDim.x) piv[t] = ipiv[k0 + t] - 1;
    __syncthreads();
    if (c >= cols) continue;
    for (int t = 0; t < len; ++t) {
      const int k = k0 + t, other = piv[t];
      if (other != k) {
        const double x = col[k];
        col[k] = col[other];
        col[other] = x;
      }
    }
  }
}

__global__ void add_offset(int* ipiv, int count, int offset) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < count) ipiv[k] += offset;
}

// Recursive LU with partial pivoting of the m x n panel a (column-major, lda), as LAPACK dgetrf2:
// most of the flops in one dtrsm and one dgemm per level; cuSOLVER getrf below `leaf` columns.
// Leaves the same factors and 1-based pivots as getrf.
struct Recursive {
  cublasHandle_t blas;
  cusolverDnHandle_t solver;
  cudaStream_t stream;
  double* work;
  int* info;
  int leaf;

  void swaps(double* a, int lda, int cols, const int* ipiv, int count) {
    if (cols <= 0 || count <= 0) return;
    row_swaps<<<(cols + 127) / 128, 128, 0, stream>>>(a, lda, cols, ipiv, count);
  }

  void factor(double* a, int lda, int m, int n, int* ipiv) {
    if (n <= leaf) {
      CK(cusolverDnDgetrf(solver, m, n, a, lda, work, ipiv, info));
      return;
    }
    const int n1 = (n / 2 + 31) / 32 * 32, n2 = n - n1;
    const double one = 1.0, minus = -1.0;
    factor(a, lda, m, n1, ipiv);
    double* right = a + size_t(n1) * lda;
    swaps(right, lda, n2, ipiv, n1);
    CK(cublasDtrsm(blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT,
                   n1, n2, &one, a, lda, right, lda));
    CK(cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m - n1, n2, n1, &minus, a + n1, lda, right, lda,
                   &one, right + n1, lda));
    factor(right + n1, lda, m - n1, n2, ipiv + n1);
    swaps(a + n1, lda, n1, ipiv + n1, n2);
    add_offset<<<(n2 + 255) / 256, 256, 0, stream>>>(ipiv + n1, n2, n1);
  }
};

struct Streams {
  cudaStream_t panel = nullptr;
  cudaStream_t gemm[2] = {nullptr, nullptr};
};

struct Problem {
  int m, h;        // panel: m x h (the transposed stripe)
  int gm, gn, gk;  // GEMM C(gm x gn) -= A(gm x gk) B(gk x gn)
  double *panel, *pristine, *work;
  int* ipiv;
  int* info;
  int* ipiv2;
  double* check;  // the recursive panel's factors, against getrf's
  double *ga, *gb, *gc[2];
  cublasHandle_t blas[2];
  cusolverDnHandle_t solver;
  cublasHandle_t panel_blas;
  int leaf = 0;  // > 0: the recursive panel with this leaf width instead of getrf;
                 // -1: CooperativePanel (cooperative_panel.h); -2: TournamentPanel
  void* lu_scratch = nullptr;
  void* tournament_scratch = nullptr;
  int gemm_chunk = 0;  // > 0: each GEMM as gk / gemm_chunk GEMMs of k = gemm_chunk
};

float elapsed(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

// Runs `panels` getrfs on s.panel while (if gemms > 0) two streams run `gemms` GEMMs each.
// Prints the mean panel time and the GEMM rate over the GEMMs' span.
void run(Problem& p, const Streams& s, int panels, int gemms, const char* label) {
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
    CK(cublasSetStream(p.blas[i], s.gemm[i]));
    CK(cudaEventRecord(g0[i], s.gemm[i]));
    const int chunk = p.gemm_chunk > 0 ? p.gemm_chunk : p.gk;
    for (int r = 0; r < gemms; ++r) {
      for (int k0 = 0; k0 < p.gk; k0 += chunk) {
        CK(cublasDgemm(p.blas[i], CUBLAS_OP_N, CUBLAS_OP_N, p.gm, p.gn, chunk, &minus,
                       p.ga + size_t(k0) * p.gm, p.gm, p.gb + k0, p.gk, &one, p.gc[i], p.gm));
      }
    }
    CK(cudaEventRecord(g1[i], s.gemm[i]));
  }
  float panel_ms = 0, best = 1e30f;
  CK(cusolverDnSetStream(p.solver, s.panel));
  for (int r = 0; r < panels; ++r) {
    CK(cudaMemcpyAsync(p.panel, p.pristine, sizeof(double) * size_t(p.m) * p.h,
                       cudaMemcpyDeviceToDevice, s.panel));
    CK(cudaEventRecord(p0, s.panel));
    if (p.leaf == -2) {
      CK(cublasSetStream(p.panel_blas, s.panel));
      TournamentPanel lu(p.tournament_scratch);
      CK(lu.factor(p.panel, p.m, p.m, p.h, p.ipiv2, p.info, p.panel_blas, s.panel));
    } else if (p.leaf < 0) {
      CK(cublasSetStream(p.panel_blas, s.panel));
      CooperativePanel lu(0, p.lu_scratch);
      CK(lu.factor(p.panel, p.m, p.m, p.h, p.ipiv2, p.info, p.panel_blas, s.panel));
    } else if (p.leaf > 0) {
      CK(cublasSetStream(p.panel_blas, s.panel));
      Recursive rec{p.panel_blas, p.solver, s.panel, p.work, p.info, p.leaf};
      rec.factor(p.panel, p.m, p.m, p.h, p.ipiv2);
    } else {
      CK(cusolverDnDgetrf(p.solver, p.m, p.h, p.panel, p.m, p.work, p.ipiv, p.info));
    }
    CK(cudaEventRecord(p1, s.panel));
    CK(cudaEventSynchronize(p1));
    const float ms = elapsed(p0, p1);
    panel_ms += ms;
    if (ms < best) best = ms;
  }
  CK(cudaDeviceSynchronize());
  double rate = 0;
  if (gemms > 0) {
    const double flops = 2.0 * p.gm * double(p.gn) * p.gk * gemms;
    rate = (flops / (elapsed(g0[0], g1[0]) * 1e-3) + flops / (elapsed(g0[1], g1[1]) * 1e-3)) / 1e12;
  }
  std::printf("%-44s panel mean %7.2f ms best %7.2f ms | GEMM %6.2f TFLOP/s\n", label,
              panels ? panel_ms / panels : 0.f, panels ? best : 0.f, rate);
  std::fflush(stdout);
}

__global__ void lu_parts(const double* lu, int m, int h, double* l, double* u) {
  const size_t count = size_t(m) * h;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    const int r = int(i % m), c = int(i / m);
    l[i] = r > c ? lu[i] : (r == c ? 1.0 : 0.0);
    if (r < h) u[r + size_t(c) * h] = r <= c ? lu[i] : 0.0;
  }
}

double max_abs(cublasHandle_t blas, const double* x, size_t count) {
  int at = 0;
  CK(cublasIdamax(blas, int(std::min<size_t>(count, 2147483647)), x, 1, &at));
  double v = 0;
  CK(cudaMemcpy(&v, x + at - 1, sizeof(double), cudaMemcpyDeviceToHost));
  return std::fabs(v);
}

// Factors lu (ipiv) of the pristine panel: max |P A - L U| / max |A|, max |L|, max |U| / max |A|.
void quality(Problem& p, const double* lu, const int* ipiv, const char* label,
             cudaStream_t stream) {
  const size_t count = size_t(p.m) * p.h;
  double *pa, *l, *u;
  CK(cudaMalloc(&pa, sizeof(double) * count));
  CK(cudaMalloc(&l, sizeof(double) * count));
  CK(cudaMalloc(&u, sizeof(double) * size_t(p.h) * p.h));
  CK(cudaMemcpyAsync(pa, p.pristine, sizeof(double) * count, cudaMemcpyDeviceToDevice, stream));
  row_swaps<<<(p.h + 127) / 128, 128, 0, stream>>>(pa, p.m, p.h, ipiv, p.h);
  lu_parts<<<1024, 256, 0, stream>>>(lu, p.m, p.h, l, u);
  const double one = 1.0, minus = -1.0;
  CK(cublasDgemm(p.panel_blas, CUBLAS_OP_N, CUBLAS_OP_N, p.m, p.h, p.h, &minus, l, p.m, u, p.h,
                 &one, pa, p.m));
  CK(cudaStreamSynchronize(stream));
  const double a = max_abs(p.panel_blas, p.pristine, count);
  std::printf("%-10s max |PA - LU| / max |A| %.3e, max |L| %.3f, max |U| / max |A| %.3f\n", label,
              max_abs(p.panel_blas, pa, count) / a, max_abs(p.panel_blas, l, count),
              max_abs(p.panel_blas, u, size_t(p.h) * p.h) / a);
  CK(cudaFree(pa));
  CK(cudaFree(l));
  CK(cudaFree(u));
}

// The recursive panel against getrf on the same input: pivots that differ and the largest
// difference of the factors; for the tournament, both factorizations' quality (quality()).
void verify(Problem& p, cudaStream_t stream) {
  const size_t count = size_t(p.m) * p.h;
  CK(cudaMemcpyAsync(p.check, p.pristine, sizeof(double) * count, cudaMemcpyDeviceToDevice,
                     stream));
  CK(cudaMemcpyAsync(p.panel, p.pristine, sizeof(double) * count, cudaMemcpyDeviceToDevice,
                     stream));
  CK(cusolverDnSetStream(p.solver, stream));
  CK(cublasSetStream(p.panel_blas, stream));
  CK(cusolverDnDgetrf(p.solver, p.m, p.h, p.check, p.m, p.work, p.ipiv, p.info));
  if (p.leaf == -2) {
    TournamentPanel lu(p.tournament_scratch);
    CK(lu.factor(p.panel, p.m, p.m, p.h, p.ipiv2, p.info, p.panel_blas, stream));
    quality(p, p.check, p.ipiv, "getrf", stream);
    quality(p, p.panel, p.ipiv2, "tournament", stream);
    return;  // its pivots are not GEPP's by design: comparing them with getrf's says nothing
  }
  if (p.leaf == -1) {
    CooperativePanel lu(0, p.lu_scratch);
    CK(lu.factor(p.panel, p.m, p.m, p.h, p.ipiv2, p.info, p.panel_blas, stream));
  } else {
    Recursive rec{p.panel_blas, p.solver, stream, p.work, p.info, p.leaf};
    rec.factor(p.panel, p.m, p.m, p.h, p.ipiv2);
  }
  std::vector<int> a(p.h), b(p.h);
  CK(cudaMemcpyAsync(a.data(), p.ipiv, sizeof(int) * p.h, cudaMemcpyDeviceToHost, stream));
  CK(cudaMemcpyAsync(b.data(), p.ipiv2, sizeof(int) * p.h, cudaMemcpyDeviceToHost, stream));
  const double one = 1.0, minus = -1.0;
  CK(cublasDgeam(p.panel_blas, CUBLAS_OP_N, CUBLAS_OP_N, p.m, p.h, &one, p.check, p.m, &minus,
                 p.panel, p.m, p.check, p.m));
  const double diff = max_abs(p.panel_blas, p.check, count);
  int differ = 0;
  for (int k = 0; k < p.h; ++k) differ += a[k] != b[k];
  std::printf(
      "recursive panel, leaf %d (-1: CooperativePanel): %d of %d pivots differ from "
      "getrf's, max |factor difference| %.3e\n",
      p.leaf, differ, p.h, diff);
}

struct Green {
  CUgreenCtx ctx = nullptr;
  cudaStream_t stream(int priority) const {
    CUstream s;
    CK(cuGreenCtxStreamCreate(&s, ctx, CU_STREAM_NON_BLOCKING, priority));
    return reinterpret_cast<cudaStream_t>(s);
  }
};

// Splits the device's SMs: `count` for one green context, the rest for the other.
void split(CUdevice dev, unsigned count, Green& small, Green& rest, unsigned& got) {
  CUdevResource all, part, remaining;
  CK(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
  unsigned groups = 1;
  CK(cuDevSmResourceSplitByCount(&part, &groups, &all, &remaining, 0, count));
  got = part.sm.smCount;
  CUdevResourceDesc d1, d2;
  CK(cuDevResourceGenerateDesc(&d1, &part, 1));
  CK(cuDevResourceGenerateDesc(&d2, &remaining, 1));
  CK(cuGreenCtxCreate(&small.ctx, d1, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  CK(cuGreenCtxCreate(&rest.ctx, d2, dev, CU_GREEN_CTX_DEFAULT_STREAM));
}

int main(int argc, char** argv) {
  const int m = argc > 1 ? std::atoi(argv[1]) : 57344;
  const int h = argc > 2 ? std::atoi(argv[2]) : 2048;
  std::vector<unsigned> counts = {8, 16, 24, 32};
  if (argc > 3) {
    counts.clear();
    for (char* t = std::strtok(argv[3], ","); t; t = std::strtok(nullptr, ","))
      counts.push_back(std::atoi(t));
  }
  std::vector<int> chunks = {2048, 1024};
  std::vector<int> leaves = {64, 128, 256, 512};
  auto list = [](char* arg, std::vector<int>& out) {
    out.clear();
    for (char* t = std::strtok(arg, ","); t; t = std::strtok(nullptr, ","))
      out.push_back(std::strcmp(t, "fused") == 0        ? -1
                    : std::strcmp(t, "tournament") == 0 ? -2
                                                        : std::atoi(t));
  };
  if (argc > 4) list(argv[4], chunks);
  if (argc > 5) list(argv[5], leaves);
  const bool skip_green = argc > 6 && std::strcmp(argv[6], "nogreen") == 0;
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs; panel %d x %d, GEMM 2048 x 49152 x 8192 on two streams\n", prop.name,
              prop.multiProcessorCount, m, h);
  Problem p{m, h, 2048, 49152, 8192};
  CK(cudaMalloc(&p.panel, sizeof(double) * size_t(m) * h));
  CK(cudaMalloc(&p.pristine, sizeof(double) * size_t(m) * h));
  CK(cudaMalloc(&p.ga, sizeof(double) * size_t(p.gm) * p.gk));
  CK(cudaMalloc(&p.gb, sizeof(double) * size_t(p.gk) * p.gn));
  for (auto& c : p.gc) CK(cudaMalloc(&c, sizeof(double) * size_t(p.gm) * p.gn));
  fill<<<1024, 256>>>(p.pristine, size_t(m) * h, 1);
  fill<<<1024, 256>>>(p.ga, size_t(p.gm) * p.gk, 2);
  fill<<<1024, 256>>>(p.gb, size_t(p.gk) * p.gn, 3);
  for (auto& c : p.gc) fill<<<1024, 256>>>(c, size_t(p.gm) * p.gn, 4);
  CK(cusolverDnCreate(&p.solver));
  for (auto& b : p.blas) CK(cublasCreate(&b));
  int lwork = 0;
  CK(cusolverDnDgetrf_bufferSize(p.solver, m, h, p.panel, m, &lwork));
  CK(cudaMalloc(&p.work, sizeof(double) * size_t(lwork)));
  CK(cudaMalloc(&p.ipiv, sizeof(int) * h));
  CK(cudaMalloc(&p.info, sizeof(int)));
  CK(cudaMalloc(&p.ipiv2, sizeof(int) * h));
  CK(cudaMalloc(&p.check, sizeof(double) * size_t(m) * h));
  CK(cublasCreate(&p.panel_blas));
  CK(cudaMalloc(&p.lu_scratch, CooperativePanel::scratch_bytes(0)));
  CK(cudaMalloc(&p.tournament_scratch, TournamentPanel::scratch_bytes(m)));
  std::printf("CooperativePanel leaf width at m = %d: %d columns\n", m,
              CooperativePanel::leaf_columns(m, 0));
  int least = 0, greatest = 0;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));

  Streams primary;
  CK(cudaStreamCreateWithPriority(&primary.panel, cudaStreamNonBlocking, greatest));
  for (auto& g : primary.gemm) CK(cudaStreamCreateWithPriority(&g, cudaStreamNonBlocking, least));
  run(p, primary, 3, 0, "warm-up");
  run(p, primary, 5, 0, "panel alone, all SMs");
  run(p, primary, 0, 10, "GEMM alone, all SMs");
  run(p, primary, 5, 40, "both, all SMs, panel high priority");

  // Shorter GEMM blocks: the k loop of each GEMM in pieces, so SMs free up for the panel's
  // kernels more often.
  for (int chunk : chunks) {
    p.gemm_chunk = chunk;
    char label[96];
    std::snprintf(label, sizeof label, "GEMM alone, k in pieces of %d", chunk);
    run(p, primary, 0, 10, label);
    std::snprintf(label, sizeof label, "both, GEMM k in pieces of %d", chunk);
    run(p, primary, 5, 40, label);
  }
  p.gemm_chunk = 0;
  // The recursive panel (most flops in dtrsm + dgemm), alone and beside the GEMMs.
  for (int leaf : leaves) {
    p.leaf = leaf;
    verify(p, primary.panel);
    char label[96];
    std::snprintf(label, sizeof label, "recursive panel (leaf %d) alone", leaf);
    run(p, primary, 5, 0, label);
    std::snprintf(label, sizeof label, "recursive panel (leaf %d) beside GEMMs", leaf);
    run(p, primary, 5, 40, label);
    for (int chunk : chunks) {
      p.gemm_chunk = chunk;
      std::snprintf(label, sizeof label, "recursive (leaf %d), GEMM k pieces %d", leaf, chunk);
      run(p, primary, 5, 40, label);
    }
    p.gemm_chunk = 0;
  }
  p.leaf = 0;
  if (skip_green) return 0;

  // Only the GEMMs go to a green context of the SMs left over; the panel stays in the primary
  // context (all SMs, `got` of them free of GEMMs). The panel itself in a small green context
  // hung on the H200 (cuSOLVER's getrf waits for blocks that a small partition cannot hold), so
  // it is not tried.
  for (unsigned count : counts) {
    Green small, rest;
    unsigned got = 0;
    split(dev, count, small, rest, got);
    Streams fenced;
    fenced.panel = primary.panel;
    for (auto& g : fenced.gemm) g = rest.stream(least);
    char label[96];
    std::snprintf(label, sizeof label, "GEMM %u SMs alone", prop.multiProcessorCount - got);
    run(p, fenced, 0, 10, label);
    std::snprintf(label, sizeof label, "both, panel anywhere / GEMM %u SMs",
                  prop.multiProcessorCount - got);
    run(p, fenced, 5, 40, label);
    CK(cudaDeviceSynchronize());
  }
  return 0;
}
