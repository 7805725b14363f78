// Batches on every GPU of the host against one (issue 19: tridiagonal batches spread over the
// devices): solve_batch_gpus(..., devices) beside solve_batch_gpu on device 0, in the same run, on
// host arrays as the daemon has them (copies, check and fallbacks included), strided and
// interleaved batches of 2^L unknowns, U(-1,1) systems under the stable default. Best of R runs
// each, after a warm-up; JSON on stdout.
// Usage: tridiag_multi_gpu_bench [L=26] [R=5] [n,n,...=64,1024,4096]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/devices.h"
#include "tridiag/gallery.h"
#include "tridiag/gpu.h"
#include "tridiag/tridiag.h"

using namespace stripesolve;
using namespace stripesolve::tridiag;

namespace {

double seconds_of(const BatchShape& shape, const BatchArrays& arrays, int devices, int reps,
                  std::string& failure) {
  double best = 1e30;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<int> all(static_cast<std::size_t>(devices));
    for (int d = 0; d < devices; ++d) all[static_cast<std::size_t>(d)] = d;
    auto report = devices == 1 ? solve_batch_gpu(shape, arrays, {})
                               : solve_batch_gpus(shape, arrays, {}, all);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!report.is_ok()) {
      failure = report.status().to_string();
      return -1;
    }
    if (r > 0) best = std::min(best, s);  // r = 0: warm-up
  }
  return best;
}

std::vector<std::size_t> sizes_of(const char* list) {
  std::vector<std::size_t> out;
  for (const char* p = list; *p != '\0';) {
    out.push_back(std::strtoull(p, nullptr, 10));
    while (*p != '\0' && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int log2 = argc > 1 ? std::atoi(argv[1]) : 26;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::vector<std::size_t> ns = sizes_of(argc > 3 ? argv[3] : "64,1024,4096");
  const int devices = gpu::device_count();
  if (devices < 2) {
    std::fprintf(stderr, "tridiag_multi_gpu_bench: %d CUDA devices; it needs two or more\n",
                 devices);
    return 2;
  }
  const std::size_t unknowns = std::size_t{1} << log2;
  const TridiagonalMatrix a = stability_matrix(1, unknowns, 11);  // U(-1,1)
  const std::vector<double> f = random_vector(unknowns, 12);
  std::vector<double> x(unknowns);
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t n : ns) {
    for (BatchLayout layout : {BatchLayout::kStrided, BatchLayout::kInterleaved}) {
      const BatchShape shape{layout, n, unknowns / n, {}};
      const BatchArrays arrays{a.dl.data(), a.d.data(), a.du.data(), f.data(), x.data()};
      std::string failure;
      const double one = seconds_of(shape, arrays, 1, reps, failure);
      const double all = one < 0 ? -1 : seconds_of(shape, arrays, devices, reps, failure);
      const char* name = layout == BatchLayout::kStrided ? "strided" : "interleaved";
      if (all < 0) {
        std::fprintf(stderr, "%s n=%zu: %s\n", name, n, failure.c_str());
        return 1;
      }
      std::fprintf(stderr, "%-11s n=%-5zu one GPU %.4f s, %d GPUs %.4f s: %.2fx\n", name, n, one,
                   devices, all, one / all);
      rows.push_back({{"layout", name},
                      {"n", n},
                      {"systems", unknowns / n},
                      {"one_gpu_seconds", one},
                      {"all_gpus_seconds", all},
                      {"speedup", one / all}});
    }
  }
  const nlohmann::json out = {
      {"benchmark", "tridiag_multi_gpu"},
      {"what",
       "solve_batch_gpus on every device against solve_batch_gpu on device 0, host "
       "arrays (copies, check and fallbacks included), random U(-1,1) systems, auto"},
      {"unknowns", unknowns},
      {"devices", devices},
      {"reps", reps},
      {"rows", rows}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
