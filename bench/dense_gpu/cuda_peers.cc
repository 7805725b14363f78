#include "bench/dense_gpu/cuda_peers.h"

#include <cmath>
#include <cstdio>
#include <random>

#include "base/units.h"
#include "bench/dense_gpu/bench_util.h"

namespace dense_gpu_bench {

using nlohmann::json;
namespace ss = stripesolve;

uint64_t device_free_bytes() {
  size_t free_b = 0, total_b = 0;
  CK(cudaMemGetInfo(&free_b, &total_b));
  return free_b;
}

std::string gib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / double(ss::kGiB));
  return buf;
}

// Fills `count` device doubles with uniform values on [-0.5, 0.5] (a 32 MiB host pattern copied
// repeatedly): DGEMM on zeros would run at a higher clock than on real data.
void fill_device_random(double* d, size_t count, uint64_t seed) {
  const size_t chunk = std::min<size_t>(count, size_t{4} << 20);
  std::vector<double> h(chunk);
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-0.5, 0.5);
  for (auto& v : h) v = dist(gen);
  for (size_t off = 0; off < count; off += chunk) {
    CK(cudaMemcpy(d + off, h.data(), std::min(chunk, count - off) * sizeof(double),
                  cudaMemcpyHostToDevice));
  }
}

json device_json() {
  int dev = 0;
  CK(cudaGetDevice(&dev));
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, dev));
  size_t free_b = 0, total_b = 0;
  CK(cudaMemGetInfo(&free_b, &total_b));
  int runtime = 0, driver = 0, cublas_v = 0, cusolver_v = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  cusolverGetVersion(&cusolver_v);
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
    cublasGetVersion(h, &cublas_v);
    cublasDestroy(h);
  }
  return {{"index", dev},
          {"name", std::string(p.name)},
          {"compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor)},
          {"multiprocessors", p.multiProcessorCount},
          {"memory_bytes", uint64_t(p.totalGlobalMem)},
          {"free_bytes_at_start", uint64_t(free_b)},
          {"cuda_runtime", runtime},
          {"cuda_driver", driver},
          {"cublas", cublas_v},
          {"cusolver", cusolver_v}};
}

// ---------------------------------------------------------------------------------------------
// Peers

double factor_flops(int64_t n) {
  return 2.0 / 3.0 * double(n) * double(n) * double(n);
}
double solve_flops(int64_t n, int64_t nrhs) {
  return factor_flops(n) + 2.0 * double(n) * double(n) * double(nrhs);
}

// ||A||_inf of the column-major n x n matrix, rows split over the host's threads.
double norm_inf(const std::vector<double>& a, int64_t n) {
  std::vector<double> sums(static_cast<size_t>(n), 0.0);
  parallel_for(n, [&](int64_t r0, int64_t r1) {
    for (int64_t c = 0; c < n; ++c) {
      const double* col = a.data() + c * n;
      for (int64_t i = r0; i < r1; ++i) sums[i] += std::abs(col[i]);
    }
  });
  return *std::max_element(sums.begin(), sums.end());
}

// The scaled residual ||A x - b||_inf / (||A||_inf ||x||_inf + ||b||_inf) (largest over the
// columns, as stripe::scaled_residual and the engine compute it), with A x - b on the device.
// d_a holds A; d_x and d_r hold n x nrhs doubles each and are overwritten.
static double device_residual(Cuda& cu, const double* d_a, int64_t n, const std::vector<double>& x,
                              const std::vector<double>& b, int64_t nrhs, double norm_a,
                              double* d_x, double* d_r) {
  const size_t bytes = static_cast<size_t>(n * nrhs) * sizeof(double);
  CK(cudaMemcpyAsync(d_x, x.data(), bytes, cudaMemcpyHostToDevice, cu.stream));
  CK(cudaMemcpyAsync(d_r, b.data(), bytes, cudaMemcpyHostToDevice, cu.stream));
  const double one = 1.0, minus_one = -1.0;
  double worst = 0;
  for (int64_t j = 0; j < nrhs; ++j) {
    CK(cublasDgemv_64(cu.blas, CUBLAS_OP_N, n, n, &one, d_a, n, d_x + j * n, 1, &minus_one,
                      d_r + j * n, 1));
    int64_t idx = 0;
    CK(cublasIdamax_64(cu.blas, n, d_r + j * n, 1, &idx));  // host pointer mode: synchronous
    double rmax = 0;
    CK(cudaMemcpy(&rmax, d_r + j * n + (idx - 1), sizeof(double), cudaMemcpyDeviceToHost));
    double xn = 0, bn = 0;
    for (int64_t i = 0; i < n; ++i) {
      xn = std::max(xn, std::abs(x[static_cast<size_t>(i + j * n)]));
      bn = std::max(bn, std::abs(b[static_cast<size_t>(i + j * n)]));
    }
    worst = std::max(worst, std::abs(rmax) / (norm_a * xn + bn));
  }
  return worst;
}

