// The GPU path's refinement step (GpuOptions::refine, tridiag/cuda/refinement.h), with and
// without it in the same run: per system of the stability suite at n = 2^20 (types 1, 4, 5, 8-11,
// the seeds of tridiag_stability_table --gpu) the relative residual beside LAPACK dgtsv's; then
// solve_batch_gpu end to end (host arrays, copies included, best of 3) on batches of 2^26
// unknowns, diagonally dominant and type 1 (U(-1,1)), n = 64, 1024, 16384, and whether the
// step ran. Usage: tridiag_refine_bench (a CUDA device needed).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "tridiag/gallery.h"
#include "tridiag/gpu.h"
#include "tridiag/lapack_reference.h"
#include "tridiag/tridiag.h"

using namespace stripesolve::tridiag;

namespace {

struct Sys {
  std::vector<double> dl, d, du, f;
};

Sys make(int type, std::size_t n, std::size_t count) {
  Sys s;
  for (std::size_t j = 0; j < count; ++j) {
    TridiagonalMatrix m = type == 0 ? diagonally_dominant_matrix(n, 5 + j)
                                    : stability_matrix(type, n, 1000 + type + 31 * j);
    std::vector<double> r = random_vector(n, 77 + type + 31 * j);
    s.dl.insert(s.dl.end(), m.dl.begin(), m.dl.end());
    s.d.insert(s.d.end(), m.d.begin(), m.d.end());
    s.du.insert(s.du.end(), m.du.begin(), m.du.end());
    s.f.insert(s.f.end(), r.begin(), r.end());
  }
  return s;
}

}  // namespace

int main() {
  if (!gpu_available()) {
    std::fprintf(stderr, "tridiag_refine_bench: no CUDA device (or a build without CUDA)\n");
    return 2;
  }
  const std::size_t n = 1u << 20, count = 4;
  for (int type : {1, 4, 5, 8, 9, 10, 11}) {
    Sys s = make(type, n, count);
    BatchShape shape{BatchLayout::kStrided, n, count, {}};
    std::vector<double> x0(s.f.size()), x1(s.f.size());
    GpuOptions off, on;
    off.refine = false;
    auto r0 =
        solve_batch_gpu(shape, {s.dl.data(), s.d.data(), s.du.data(), s.f.data(), x0.data()}, off);
    auto r1 =
        solve_batch_gpu(shape, {s.dl.data(), s.d.data(), s.du.data(), s.f.data(), x1.data()}, on);
    if (!r0.is_ok() || !r1.is_ok()) {
      std::printf("type %d fails\n", type);
      continue;
    }
    std::printf("type %d: notes:", type);
    for (auto& t : r1->notes) std::printf(" [%s]", t.c_str());
    std::printf(" fell back %zu -> %zu\n", r0->fell_back.size(), r1->fell_back.size());
    double worst0 = 0, worst1 = 0;
    for (std::size_t j = 0; j < count; ++j) {
      const std::size_t o = j * n;
      std::vector<double> ref;
      lapack_dgtsv(&s.dl[o], &s.d[o], &s.du[o], &s.f[o], n, ref);
      const double lr = relative_residual(&s.dl[o], &s.d[o], &s.du[o], ref.data(), &s.f[o], n);
      const double a = relative_residual(&s.dl[o], &s.d[o], &s.du[o], &x0[o], &s.f[o], n);
      const double b = relative_residual(&s.dl[o], &s.d[o], &s.du[o], &x1[o], &s.f[o], n);
      worst0 = std::max(worst0, a / lr);
      worst1 = std::max(worst1, b / lr);
      std::printf("  sys %zu: lapack %.2e | off %.2e (%.1fx) | on %.2e (%.1fx)\n", j, lr, a, a / lr,
                  b, b / lr);
    }
    std::printf("  worst ratio to LAPACK: off %.1fx, on %.1fx\n", worst0, worst1);
  }
  // Cost and trigger rate on benchmark-like batches: 2^26 unknowns.
  for (int type : {0, 1}) {
    for (std::size_t m : {64, 1024, 16384}) {
      const std::size_t cnt = (std::size_t{1} << 26) / m;
      Sys s = make(type, m, cnt);
      BatchShape shape{BatchLayout::kStrided, m, cnt, {}};
      std::vector<double> x(s.f.size());
      double best[2] = {1e9, 1e9};
      std::string note;
      for (int rep = 0; rep < 3; ++rep) {
        for (int k = 0; k < 2; ++k) {
          GpuOptions o;
          o.refine = k == 1;
          auto t0 = std::chrono::steady_clock::now();
          auto r = solve_batch_gpu(shape,
                                   {s.dl.data(), s.d.data(), s.du.data(), s.f.data(), x.data()}, o);
          const double t =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          best[k] = std::min(best[k], t);
          if (k == 1 && r.is_ok()) {
            note.clear();
            for (auto& t2 : r->notes)
              if (t2.find("refine") != std::string::npos) note = t2;
            if (rep == 0)
              std::printf("%s n=%zu: max backward error %.2e\n", type == 0 ? "dominant" : "type 1",
                          m, r->max_backward_error);
          }
        }
      }
      std::printf("%s n=%zu x %zu: solve_batch_gpu off %.2f ms, on %.2f ms (%+.1f%%) %s\n",
                  type == 0 ? "dominant" : "type 1", m, cnt, best[0] * 1e3, best[1] * 1e3,
                  (best[1] / best[0] - 1) * 100, note.c_str());
    }
  }
  return 0;
}
