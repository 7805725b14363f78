// How fast a J update's multipliers (x <- x triu(U)^-1, x of m x K, the K x K upper triangle of a
// meta-stripe's U block) run with each way of computing them, alone and as the sweeps run them:
// `lanes` streams, each a whole J update at a time (the multipliers, then the GEMM by the U
// block's columns right of the triangle in segments). Standalone: the figures decide how
// DeviceLane computes the multipliers (docs/performance.md).
//
//   build/release/bench/dense_gpu/bench_multiplier_ops [m=1024] [K=8192] [N=24576] [lanes=3]
//                                                      [updates=4] [nb=512]
//
// The ways:
//   trsm       one cublasDtrsm by the K x K triangle;
//   left       the engine's (DeviceLane::multipliers_by_inverses): block columns of nb left to
//              right, x_p -= x_<p U_<p,p (m x nb x c GEMMs), then x_p <- x_p inv(U_pp);
//   right      blocks of nb left to right, x_p <- x_p inv(U_pp), then x_>p -= x_p U_p,>p;
//   recursive  halves: x1 <- x1 U11^-1, x2 -= x1 U12, x2 <- x2 U22^-1, leaves of nb by the
//              inverted diagonal blocks (the GEMMs of the upper levels are large and square).
// Each way is checked against trsm (the largest difference relative to the largest entry).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench/common/cuda_timing.h"
#include "bench_device.cuh"
#include "cuda_check.cuh"

namespace {

// A well-conditioned upper triangle in the first k columns of a k x cols block (ld k): values of
// 1e-3 scale, diagonal 2 + |.|, zeros below; the columns right of it as they come.
__global__ void fill_upper(double* p, size_t ld, size_t cols, unsigned seed) {
  const size_t count = ld * cols;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    const size_t r = i % ld, c = i / ld;
    double v = hashed_uniform(i, seed);
    if (c < ld) {
      v = r > c ? 0.0 : v * 1e-3 * 8.0;
      if (r == c) v += 2.0;
    }
    p[i] = v;
  }
}

// inverse (k x nb, ld k) <- nb x nb identity blocks stacked down k rows.
__global__ void identity_blocks(double* p, size_t k, size_t nb) {
  const size_t count = k * nb;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    const size_t r = i % k, c = i / k;
    p[i] = (r % nb == c) ? 1.0 : 0.0;
  }
}

enum class Way { kTrsm, kLeft, kRight, kRecursive };
const Way kWays[] = {Way::kTrsm, Way::kLeft, Way::kRight, Way::kRecursive};

const char* name(Way w) {
  switch (w) {
    case Way::kTrsm:
      return "trsm";
    case Way::kLeft:
      return "left (engine)";
    case Way::kRight:
      return "right";
    case Way::kRecursive:
      return "recursive";
  }
  return "";
}

struct Shape {
  int m, k, n, nb;
};

// One lane: a stream, a cuBLAS handle, its J (m x (k + n), ld m) and a gather buffer (m x nb).
struct Lane {
  cudaStream_t stream;
  cublasHandle_t blas;
  double* j;
  double* gather;
};

struct Triangle {
  const double* u;    // k x (k + n), ld k
  const double* inv;  // k x nb, ld k: inv(U_pp) for each diagonal block p
};

const double kOne = 1.0, kZero = 0.0, kMinusOne = -1.0;

// x[:, c0:c0+w] <- x[:, c0:c0+w] inv(U_pp), the block at c0 (w <= nb).
void by_inverse(const Lane& l, const Triangle& t, const Shape& s, int c0, int w) {
  double* xp = l.j + size_t(c0) * s.m;
  CK(cublasDgemm(l.blas, CUBLAS_OP_N, CUBLAS_OP_N, s.m, w, w, &kOne, xp, s.m, t.inv + c0, s.k,
                 &kZero, l.gather, s.m));
  CK(cudaMemcpyAsync(xp, l.gather, sizeof(double) * size_t(s.m) * w, cudaMemcpyDeviceToDevice,
                     l.stream));
}