// cuSOLVER getrf + getrs with A on the device (copied before each rep, untimed). Adds the
// residual of the engine's solution (engine_x, if not empty) computed by the same routine.
json run_cusolver(Cuda& cu, const std::vector<double>& a, int64_t n, const std::vector<double>& b,
                  int64_t nrhs, int reps, const std::string& api, double norm_a,
                  const std::vector<double>& engine_x) {
  const bool legacy = api == "legacy";
  const uint64_t nn = uint64_t(n) * uint64_t(n);
  const uint64_t a_bytes = 8 * nn;
  const uint64_t side_bytes = 2 * 8 * uint64_t(n) * uint64_t(nrhs) + 8 * uint64_t(n) + 64;
  const uint64_t free_b = device_free_bytes();
  json out = {{"api", legacy ? "cusolverDnDgetrf + cusolverDnDgetrs"
                             : "cusolverDnXgetrf + cusolverDnXgetrs (64-bit)"},
              {"device_free_bytes", free_b}};
  if (legacy && n > INT32_MAX) {
    out["skipped"] = "n above the legacy API's int range; use --cusolver-api 64";
    return out;
  }
  // 256 MiB for cuSOLVER's workspace (tens of MiB at these orders) and the library's own needs.
  if (a_bytes + side_bytes + 256 * ss::kMiB > free_b) {
    out["skipped"] = "A (" + gib(double(a_bytes)) + ") does not fit the device's free memory (" +
                     gib(double(free_b)) + ")";
    return out;
  }
  DeviceArray<double> d_a(nn);
  DeviceArray<double> d_x(static_cast<size_t>(n * nrhs));
  DeviceArray<double> d_r(static_cast<size_t>(n * nrhs));
  DeviceArray<int> d_info(2);
  DeviceArray<int> d_ipiv32(legacy ? static_cast<size_t>(n) : 0);
  DeviceArray<int64_t> d_ipiv64(legacy ? 0 : static_cast<size_t>(n));
  size_t work_bytes = 0, host_work_bytes = 0;
  if (legacy) {
    int lwork = 0;
    CK(cusolverDnDgetrf_bufferSize(cu.solver, int(n), int(n), d_a.p, int(n), &lwork));
    work_bytes = size_t(lwork) * sizeof(double);
  } else {
    CK(cusolverDnXgetrf_bufferSize(cu.solver, cu.params, n, n, CUDA_R_64F, d_a.p, n, CUDA_R_64F,
                                   &work_bytes, &host_work_bytes));
  }
  DeviceArray<char> d_work(work_bytes);
  std::vector<char> h_work(host_work_bytes);
  out["workspace_bytes"] = work_bytes;

  auto getrf = [&](int64_t order) {
    if (legacy) {
      CK(cusolverDnDgetrf(cu.solver, int(order), int(order), d_a.p, int(n),
                          reinterpret_cast<double*>(d_work.p), d_ipiv32.p, d_info.p));
    } else {
      CK(cusolverDnXgetrf(cu.solver, cu.params, order, order, CUDA_R_64F, d_a.p, n, d_ipiv64.p,
                          CUDA_R_64F, d_work.p, work_bytes, h_work.data(), host_work_bytes,
                          d_info.p));
    }
  };
  auto getrs = [&](int64_t order) {
    if (legacy) {
      CK(cusolverDnDgetrs(cu.solver, CUBLAS_OP_N, int(order), int(nrhs), d_a.p, int(n), d_ipiv32.p,
                          d_x.p, int(n), d_info.p + 1));
    } else {
      CK(cusolverDnXgetrs(cu.solver, cu.params, CUBLAS_OP_N, order, nrhs, CUDA_R_64F, d_a.p, n,
                          d_ipiv64.p, CUDA_R_64F, d_x.p, n, d_info.p + 1));
    }
  };
  auto upload = [&] {
    CK(cudaMemcpy(d_a.p, a.data(), a_bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_x.p, b.data(), d_x.bytes(), cudaMemcpyHostToDevice));
  };

  // Warm-up (library initialisation, kernel loading) on the leading block of A.
  upload();
  const int64_t warm = std::min<int64_t>(n, 2048);
  getrf(warm);
  getrs(warm);
  cu.sync();

  double best = 1e300, best_getrf = 0;
  json times = json::array();
  for (int rep = 0; rep < reps; ++rep) {
    upload();
    CK(cudaDeviceSynchronize());
    CK(cudaEventRecord(cu.e0, cu.stream));
    getrf(n);
    CK(cudaEventRecord(cu.e1, cu.stream));
    getrs(n);
    CK(cudaEventRecord(cu.e2, cu.stream));
    CK(cudaEventSynchronize(cu.e2));
    int info[2] = {0, 0};
    CK(cudaMemcpy(info, d_info.p, sizeof(info), cudaMemcpyDeviceToHost));
    if (info[0] != 0 || info[1] != 0) {
      out["error"] =
          "getrf info " + std::to_string(info[0]) + ", getrs info " + std::to_string(info[1]);
      return out;
    }
    const double t = cu.elapsed(cu.e0, cu.e2);
    const double t_getrf = cu.elapsed(cu.e0, cu.e1);
    times.push_back({{"seconds", t}, {"getrf_seconds", t_getrf}});
    note("  cusolver rep %d: getrf + getrs %.3f s (getrf %.3f s, %.2f TFLOP/s)", rep + 1, t,
         t_getrf, factor_flops(n) / t_getrf * 1e-12);
    if (t < best) {
      best = t;
      best_getrf = t_getrf;
    }
  }
  std::vector<double> x(static_cast<size_t>(n * nrhs));
  CK(cudaMemcpy(x.data(), d_x.p, d_x.bytes(), cudaMemcpyDeviceToHost));
  out["reps"] = times;
  out["seconds"] = best;
  out["getrf_seconds"] = best_getrf;
  out["getrs_seconds"] = best - best_getrf;
  out["tflops"] = solve_flops(n, nrhs) / best * 1e-12;
  out["getrf_tflops"] = factor_flops(n) / best_getrf * 1e-12;

  // Residuals on the device against the original A.
  CK(cudaMemcpy(d_a.p, a.data(), a_bytes, cudaMemcpyHostToDevice));
  out["residual"] = device_residual(cu, d_a.p, n, x, b, nrhs, norm_a, d_x.p, d_r.p);
  if (!engine_x.empty()) {
    out["stripesolve_residual_same_routine"] =
        device_residual(cu, d_a.p, n, engine_x, b, nrhs, norm_a, d_x.p, d_r.p);
  }
  return out;
}

