// GPU tridiagonal throughput beside cuSPARSE (gtsv2, gtsv2_nopivot, gtsv2StridedBatch,
// gtsvInterleavedBatch) on the same data in one run, as unknowns/s and as a fraction of the HBM
// roofline: 40 bytes per unknown (dl, d, du, f read, x written) / time / the bandwidth of a
// device-to-device copy measured in the same run. Kernel times only (data resident on the
// device), best of `reps`; each result's relative residual is checked on the host.
// Our kernels' results also carry the device quality check's cost on the same data: the solve
// as every solve_batch_gpu runs it (gpu::prepare_check, the solve, whose one-pass kernels check
// each system as they write x, gpu::check_on_device) less the solve alone (check_seconds and
// its fraction of the solve), and section 4 times solve_batch_gpu end to end (transfers, check and
// all) on the ADI example's batch, 1024 systems of 1024, with the report's check_seconds. Usage:
// tridiag_gpu_bench [log2_unknowns = 26] [reps = 5] [quick [n] | interleaved [n,...] |
// gepp [n,...] | reduction]  -> JSON on stdout. quick: only ours on the one system, and the
// strided batches, spike and thomas beside gtsv2StridedBatch (a few seconds, for iterating on the
// kernels; the full run takes minutes); with n, only strided batches of n (for profiling one
// kernel configuration). interleaved: the interleaved batches only, with gepp's kernel variants
// each timed alone; gepp: of those only gepp, its variants and gtsvInterleavedBatch lu_pivoting
// on the random batches (about a third of interleaved's time a size, for sweeping sizes).
// reduction: the quick run's diagonally dominant batches with cr, pcr and their hybrids.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <cusparse.h>
#include <nlohmann/json.hpp>

#include "bench/common/cuda_timing.h"
#include "bench/tridiag/gpu_bench_data.h"
#include "tridiag/cuda/device_solve.h"
#include "tridiag/cuda/interleaved_gepp.cuh"
#include "tridiag/cuda/quality_check.h"
#include "tridiag/gallery.h"
#include "tridiag/gpu.h"

using namespace stripesolve::tridiag;
using stripesolve::Status;
using Clock = std::chrono::steady_clock;

using namespace tridiag_gpu_bench;

