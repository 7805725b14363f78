// Whether the sweeps' GEMMs can be chosen so that the panel keeps its speed beside them: cuSOLVER
// getrf of the m x h transposed stripe (elim.I's panel) beside two streams of J-update GEMMs
// (gm x gn x gk), the GEMMs run by cuBLAS (the engine's call) and by cuBLASLt with each algorithm
// its heuristic offers, with and without an SM count target (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET:
// fewer CTAs a wave where the kernel is persistent). Each algorithm's tile, stages and cluster
// shape are printed as cuBLASLt numbers them (cublasLt.h: cublasLtMatmulTile_t,
// cublasLtMatmulStages_t, cublasLtClusterShape_t).
//
// The panel waits beside whole GEMMs because a GEMM block holds its SM for the whole k loop
// (panel_sms.cu); this asks whether a kernel with a smaller footprint, or fewer blocks a wave,
// leaves the panel's kernels room without costing the GEMMs their rate. On the H200 one layout did
// at long GEMMs (64x128 tiles, k steps of 32 in three stages), not at the engine's segments of
// 8192 columns, and the RAM tier did not gain with it (docs/performance.md, thirty-seventh
// session). `all` in place of the count: every tile and stage layout cuBLASLt accepts on the
// heuristic's algorithms.
//
//   build/release/bench/dense_gpu/bench_panel_lt [m=57344] [h=1024] [SM targets: 0,124,116]
//     [algorithms per target: 8, or all] [gm=1024] [gn=49152] [gk=8192]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include "bench_device.cuh"
#include "cuda_check.cuh"

namespace {

struct Shape {
  int m, h;        // the panel, m x h
  int gm, gn, gk;  // C(gm x gn) -= A(gm x gk) B(gk x gn)
};

// The GEMMs' way: cuBLAS's dgemm (algo == nullptr) or cuBLASLt with `algo`.
struct Gemms {
  cublasHandle_t blas[2];
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  const cublasLtMatmulAlgo_t* algo = nullptr;
  void* workspace[2] = {nullptr, nullptr};
  size_t workspace_bytes = 64 << 20;
  double *a, *b, *c[2];

