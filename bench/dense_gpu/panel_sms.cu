// How fast the panel (cuSOLVER getrf of a tall transposed stripe) runs beside the J updates'
// GEMMs, with and without a partition of the SMs (green contexts). Standalone: the question it
// answers decides how the GPU tier splits the device between elim.I and the sweep lanes.
//
// The figures it prints decide whether the sweep lanes run in a green context that leaves SMs
// free for elim.I (docs/performance.md).
//
//   build/release/bench/dense_gpu/bench_panel_sms [m=57344] [h=2048] [panel SM counts: 8,16,24,32]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#define CK(x)                                                                         \
  do {                                                                                \
    auto e_ = (x);                                                                    \
    if (static_cast<int>(e_) != 0) {                                                  \
      std::fprintf(stderr, "%s:%d %s failed: %d\n", __FILE__, __LINE__, #x, (int)e_); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

__global__ void fill(double* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned x = static_cast<unsigned>(i) * 2654435761u + seed;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    p[i] = (x & 0xffffff) / double(0x1000000) - 0.5;
  }
}

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
  double *ga, *gb, *gc[2];
  cublasHandle_t blas[2];
  cusolverDnHandle_t solver;
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
    for (int r = 0; r < gemms; ++r) {
      CK(cublasDgemm(p.blas[i], CUBLAS_OP_N, CUBLAS_OP_N, p.gm, p.gn, p.gk, &minus, p.ga, p.gm,
                     p.gb, p.gk, &one, p.gc[i], p.gm));
    }
    CK(cudaEventRecord(g1[i], s.gemm[i]));
  }
  float panel_ms = 0, best = 1e30f;
  CK(cusolverDnSetStream(p.solver, s.panel));
  for (int r = 0; r < panels; ++r) {
    CK(cudaMemcpyAsync(p.panel, p.pristine, sizeof(double) * size_t(p.m) * p.h,
                       cudaMemcpyDeviceToDevice, s.panel));
    CK(cudaEventRecord(p0, s.panel));
    CK(cusolverDnDgetrf(p.solver, p.m, p.h, p.panel, p.m, p.work, p.ipiv, p.info));
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
  int least = 0, greatest = 0;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));

  Streams primary;
  CK(cudaStreamCreateWithPriority(&primary.panel, cudaStreamNonBlocking, greatest));
  for (auto& g : primary.gemm) CK(cudaStreamCreateWithPriority(&g, cudaStreamNonBlocking, least));
  run(p, primary, 3, 0, "warm-up");
  run(p, primary, 5, 0, "panel alone, all SMs");
  run(p, primary, 0, 10, "GEMM alone, all SMs");
  run(p, primary, 5, 40, "both, all SMs, panel high priority");

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