// x[:, c:c+w] -= x[:, a:a+d] U[a:a+d, c:c+w].
void subtract(const Lane& l, const Triangle& t, const Shape& s, int a, int d, int c, int w) {
  CK(cublasDgemm(l.blas, CUBLAS_OP_N, CUBLAS_OP_N, s.m, w, d, &kMinusOne, l.j + size_t(a) * s.m,
                 s.m, t.u + size_t(c) * s.k + a, s.k, &kOne, l.j + size_t(c) * s.m, s.m));
}

void recursive(const Lane& l, const Triangle& t, const Shape& s, int c0, int w) {
  if (w <= s.nb) {
    by_inverse(l, t, s, c0, w);
    return;
  }
  const int h = ((w / 2 + s.nb - 1) / s.nb) * s.nb;
  recursive(l, t, s, c0, h);
  subtract(l, t, s, c0, h, c0 + h, w - h);
  recursive(l, t, s, c0 + h, w - h);
}

void multipliers(const Lane& l, const Triangle& t, const Shape& s, Way way) {
  switch (way) {
    case Way::kTrsm:
      CK(cublasDtrsm(l.blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                     CUBLAS_DIAG_NON_UNIT, s.m, s.k, &kOne, t.u, s.k, l.j, s.m));
      return;
    case Way::kLeft:
      for (int c = 0; c < s.k; c += s.nb) {
        const int b = std::min(s.nb, s.k - c);
        if (c > 0) subtract(l, t, s, 0, c, c, b);
        by_inverse(l, t, s, c, b);
      }
      return;
    case Way::kRight:
      for (int c = 0; c < s.k; c += s.nb) {
        const int b = std::min(s.nb, s.k - c);
        by_inverse(l, t, s, c, b);
        if (c + b < s.k) subtract(l, t, s, c, b, c + b, s.k - c - b);
      }
      return;
    case Way::kRecursive:
      recursive(l, t, s, 0, s.k);
      return;
  }
}

// A whole J update: the multipliers, then J's columns right of the triangle in segments.
void update(const Lane& l, const Triangle& t, const Shape& s, Way way, int segment) {
  multipliers(l, t, s, way);
  for (int c = s.k; c < s.k + s.n; c += segment) {
    subtract(l, t, s, 0, s.k, c, std::min(segment, s.k + s.n - c));
  }
}

void fill_j(const Lane& l, const Shape& s, unsigned seed) {
  fill<<<1024, 256, 0, l.stream>>>(l.j, size_t(s.m) * (s.k + s.n), seed);
  CK(cudaGetLastError());
}

// The largest |a - b| over the largest |b| of m x k, copied to the host.
double relative_difference(const double* a, const double* b, size_t count) {
  std::vector<double> ha(count), hb(count);
  CK(cudaMemcpy(ha.data(), a, sizeof(double) * count, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hb.data(), b, sizeof(double) * count, cudaMemcpyDeviceToHost));
  double diff = 0, most = 0;
  for (size_t i = 0; i < count; ++i) {
    diff = std::max(diff, std::fabs(ha[i] - hb[i]));
    most = std::max(most, std::fabs(hb[i]));
  }
  return most > 0 ? diff / most : diff;
}

}  // namespace