  void run(const Shape& s, int i, cudaStream_t stream) const {
    const double one = 1.0, minus = -1.0;
    if (algo == nullptr) {
      CK(cublasSetStream(blas[i], stream));
      CK(cublasDgemm(blas[i], CUBLAS_OP_N, CUBLAS_OP_N, s.gm, s.gn, s.gk, &minus, a, s.gm, b, s.gk,
                     &one, c[i], s.gm));
      return;
    }
    CK(cublasLtMatmul(lt, desc, &minus, a, la, b, lb, &one, c[i], lc, c[i], lc, algo, workspace[i],
                      workspace_bytes, stream));
  }
};

struct Panel {
  cusolverDnHandle_t solver;
  double *panel, *pristine, *work;
  int *ipiv, *info;
};

float elapsed(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

// `panels` getrfs on `ps` while (gemms > 0) each of the two GEMM streams runs `gemms` GEMMs:
// the panels' mean and best time and the GEMMs' rate over their span (returned, TFLOP/s).
double measure(const Shape& s, Panel& p, const Gemms& g, cudaStream_t ps, const cudaStream_t gs[2],
               int panels, int gemms, const char* label) {
  cudaEvent_t g0[2], g1[2], p0, p1;
  for (int i = 0; i < 2; ++i) {
    CK(cudaEventCreate(&g0[i]));
    CK(cudaEventCreate(&g1[i]));
  }
  CK(cudaEventCreate(&p0));
  CK(cudaEventCreate(&p1));
  CK(cudaDeviceSynchronize());
  for (int i = 0; i < 2 && gemms > 0; ++i) {
    CK(cudaEventRecord(g0[i], gs[i]));
    for (int r = 0; r < gemms; ++r) g.run(s, i, gs[i]);
    CK(cudaEventRecord(g1[i], gs[i]));
  }
  float total = 0, best = 1e30f;
  CK(cusolverDnSetStream(p.solver, ps));
  for (int r = 0; r < panels; ++r) {
    CK(cudaMemcpyAsync(p.panel, p.pristine, sizeof(double) * size_t(s.m) * s.h,
                       cudaMemcpyDeviceToDevice, ps));
    CK(cudaEventRecord(p0, ps));
    CK(cusolverDnDgetrf(p.solver, s.m, s.h, p.panel, s.m, p.work, p.ipiv, p.info));
    CK(cudaEventRecord(p1, ps));
    CK(cudaEventSynchronize(p1));
    const float ms = elapsed(p0, p1);
    total += ms;
    best = ms < best ? ms : best;
  }
  CK(cudaDeviceSynchronize());
  double rate = 0;
  if (gemms > 0) {
    const double flops = 2.0 * s.gm * double(s.gn) * s.gk * gemms;
    for (int i = 0; i < 2; ++i) rate += flops / (elapsed(g0[i], g1[i]) * 1e-3) / 1e12;
  }
  std::printf("%-52s panel mean %7.2f ms best %7.2f | GEMM %6.2f TFLOP/s\n", label,
              panels ? total / panels : 0.f, panels ? best : 0.f, rate);
  std::fflush(stdout);
  for (int i = 0; i < 2; ++i) {
    CK(cudaEventDestroy(g0[i]));
    CK(cudaEventDestroy(g1[i]));
  }
  CK(cudaEventDestroy(p0));
  CK(cudaEventDestroy(p1));
  return rate;
}

template <typename T>
T config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t what) {
  T v{};
  size_t written = 0;
  CK(cublasLtMatmulAlgoConfigGetAttribute(&algo, what, &v, sizeof v, &written));
  return v;
}

// Every (tile, stages) cuBLASLt accepts for this GEMM (cublasLtMatmulAlgoCheck) on the base of
// each algorithm the heuristic `offered` (its other settings kept: swizzle, cluster shape), one
// base an algorithm id, up to `capacity` into `out`; returns how many. (Fixed arrays: nvcc 13 with
// GCC 12's library fails on std::vector of these structs.)
int every_config(const Gemms& g, const cublasLtMatmulHeuristicResult_t* offered, int offers,
                 cublasLtMatmulAlgo_t* out, int capacity) {
  constexpr int kCaps = 64;
  // The capability's values (at least one: 0, the algorithm's own choice).
  auto caps = [](const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t what,
                 uint32_t* v) {
    size_t bytes = 0;
    CK(cublasLtMatmulAlgoCapGetAttribute(&algo, what, v, kCaps * sizeof(uint32_t), &bytes));
    const int n = int(bytes / sizeof(uint32_t));
    if (n > 0) return n < kCaps ? n : kCaps;
    v[0] = 0;
    return 1;
  };
  int seen[kCaps], bases = 0, found = 0;
  for (int k = 0; k < offers; ++k) {
    const cublasLtMatmulAlgo_t& algo = offered[k].algo;
    const int id = config<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID);
    bool known = false;
    for (int i = 0; i < bases; ++i) known = known || seen[i] == id;
    if (known || bases == kCaps) continue;
    seen[bases++] = id;
    uint32_t tiles[kCaps], stages[kCaps];
    const int nt = caps(algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles);
    const int ns = caps(algo, CUBLASLT_ALGO_CAP_STAGES_IDS, stages);
    std::printf("algorithm %d: %d tiles, %d stages\n", id, nt, ns);
    for (int t = 0; t < nt; ++t) {
      for (int st = 0; st < ns && found < capacity; ++st) {
        cublasLtMatmulAlgo_t a = algo;
        CK(cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tiles[t],
                                                sizeof tiles[t]));
        CK(cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages[st],
                                                sizeof stages[st]));
        cublasLtMatmulHeuristicResult_t result{};
        if (cublasLtMatmulAlgoCheck(g.lt, g.desc, g.la, g.lb, g.lc, g.lc, &a, &result) ==
                CUBLAS_STATUS_SUCCESS &&
            result.workspaceSize <= g.workspace_bytes) {
          out[found++] = a;
        }
      }
    }
  }
  return found;
}

