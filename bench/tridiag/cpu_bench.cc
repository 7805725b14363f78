// CPU batch throughput of tridiag::solve_batch beside a loop of LAPACK dgtsv over the same
// batch, and as a fraction of the memory bandwidth measured in the same run (a memcpy loop).
// Usage: tridiag_cpu_bench [total_unknowns_log2 = 23] [threads = 0 (all)]  -> JSON on stdout.
// Bytes counted per unknown: dl, d, du, f read and x written = 40 bytes. Also the throughput of
// the quality check (tridiag::backward_error) alone, one thread: what every solve now includes;
// and the default on the same arrays read as an interleaved batch (row i of system j at
// i * count + j), against the strided one; and gepp's systems one at a time on one thread
// (solve_gepp and the check per system, the batch path before it solved kGeppLanes systems at
// once).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tridiag/gallery.h"
#include "tridiag/system_solvers.h"
#include "tridiag/tridiag.h"

extern "C" void dgtsv_(const int* n, const int* nrhs, double* dl, double* d, double* du, double* b,
                       const int* ldb, int* info);

using namespace stripesolve::tridiag;
using Clock = std::chrono::steady_clock;

namespace {

template <typename F>
double best_seconds(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int log2_total = argc > 1 ? std::atoi(argv[1]) : 23;
  const unsigned threads = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 0;
  const std::size_t total = std::size_t{1} << log2_total;
  const int reps = 5;
  nlohmann::json out;
  out["total_unknowns"] = total;
  out["threads"] = threads;
  // Memory bandwidth: copy a buffer as large as the five arrays of the batch.
  {
    std::vector<double> src(total * 5 / 2, 1.0), dst(total * 5 / 2, 0.0);
    const double s =
        best_seconds(reps, [&] { std::memcpy(dst.data(), src.data(), src.size() * 8); });
    out["memcpy_bytes_per_s"] = 2.0 * static_cast<double>(src.size()) * 8.0 / s;  // read + write
  }
  const double bandwidth = out["memcpy_bytes_per_s"];
  nlohmann::json cases = nlohmann::json::array();
  for (std::size_t n : {std::size_t{256}, std::size_t{1024}, std::size_t{4096}, total}) {
    const std::size_t count = total / n;
    TridiagonalMatrix m = stability_matrix(1, total, 7);  // random: pivoting happens
    TridiagonalMatrix dd = diagonally_dominant_matrix(total, 9);
    std::vector<double> f = random_vector(total, 11), x(total);
    nlohmann::json c;
    c["n"] = n;
    c["systems"] = count;
    // LAPACK dgtsv, one system after another (it overwrites its inputs, so copies are made into
    // cache-resident scratch per system, as a caller keeping its data must).
    std::vector<double> sl(n), sd(n), su(n), sb(n);
    auto lapack_loop = [&](const TridiagonalMatrix& a) {
      const int ni = static_cast<int>(n), one = 1;
      int info = 0;
      for (std::size_t j = 0; j < count; ++j) {
        const std::size_t o = j * n;
        std::memcpy(sl.data(), a.dl.data() + o + 1, (n - 1) * sizeof(double));
        std::memcpy(sd.data(), a.d.data() + o, n * sizeof(double));
        std::memcpy(su.data(), a.du.data() + o, (n - 1) * sizeof(double));
        std::memcpy(sb.data(), f.data() + o, n * sizeof(double));
        dgtsv_(&ni, &one, sl.data(), sd.data(), su.data(), sb.data(), &ni, &info);
        std::memcpy(x.data() + o, sb.data(), n * sizeof(double));
      }
    };
    const double lapack_s = best_seconds(reps, [&] { lapack_loop(m); });
    c["lapack_dgtsv_loop_unknowns_per_s"] = total / lapack_s;
    nlohmann::json algs;
    for (Algorithm alg : {Algorithm::kAuto, Algorithm::kThomas, Algorithm::kCr, Algorithm::kPcr,
                          Algorithm::kCrPcr, Algorithm::kPcrThomas, Algorithm::kCrPcrThomas,
                          Algorithm::kBondeli, Algorithm::kSpike, Algorithm::kGepp}) {
      const bool pivoting = alg == Algorithm::kAuto || is_pivoting(alg);
      const TridiagonalMatrix& a = pivoting ? m : dd;      // unpivoted ones on dominant matrices
      if (alg == Algorithm::kPcr && n == total) continue;  // O(n log n) on one huge system
      SolveOptions opt;
      opt.algorithm = alg;
      opt.threads = threads;
      BatchShape shape{BatchLayout::kStrided, n, count, {}};
      BatchArrays arrays{a.dl.data(), a.d.data(), a.du.data(), f.data(), x.data()};
      bool ok = true;
      const double s =
          best_seconds(reps, [&] { ok = ok && solve_batch(shape, arrays, opt).is_ok(); });
      nlohmann::json r;
      r["matrix"] = pivoting ? "random U(-1,1)" : "diagonally dominant";
      r["ok"] = ok;
      r["unknowns_per_s"] = total / s;
      r["speedup_vs_lapack_loop"] = lapack_s / s;
      r["bandwidth_fraction"] = 40.0 * total / s / bandwidth;
      algs[std::string(algorithm_name(alg))] = r;
    }
    if (count > 1) {  // the default on the arrays as an interleaved batch
      SolveOptions opt;
      opt.threads = threads;
      const BatchShape shape{BatchLayout::kInterleaved, n, count, {}};
      const BatchArrays arrays{m.dl.data(), m.d.data(), m.du.data(), f.data(), x.data()};
      bool ok = true;
      const double s =
          best_seconds(reps, [&] { ok = ok && solve_batch(shape, arrays, opt).is_ok(); });
      const double strided = algs[std::string(algorithm_name(Algorithm::kAuto))]["unknowns_per_s"];
      nlohmann::json r;
      r["ok"] = ok;
      r["unknowns_per_s"] = total / s;
      r["speedup_vs_lapack_loop"] = lapack_s / s;
      r["fraction_of_strided"] = total / s / strided;
      c["auto_interleaved"] = r;
    }
    if (count > 1) {  // gepp and its check one system at a time, one thread
      Workspace work;
      bool ok = true;
      const double s = best_seconds(reps, [&] {
        for (std::size_t j = 0; j < count; ++j) {
          const std::size_t o = j * n;
          const SystemRef sys{
              {m.dl.data() + o, m.d.data() + o, m.du.data() + o, f.data() + o, x.data() + o}, n};
          ok = ok && solve_gepp(sys, work).is_ok() &&
               backward_error(sys.dl, sys.d, sys.du, sys.x, sys.f, n) >= 0.0;
        }
      });
      nlohmann::json r;
      r["ok"] = ok;
      r["unknowns_per_s"] = total / s;
      r["speedup_vs_lapack_loop"] = lapack_s / s;
      c["gepp_one_system_at_a_time_1_thread"] = r;
    }
    // The quality check alone (tridiag.h): one backward_error pass per system, single thread,
    // on the solution just computed; solve_batch runs it inside every solve above.
    const double check_s = best_seconds(reps, [&] {
      double sink = 0.0;
      for (std::size_t j = 0; j < count; ++j) {
        const std::size_t o = j * n;
        sink += backward_error(m.dl.data() + o, m.d.data() + o, m.du.data() + o, x.data() + o,
                               f.data() + o, n);
      }
      if (sink < 0) std::printf("impossible\n");
    });
    c["backward_error_check_unknowns_per_s"] = total / check_s;
    c["algorithms"] = algs;
    cases.push_back(c);
  }
  out["cases"] = cases;
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