int main(int argc, char** argv) {
  Shape s{argc > 1 ? std::atoi(argv[1]) : 1024, argc > 2 ? std::atoi(argv[2]) : 8192,
          argc > 3 ? std::atoi(argv[3]) : 24576, argc > 6 ? std::atoi(argv[6]) : 512};
  const int lanes = argc > 4 ? std::atoi(argv[4]) : 3;
  const int updates = argc > 5 ? std::atoi(argv[5]) : 4;
  const int segment = 8192;
  if (s.m < 1 || s.k < s.nb || s.n < 0 || lanes < 1 || updates < 1 || s.nb < 1) {
    std::fprintf(stderr, "usage: %s [m] [K >= nb] [N] [lanes] [updates] [nb]\n", argv[0]);
    return 2;
  }
  double *u = nullptr, *inv = nullptr;
  CK(cudaMalloc(&u, sizeof(double) * size_t(s.k) * (s.k + s.n)));
  CK(cudaMalloc(&inv, sizeof(double) * size_t(s.k) * s.nb));
  std::vector<Lane> ls(lanes);
  for (Lane& l : ls) {
    CK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
    CK(cublasCreate(&l.blas));
    CK(cublasSetStream(l.blas, l.stream));
    CK(cudaMalloc(&l.j, sizeof(double) * size_t(s.m) * (s.k + s.n)));
    CK(cudaMalloc(&l.gather, sizeof(double) * size_t(s.m) * s.nb));
  }
  double* reference = nullptr;
  CK(cudaMalloc(&reference, sizeof(double) * size_t(s.m) * s.k));
  const Lane& first = ls[0];
  fill_upper<<<4096, 256, 0, first.stream>>>(u, s.k, s.k + s.n, 7u);
  identity_blocks<<<1024, 256, 0, first.stream>>>(inv, s.k, s.nb);
  for (int c = 0; c < s.k; c += s.nb) {  // the engine's DeviceLane::invert_diagonal_blocks
    const int b = std::min(s.nb, s.k - c);
    CK(cublasDtrsm(first.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                   CUBLAS_DIAG_NON_UNIT, b, b, &kOne, u + c + size_t(c) * s.k, s.k, inv + c, s.k));
  }
  const Triangle t{u, inv};
  fill_j(first, s, 11u);
  multipliers(first, t, s, Way::kTrsm);
  CK(cudaMemcpyAsync(reference, first.j, sizeof(double) * size_t(s.m) * s.k,
                     cudaMemcpyDeviceToDevice, first.stream));
  CK(cudaStreamSynchronize(first.stream));

  const double mult_flops = double(s.m) * s.k * s.k;
  const double gemm_flops = 2.0 * s.m * double(s.k) * s.n;
  std::printf("m %d, K %d, N %d, nb %d; %d lanes x %d updates (best of 5, ms)\n", s.m, s.k, s.n,
              s.nb, lanes, updates);
  std::printf("  %-14s %10s %8s %10s %14s %8s %10s\n", "way", "alone", "TFLOP/s", "rel diff",
              "lanes updates", "TFLOP/s", "mult share");
  // The trailing GEMMs alone, for the lanes' baseline.
  const double gemm_alone = stripesolve::bench::best_cuda_ms(
      first.stream, 5, [] {},
      [&] {
        for (int c = s.k; c < s.k + s.n; c += segment)
          subtract(first, t, s, 0, s.k, c, std::min(segment, s.k + s.n - c));
      });
  for (Way way : kWays) {
    const double alone = stripesolve::bench::best_cuda_ms(
        first.stream, 5, [&] { fill_j(first, s, 11u); }, [&] { multipliers(first, t, s, way); });
    fill_j(first, s, 11u);
    multipliers(first, t, s, way);
    CK(cudaStreamSynchronize(first.stream));
    const double diff = relative_difference(first.j, reference, size_t(s.m) * s.k);
    // Every lane `updates` whole updates, joined on the first lane's stream.
    std::vector<cudaEvent_t> done(lanes);
    for (cudaEvent_t& e : done) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    cudaEvent_t go;
    CK(cudaEventCreateWithFlags(&go, cudaEventDisableTiming));
    const double together = stripesolve::bench::best_cuda_ms(
        first.stream, 5, [] {},
        [&] {
          CK(cudaEventRecord(go, first.stream));
          for (int i = 0; i < lanes; ++i) {
            const Lane& l = ls[i];
            if (i > 0) CK(cudaStreamWaitEvent(l.stream, go));
            for (int r = 0; r < updates; ++r) update(l, t, s, way, segment);
            if (i > 0) {
              CK(cudaEventRecord(done[i], l.stream));
              CK(cudaStreamWaitEvent(first.stream, done[i]));
            }
          }
        });
    const double all_flops = double(lanes) * updates * (mult_flops + gemm_flops);
    std::printf("  %-14s %10.3f %8.2f %10.2e %14.2f %8.2f %9.1f%%\n", name(way), alone,
                mult_flops / alone / 1e9, diff, together, all_flops / together / 1e9,
                100.0 * mult_flops / (mult_flops + gemm_flops));
    for (cudaEvent_t e : done) cudaEventDestroy(e);
    cudaEventDestroy(go);
  }
  std::printf("  trailing GEMMs alone (one update): %.3f ms, %.2f TFLOP/s\n", gemm_alone,
              gemm_flops / gemm_alone / 1e9);
  return 0;
}