std::vector<int> int_list(char* arg) {
  std::vector<int> out;
  for (char* t = std::strtok(arg, ","); t; t = std::strtok(nullptr, ","))
    out.push_back(std::atoi(t));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Shape s{57344, 1024, 1024, 49152, 8192};
  if (argc > 1) s.m = std::atoi(argv[1]);
  if (argc > 2) s.h = std::atoi(argv[2]);
  char default_targets[] = "0,124,116";
  const std::vector<int> targets = int_list(argc > 3 ? argv[3] : default_targets);
  constexpr int kMaxAlgorithms = 32, kMaxConfigs = 1024;
  const bool all = argc > 4 && std::strcmp(argv[4], "all") == 0;
  const int asked = argc > 4 && !all ? std::atoi(argv[4]) : 8;
  const int per_target = asked < 1 ? 1 : asked > kMaxAlgorithms ? kMaxAlgorithms : asked;
  if (argc > 5) s.gm = std::atoi(argv[5]);
  if (argc > 6) s.gn = std::atoi(argv[6]);
  if (argc > 7) s.gk = std::atoi(argv[7]);

  CK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs; panel getrf %d x %d; GEMMs %d x %d x %d on two streams\n", prop.name,
              prop.multiProcessorCount, s.m, s.h, s.gm, s.gn, s.gk);

  Panel p;
  CK(cudaMalloc(&p.panel, sizeof(double) * size_t(s.m) * s.h));
  CK(cudaMalloc(&p.pristine, sizeof(double) * size_t(s.m) * s.h));
  fill<<<1024, 256>>>(p.pristine, size_t(s.m) * s.h, 1);
  CK(cusolverDnCreate(&p.solver));
  int lwork = 0;
  CK(cusolverDnDgetrf_bufferSize(p.solver, s.m, s.h, p.panel, s.m, &lwork));
  CK(cudaMalloc(&p.work, sizeof(double) * size_t(lwork)));
  CK(cudaMalloc(&p.ipiv, sizeof(int) * s.h));
  CK(cudaMalloc(&p.info, sizeof(int)));

  Gemms g;
  CK(cudaMalloc(&g.a, sizeof(double) * size_t(s.gm) * s.gk));
  CK(cudaMalloc(&g.b, sizeof(double) * size_t(s.gk) * s.gn));
  fill<<<1024, 256>>>(g.a, size_t(s.gm) * s.gk, 2);
  fill<<<1024, 256>>>(g.b, size_t(s.gk) * s.gn, 3);
  for (int i = 0; i < 2; ++i) {
    CK(cudaMalloc(&g.c[i], sizeof(double) * size_t(s.gm) * s.gn));
    fill<<<1024, 256>>>(g.c[i], size_t(s.gm) * s.gn, 4 + i);
    CK(cudaMalloc(&g.workspace[i], g.workspace_bytes));
    CK(cublasCreate(&g.blas[i]));
  }
  CK(cublasLtCreate(&g.lt));
  CK(cublasLtMatrixLayoutCreate(&g.la, CUDA_R_64F, s.gm, s.gk, s.gm));
  CK(cublasLtMatrixLayoutCreate(&g.lb, CUDA_R_64F, s.gk, s.gn, s.gk));
  CK(cublasLtMatrixLayoutCreate(&g.lc, CUDA_R_64F, s.gm, s.gn, s.gm));
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                          &g.workspace_bytes, sizeof g.workspace_bytes));

  int least = 0, greatest = 0;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t ps, gs[2];
  CK(cudaStreamCreateWithPriority(&ps, cudaStreamNonBlocking, greatest));
  for (auto& st : gs) CK(cudaStreamCreateWithPriority(&st, cudaStreamNonBlocking, least));

  const int gemms_alone = 6, gemms_beside = 40, panels = 5;
  measure(s, p, g, ps, gs, 3, 0, "warm-up");
  measure(s, p, g, ps, gs, panels, 0, "panel alone");
  const double dgemm_rate = measure(s, p, g, ps, gs, 0, gemms_alone, "cublasDgemm alone");
  measure(s, p, g, ps, gs, panels, gemms_beside, "cublasDgemm, panel beside");

  static uint64_t tried_keys[kMaxConfigs];
  int tried = 0;
  for (int target : targets) {
    if (g.desc != nullptr) CK(cublasLtMatmulDescDestroy(g.desc));
    CK(cublasLtMatmulDescCreate(&g.desc, CUBLAS_COMPUTE_64F, CUDA_R_64F));
    if (target > 0) {
      const int32_t t = target;
      CK(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &t,
                                        sizeof t));
    }
    static cublasLtMatmulAlgo_t algos[kMaxConfigs];
    int count = 0;
    cublasLtMatmulHeuristicResult_t found[kMaxAlgorithms] = {};
    CK(cublasLtMatmulAlgoGetHeuristic(g.lt, g.desc, g.la, g.lb, g.lc, g.lc, pref,
                                      all ? kMaxAlgorithms : per_target, found, &count));
    if (all) {
      count = every_config(g, found, count, algos, kMaxConfigs);
    } else {
      int kept = 0;  // one of each (id, tile, stages) over the targets
      for (int k = 0; k < count; ++k) {
        const uint64_t key =
            uint64_t(config<int32_t>(found[k].algo, CUBLASLT_ALGO_CONFIG_ID)) << 40 |
            uint64_t(config<uint32_t>(found[k].algo, CUBLASLT_ALGO_CONFIG_TILE_ID)) << 20 |
            config<uint32_t>(found[k].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID);
        bool known = false;
        for (int i = 0; i < tried; ++i) known = known || tried_keys[i] == key;
        if (known || tried == kMaxConfigs) continue;
        tried_keys[tried++] = key;
        algos[kept++] = found[k].algo;
      }
      count = kept;
    }
    std::printf("SM target %d: %d algorithms\n", target, count);
    for (int k = 0; k < count; ++k) {
      const cublasLtMatmulAlgo_t& algo = algos[k];
      g.algo = &algo;
      char label[160];
      std::snprintf(label, sizeof label,
                    "  #%d id %d tile %u stages %u cluster %u splitk %d swizzle %u custom %u", k,
                    config<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID),
                    config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                    config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                    unsigned(config<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)),
                    config<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                    config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                    config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION));
      std::printf("%s\n", label);
      // Every configuration: only those within 15% of cublasDgemm's rate are worth the panel's run.
      const double rate = measure(s, p, g, ps, gs, 0, gemms_alone, "    GEMMs alone");
      if (rate >= 0.85 * dgemm_rate) {
        measure(s, p, g, ps, gs, panels, gemms_beside, "    panel beside");
      }
    }
    g.algo = nullptr;
  }
  return 0;
}