int main(int argc, char** argv) {
  const int log2_rows = argc > 1 ? std::atoi(argv[1]) : 26;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const bool reduction = argc > 3 && std::string(argv[3]) == "reduction";
  const bool gepp_only = argc > 3 && std::string(argv[3]) == "gepp";
  const bool interleaved_only = gepp_only || (argc > 3 && std::string(argv[3]) == "interleaved");
  const bool quick = reduction || (argc > 3 && std::string(argv[3]) == "quick");
  // Sizes given as n or n1,n2,... (interleaved and gepp); quick takes one.
  std::vector<std::size_t> only_sizes;
  if ((quick || interleaved_only) && argc > 4) {
    const std::string list = argv[4];
    for (std::size_t at = 0; at < list.size();) {
      const std::size_t comma = std::min(list.find(',', at), list.size());
      only_sizes.push_back(std::stoull(list.substr(at, comma - at)));
      at = comma + 1;
    }
  }
  const std::size_t only_n = only_sizes.empty() ? 0 : only_sizes.front();
  const std::size_t rows = std::size_t{1} << log2_rows;
  nlohmann::json out;
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  out["device"] = prop.name;
  out["unknowns"] = rows;
  // Roofline: device-to-device copy of 1 GiB, bytes read + written.
  {
    const std::size_t bytes = std::size_t{1} << 30;
    void *a, *b;
    CHECK_CUDA(cudaMalloc(&a, bytes));
    CHECK_CUDA(cudaMalloc(&b, bytes));
    CHECK_CUDA(cudaMemset(a, 1, bytes));
    const double s = best_time(
        reps, [] {}, [&] { CHECK_CUDA(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice)); });
    out["copy_bandwidth_bytes_per_s"] = 2.0 * bytes / s;
    cudaFree(a);
    cudaFree(b);
  }
  const double bw = out["copy_bandwidth_bytes_per_s"];
  cusparseHandle_t h;
  CHECK_SPARSE(cusparseCreate(&h));
  Dev dev;
  dev.alloc(rows);
  void* ws = nullptr;
  std::size_t ws_size = 0;
  auto ensure_ws = [&](std::size_t bytes) {
    if (bytes <= ws_size) return;
    if (ws) cudaFree(ws);
    CHECK_CUDA(cudaMalloc(&ws, bytes));
    ws_size = bytes;
  };
  void* check_ws = nullptr;
  std::size_t check_ws_size = 0;
  auto ensure_check_ws = [&](BatchLayout layout, std::size_t count) {
    const std::size_t check_bytes = gpu::check_workspace_bytes(layout, count);
    if (check_bytes <= check_ws_size) return;
    if (check_ws) cudaFree(check_ws);
    CHECK_CUDA(cudaMalloc(&check_ws, check_bytes));
    check_ws_size = check_bytes;
  };
  // The solve's time and (ours) the device check's after it, in seconds.
  struct Timing {
    double solve = NAN;
    double check = NAN;
  };
  auto record = [&](nlohmann::json& into, const std::string& name, Timing t, double res) {
    const double s = t.solve;
    nlohmann::json r;
    r["seconds"] = s;
    r["unknowns_per_s"] = rows / s;
    r["roofline_fraction"] = 40.0 * rows / s / bw;
    r["max_relative_residual"] = res;
    char check[64] = "";
    if (!std::isnan(t.check)) {
      r["check_seconds"] = t.check;
      r["check_fraction_of_solve"] = t.check / s;
      std::snprintf(check, sizeof check, "  check %.1f us (+%.1f%%)", t.check * 1e6,
                    100.0 * t.check / s);
    }
    into[name] = r;
    std::fprintf(stderr, "%-40s %8.2f G unknowns/s  %5.1f%% roofline  residual %.2e%s\n",
                 name.c_str(), rows / s / 1e9, 100.0 * 40.0 * rows / s / bw, res, check);
  };
  // Ours: call it before residual() reads dev.x (not as an argument beside it: the order in
  // which a call's arguments run is unspecified, and GCC runs them right to left).
  auto ours = [&](Algorithm alg, BatchLayout layout, std::size_t n, std::size_t count) -> Timing {
    const std::size_t bytes = gpu::workspace_bytes(alg, layout, rows, n);
    ensure_ws(bytes);
    gpu::DeviceBatch b{{dev.dl, dev.d, dev.du, dev.f, dev.x},
                       rows,
                       layout == BatchLayout::kStrided ? n : 0,
                       count};
    Status st;
    const double s = best_time(
        reps, [] {},
        [&] {
          Status r = gpu::solve_device(alg, layout, b, ws, ws_size, 2.220446049250313e-16, nullptr);
          if (!r.is_ok()) st = r;
        });
    if (!st.is_ok()) {
      std::fprintf(stderr, "%s: %s\n", std::string(algorithm_name(alg)).c_str(),
                   st.to_string().c_str());
      return {};
    }
    ensure_check_ws(layout, count);
    // The solve as solve_batch_gpu runs it: the check's state, the solve (whose one-pass kernels
    // check every system as they go), the rest of the check; its cost is the difference.
    gpu::DeviceCheck found;
    const double checked = best_time(
        reps, [] {},
        [&] {
          stripesolve::Result<gpu::CheckTarget> target =
              gpu::prepare_check(layout, count, n, check_ws, check_ws_size, nullptr);
          if (!target.is_ok()) {
            st = target.status();
            return;
          }
          Status r = gpu::solve_device(alg, layout, b, ws, ws_size, 2.220446049250313e-16, nullptr,
                                       &*target);
          if (r.is_ok()) {
            r = gpu::check_on_device(layout, b, count, nullptr, check_ws, check_ws_size, nullptr,
                                     found, &*target);
          }
          if (!r.is_ok()) st = r;
        });
    if (!st.is_ok()) std::fprintf(stderr, "check: %s\n", st.to_string().c_str());
    const double c = checked - s;
    return {s, st.is_ok() ? c : NAN};
  };
  // 1. One random system, stable solvers (quick: ours only).
  if (only_n == 0 && !reduction && !interleaved_only) {
    nlohmann::json c;
    TridiagonalMatrix m = stability_matrix(1, rows, 21);
    std::vector<double> f = random_vector(rows, 22);
    dev.upload(m, f);
    {
      const Timing t = ours(Algorithm::kSpike, BatchLayout::kStrided, rows, 1);
      record(c, "stripesolve spike", t, residual(m, f, dev.x, rows, false, 1));
    }
    {
      const Timing t = ours(Algorithm::kThomas, BatchLayout::kStrided, rows, 1);
      record(c, "stripesolve thomas (unpivoted)", t, residual(m, f, dev.x, rows, false, 1));
    }
    if (!quick) {
      const int mi = static_cast<int>(rows);
      std::size_t bsize = 0;
      CHECK_SPARSE(
          cusparseDgtsv2_bufferSizeExt(h, mi, 1, dev.dl, dev.d, dev.du, dev.x, mi, &bsize));
      ensure_ws(bsize);
      auto reset = [&] {
        CHECK_CUDA(cudaMemcpy(dev.x, dev.f, rows * 8, cudaMemcpyDeviceToDevice));
      };
      double s = best_time(reps, reset, [&] {
        CHECK_SPARSE(cusparseDgtsv2(h, mi, 1, dev.dl, dev.d, dev.du, dev.x, mi, ws));
      });
      record(c, "cusparse gtsv2", Timing{s}, residual(m, f, dev.x, rows, false, 1));
      CHECK_SPARSE(
          cusparseDgtsv2_nopivot_bufferSizeExt(h, mi, 1, dev.dl, dev.d, dev.du, dev.x, mi, &bsize));
      ensure_ws(bsize);
      s = best_time(reps, reset, [&] {
        CHECK_SPARSE(cusparseDgtsv2_nopivot(h, mi, 1, dev.dl, dev.d, dev.du, dev.x, mi, ws));
      });
      record(c, "cusparse gtsv2_nopivot", Timing{s}, residual(m, f, dev.x, rows, false, 1));
    }
    out["one_random_system"] = c;
  }
  // 2. Strided batches, random (stable) and diagonally dominant (unpivoted).
  nlohmann::json batches = nlohmann::json::array();
  std::vector<std::size_t> sizes = {256, 1024, 4096};
  if (only_n != 0) sizes = quick ? std::vector<std::size_t>{only_n} : only_sizes;
  if (interleaved_only && only_n == 0) sizes = {16, 32, 64, 128, 256, 1024, 4096, 16384};
  for (std::size_t n : sizes) {
    const std::size_t count = rows / n;
    for (int dominant = reduction ? 1 : 0; dominant < (gepp_only ? 1 : 2); ++dominant) {
      nlohmann::json c;
      c["n"] = n;
      c["systems"] = count;
      c["matrix"] = dominant ? "diagonally dominant" : "random U(-1,1)";
      TridiagonalMatrix m =
          dominant ? diagonally_dominant_matrix(rows, 31) : stability_matrix(1, rows, 31);
      zero_boundaries(m, n);
      std::vector<double> f = random_vector(rows, 32);
      dev.upload(m, f);
      std::vector<Algorithm> algs = {Algorithm::kSpike, Algorithm::kThomas};
      if (dominant && n <= gpu::kMaxReductionSystem && (!quick || reduction)) {
        for (Algorithm a : {Algorithm::kCr, Algorithm::kPcr, Algorithm::kCrPcr,
                            Algorithm::kPcrThomas, Algorithm::kCrPcrThomas})
          algs.push_back(a);
      }
      std::size_t bsize = 0;
      const int ni = static_cast<int>(n), ci = static_cast<int>(count);
      double s = 0;
      if (!interleaved_only) {
        for (Algorithm a : algs) {
          {
            const Timing t = ours(a, BatchLayout::kStrided, n, count);
            record(c, "stripesolve " + std::string(algorithm_name(a)) + " strided", t,
                   residual(m, f, dev.x, n, false, count));
          }
        }
        CHECK_SPARSE(cusparseDgtsv2StridedBatch_bufferSizeExt(h, ni, dev.dl, dev.d, dev.du, dev.x,
                                                              ci, ni, &bsize));
        ensure_ws(bsize);
        auto reset = [&] {
          CHECK_CUDA(cudaMemcpy(dev.x, dev.f, rows * 8, cudaMemcpyDeviceToDevice));
        };
        s = best_time(reps, reset, [&] {
          CHECK_SPARSE(cusparseDgtsv2StridedBatch(h, ni, dev.dl, dev.d, dev.du, dev.x, ci, ni, ws));
        });
        record(c, "cusparse gtsv2StridedBatch", Timing{s}, residual(m, f, dev.x, n, false, count));
      }
      if (quick) {
        batches.push_back(c);
        continue;
      }
      // Interleaved layout: ours (one thread per system) and cuSPARSE's three algorithms.
      std::vector<double> fi = f;
      TridiagonalMatrix mi = interleave(m, n, count, fi);
      dev.upload(mi, fi);
      std::vector<Algorithm> interleaved_algs = {Algorithm::kGepp};
      if (!gepp_only) interleaved_algs = {Algorithm::kSpike, Algorithm::kThomas, Algorithm::kGepp};
      for (Algorithm a : interleaved_algs) {
        {
          const Timing t = ours(a, BatchLayout::kInterleaved, n, count);
          record(c, "stripesolve " + std::string(algorithm_name(a)) + " interleaved", t,
                 residual(m, f, dev.x, n, true, count));
        }
      }
      // gepp's kernel variants alone (interleaved_gepp.cuh; the launch's own choice is above).
      if (interleaved_only) {
        using gpu::GeppKernel;
        unsigned long long* flags = nullptr;
        double* pivot_rows = nullptr;
        CHECK_CUDA(cudaMalloc(&flags, 2 * sizeof(unsigned long long)));
        CHECK_CUDA(cudaMalloc(&pivot_rows, 3 * rows * sizeof(double)));
        const std::pair<GeppKernel, const char*> kernels[] = {
            {GeppKernel::kRowsInRegisters, "rows ahead in registers"},
            {GeppKernel::kRowsInSharedMemory, "rows ahead in shared memory"},
            {GeppKernel::kPivotRowsInDeviceMemory, "pivot rows in device memory"},
            {GeppKernel::kTailInDeviceMemory, "the tail's pivot rows in device memory"},
            {GeppKernel::kRecomputedChunksOf16InRegisters,
             "pivot rows recomputed, chunks of 16 in registers"},
            {GeppKernel::kRecomputedChunksOf32LastOf48,
             "pivot rows recomputed, chunks of 32, the last of 48"},
            {GeppKernel::kTwistedChunksOf32LastOf48,
             "two threads a system from both ends, chunks of 32, the last of 48"}};
        for (const auto& [kernel, what] : kernels) {
          // Their shared memory: the first two hold every pivot row.
          const bool whole_on_chip =
              kernel == GeppKernel::kRowsInRegisters || kernel == GeppKernel::kRowsInSharedMemory;
          if (whole_on_chip && n > (kernel == GeppKernel::kRowsInRegisters ? 64u : 288u)) {
            continue;
          }
          const gpu::InterleavedGepp a{dev.dl, dev.d, dev.du, dev.f,     dev.x,
                                       n,      count, flags,  flags + 1, pivot_rows};
          const double t = best_time(
              reps, [] {}, [&] { gpu::launch_interleaved_gepp(a, kernel, nullptr); });
          CHECK_CUDA(cudaGetLastError());
          const std::string name = std::string("gepp kernel, ") + what;
          record(c, name, Timing{t}, residual(m, f, dev.x, n, true, count));
          // Where it checks inside when named (interleaved_gepp.cuh): the check's cost over the
          // variant alone, as solve_batch_gpu would run it (the separate pass's is on the
          // launch's own line above).
          if (kernel == GeppKernel::kRowsInRegisters ||
              kernel == GeppKernel::kRecomputedChunksOf32LastOf48 ||
              kernel == GeppKernel::kTwistedChunksOf32LastOf48) {
            continue;
          }
          ensure_check_ws(BatchLayout::kInterleaved, count);
          const gpu::DeviceBatch whole{{dev.dl, dev.d, dev.du, dev.f, dev.x}, rows, 0, count};
          bool inside = false;
          Status failed;
          const double checked = best_time(
              reps, [] {},
              [&] {
                auto target = gpu::prepare_check(BatchLayout::kInterleaved, count, n, check_ws,
                                                 check_ws_size, nullptr);
                if (!target.is_ok()) {
                  failed = target.status();
                  return;
                }
                gpu::InterleavedGepp with = a;
                with.check = *target;
                inside = gpu::launch_interleaved_gepp(with, kernel, nullptr);
                target->rows_checked = inside;
                gpu::DeviceCheck found;
                const Status r =
                    gpu::check_on_device(BatchLayout::kInterleaved, whole, count, nullptr, check_ws,
                                         check_ws_size, nullptr, found, &*target);
                if (!r.is_ok()) failed = r;
              });
          if (!failed.is_ok()) std::fprintf(stderr, "check: %s\n", failed.to_string().c_str());
          c[name]["checked_inside_seconds"] = checked;
          c[name]["checked_inside"] = inside;
          std::fprintf(stderr, "  checked %s: %.1f us over the variant alone (+%.1f%%)\n",
                       inside ? "inside" : "apart", (checked - t) * 1e6, 100.0 * (checked - t) / t);
        }
        cudaFree(pivot_rows);
        cudaFree(flags);
      }
      for (int algo : {0, 1, 2}) {
        if (gepp_only && algo != 1) continue;  // lu_pivoting, gepp's peer
        CHECK_SPARSE(cusparseDgtsvInterleavedBatch_bufferSizeExt(h, algo, ni, dev.dl, dev.d, dev.du,
                                                                 dev.x, ci, &bsize));
        ensure_ws(bsize);
        auto reset_all = [&] {
          dev.upload(mi, fi);
          CHECK_CUDA(cudaMemcpy(dev.x, dev.f, rows * 8, cudaMemcpyDeviceToDevice));
        };
        s = best_time(reps, reset_all, [&] {
          CHECK_SPARSE(
              cusparseDgtsvInterleavedBatch(h, algo, ni, dev.dl, dev.d, dev.du, dev.x, ci, ws));
        });
        const char* names[3] = {"thomas", "lu_pivoting", "qr"};
        record(c, std::string("cusparse gtsvInterleavedBatch ") + names[algo], Timing{s},
               residual(m, f, dev.x, n, true, count));
      }
      batches.push_back(c);
    }
  }
  out["strided_batches"] = batches;
  // 3. One system through a small device budget in chunks (000 §IV-B), transfers included.
  if (!quick && !interleaved_only) {
    const std::size_t n = rows;
    TridiagonalMatrix m = stability_matrix(1, n, 41);
    std::vector<double> f = random_vector(n, 42), x(n);
    GpuOptions opt;
    opt.device_memory_budget = std::size_t{2} << 30;
    BatchShape shape{BatchLayout::kStrided, n, 1, {}};
    const auto t0 = Clock::now();
    auto r =
        solve_batch_gpu(shape, {m.dl.data(), m.d.data(), m.du.data(), f.data(), x.data()}, opt);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    nlohmann::json c;
    c["ok"] = r.is_ok();
    c["notes"] = r.is_ok() ? nlohmann::json(r->notes) : nlohmann::json(r.status().to_string());
    c["seconds_with_transfers"] = s;
    c["unknowns_per_s"] = n / s;
    c["relative_residual"] =
        relative_residual(m.dl.data(), m.d.data(), m.du.data(), x.data(), f.data(), n);
    out["chunked_one_system_2GiB_budget"] = c;
  }
  // 4. solve_batch_gpu end to end on the ADI example's batch (1024 systems of 1024, diagonally
  // dominant): copies, solve, the device check and the report, best of reps; check_seconds is
  // the report's (CUDA events around the check).
  if (!interleaved_only) {
    const std::size_t n = 1024, count = 1024;
    TridiagonalMatrix m = diagonally_dominant_matrix(n * count, 51);
    std::vector<double> f = random_vector(n * count, 52), x(n * count);
    const BatchShape shape{BatchLayout::kStrided, n, count, {}};
    nlohmann::json c;
    for (Algorithm a : {Algorithm::kThomas, Algorithm::kSpike}) {
      GpuOptions opt;
      opt.solve.algorithm = a;
      double best = 1e30, check = 0.0;
      bool ok = true;
      for (int r = 0; r < reps + 1 && ok; ++r) {
        const auto t0 = Clock::now();
        auto rep =
            solve_batch_gpu(shape, {m.dl.data(), m.d.data(), m.du.data(), f.data(), x.data()}, opt);
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        ok = rep.is_ok();
        if (!ok) std::fprintf(stderr, "solve_batch_gpu: %s\n", rep.status().to_string().c_str());
        if (ok && r > 0 && s < best) {
          best = s;
          check = rep->check_seconds;
        }
      }
      nlohmann::json e;
      e["ok"] = ok;
      e["seconds_with_transfers"] = best;
      e["check_seconds"] = check;
      e["check_fraction"] = check / best;
      c[std::string(algorithm_name(a))] = e;
      std::fprintf(stderr,
                   "solve_batch_gpu 1024 x 1024 %-8s %8.3f ms, of which the check %.3f ms\n",
                   std::string(algorithm_name(a)).c_str(), best * 1e3, check * 1e3);
    }
    out["solve_batch_gpu_1024_systems_of_1024"] = c;
  }
  if (check_ws) cudaFree(check_ws);
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