// cuBLAS DGEMM C(m x nc) -= A(m x k) B(k x nc), best of reps after one warm-up.
static json run_dgemm(Cuda& cu, const std::string& role, int64_t m, int64_t nc, int64_t k,
                      int reps) {
  json out = {{"role", role}, {"m", m}, {"n", nc}, {"k", k}};
  if (m <= 0 || nc <= 0 || k <= 0) {
    out["skipped"] = "empty shape";
    return out;
  }
  const uint64_t bytes =
      8 * (uint64_t(m) * uint64_t(k) + uint64_t(k) * uint64_t(nc) + uint64_t(m) * uint64_t(nc));
  if (bytes + 256 * ss::kMiB > device_free_bytes()) {
    out["skipped"] = "operands (" + gib(double(bytes)) + ") do not fit the device";
    return out;
  }
  DeviceArray<double> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * nc)),
      c(static_cast<size_t>(m * nc));
  fill_device_random(a.p, a.count, 1);
  fill_device_random(b.p, b.count, 2);
  fill_device_random(c.p, c.count, 3);
  const double alpha = -1.0, beta = 1.0;
  auto gemm = [&] {
    CK(cublasDgemm_64(cu.blas, CUBLAS_OP_N, CUBLAS_OP_N, m, nc, k, &alpha, a.p, m, b.p, k, &beta,
                      c.p, m));
  };
  gemm();
  cu.sync();
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(cu.e0, cu.stream));
    gemm();
    CK(cudaEventRecord(cu.e1, cu.stream));
    CK(cudaEventSynchronize(cu.e1));
    best = std::min(best, cu.elapsed(cu.e0, cu.e1));
  }
  out["seconds"] = best;
  out["tflops"] = 2.0 * double(m) * double(nc) * double(k) / best * 1e-12;
  note("  dgemm %-12s m %lld n %lld k %lld: %.2f TFLOP/s", role.c_str(), (long long)m,
       (long long)nc, (long long)k, out["tflops"].get<double>());
  return out;
}

json dgemm_or_error(Cuda* cu, const std::string& role, int64_t m, int64_t nc, int64_t k, int reps) {
  try {
    return run_dgemm(*cu, role, m, nc, k, reps);
  } catch (const CudaError& e) {
    return {{"role", role}, {"m", m}, {"n", nc}, {"k", k}, {"error", e.what()}};
  }
}

}  // namespace dense_gpu_bench
