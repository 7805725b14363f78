// Writes the stability suite (000 Table III/IV) as a Markdown table: relative residual
// ||A x - f||_2 / ||f||_2 (000 Eq 13) of every CPU algorithm beside LAPACK dgtsv, for the 16
// matrix types and issue 17's nearly singular and Toeplitz (1, 1e-8, 1) matrices at n = 512 and
// a large n, and for ragged batches of the last two; each cell says whether the solve fell back
// to gepp or ended with a warning (tridiag.h: the quality check). With --gpu, the same table for
// the GPU kernels (solve_batch_gpu) on batches of `systems` systems a type, the marks from the
// GPU path's report (its device check). Every cell without a mark is checked to be within the
// tolerance (each system's backward error); a cell that is not is marked "!" and the program
// exits 1.
// Usage: tridiag_stability_table [large_n] > docs/tridiag-stability.md
//        tridiag_stability_table --gpu [large_n = 2^20] [systems = 64] [large_systems = 4]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tridiag/gallery.h"
#include "tridiag/gpu.h"
#include "tridiag/lapack_reference.h"
#include "tridiag/tridiag.h"

using namespace stripesolve::tridiag;

namespace {

constexpr int kNearSingular = kStabilityTypes + 1;
constexpr int kToeplitzTiny = kStabilityTypes + 2;

std::string cell(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return "Inf";
  return fmt::format("{:.2e}", v);
}

TridiagonalMatrix matrix(int type, std::size_t n, std::uint64_t seed) {
  if (type == kNearSingular) return near_singular_matrix(n, seed);
  if (type == kToeplitzTiny) return toeplitz_matrix(n, 1.0, 1e-8, 1.0);
  return stability_matrix(type, n, seed);
}

// A batch of systems one after another (ragged when the sizes differ).
struct Batch {
  std::vector<std::size_t> sizes;
  std::vector<double> dl, d, du, f;
};

Batch make_batch(int type, const std::vector<std::size_t>& sizes) {
  Batch b;
  b.sizes = sizes;
  for (std::size_t j = 0; j < sizes.size(); ++j) {
    TridiagonalMatrix m = matrix(type, sizes[j], 1000 + type + 31 * j);
    std::vector<double> f = random_vector(sizes[j], 77 + type + 31 * j);
    b.dl.insert(b.dl.end(), m.dl.begin(), m.dl.end());
    b.d.insert(b.d.end(), m.d.begin(), m.d.end());
    b.du.insert(b.du.end(), m.du.begin(), m.du.end());
    b.f.insert(b.f.end(), f.begin(), f.end());
  }
  return b;
}

// The largest relative residual over the batch's systems.
double max_residual(const Batch& b, const std::vector<double>& x) {
  double worst = 0.0;
  for (std::size_t j = 0, o = 0; j < b.sizes.size(); o += b.sizes[j++]) {
    const double r = relative_residual(&b.dl[o], &b.d[o], &b.du[o], &x[o], &b.f[o], b.sizes[j]);
    worst = std::isnan(r) ? INFINITY : std::max(worst, r);
  }
  return worst;
}

double lapack_residual(const Batch& b) {
  std::vector<double> x;
  double worst = 0.0;
  for (std::size_t j = 0, o = 0; j < b.sizes.size(); o += b.sizes[j++]) {
    if (lapack_dgtsv(&b.dl[o], &b.d[o], &b.du[o], &b.f[o], b.sizes[j], x) != 0) return NAN;
    worst = std::max(worst,
                     relative_residual(&b.dl[o], &b.d[o], &b.du[o], x.data(), &b.f[o], b.sizes[j]));
  }
  return worst;
}

// A column of the table: a name and how it solves a batch.
struct Run {
  std::string name;
  std::function<stripesolve::Result<SolveReport>(const BatchShape&, const BatchArrays&)> solve;
};

// Cells without a mark above the tolerance (the check let a bad result through).
int g_unmarked_above_tolerance = 0;

// Whether every system's backward error is within its tolerance.
bool within_tolerance(const Batch& b, const std::vector<double>& x) {
  for (std::size_t j = 0, o = 0; j < b.sizes.size(); o += b.sizes[j++]) {
    const double eta = backward_error(&b.dl[o], &b.d[o], &b.du[o], &x[o], &b.f[o], b.sizes[j]);
    if (!(eta <= backward_error_tolerance(b.sizes[j]))) return false;
  }
  return true;
}

// The CPU's columns: auto, auto without the stability requirement, then every algorithm as
// requested explicitly (no fallback allowed but spike's), one thread.
std::vector<Run> cpu_runs() {
  std::vector<std::pair<std::string, SolveOptions>> options;
  options.push_back({"auto", SolveOptions{}});
  SolveOptions unstable;
  unstable.require_stable = false;
  options.push_back({"auto, unstable ok", unstable});
  for (Algorithm a : all_algorithms()) {
    SolveOptions o;
    o.algorithm = a;
    options.push_back({std::string(algorithm_name(a)), o});
  }
  std::vector<Run> runs;
  for (auto& [name, opt] : options) {
    opt.threads = 1;
    runs.push_back({name, [opt](const BatchShape& shape, const BatchArrays& arrays) {
                      return solve_batch(shape, arrays, opt);
                    }});
  }
  return runs;
}

// The batch's systems as an interleaved batch (row i of system j at i * count + j) solved by
// gepp on the GPU, a thread a system (the GPU's stable choice for that layout), x put back in
// strided order; ragged batches, which that layout cannot hold, are n/a.
stripesolve::Result<SolveReport> solve_interleaved_gepp(const BatchShape& shape,
                                                        const BatchArrays& arrays) {
  if (shape.layout != BatchLayout::kStrided) {
    return stripesolve::Status::unimplemented("an interleaved batch holds systems of one size");
  }
  const std::size_t n = shape.n, count = shape.count, rows = n * count;
  auto interleaved = [&](const double* v) {
    std::vector<double> out(rows);
    interleave(v, n, count, out.data());
    return out;
  };
  const std::vector<double> dl = interleaved(arrays.dl), d = interleaved(arrays.d),
                            du = interleaved(arrays.du), f = interleaved(arrays.f);
  std::vector<double> x(rows);
  GpuOptions g;
  g.solve.algorithm = Algorithm::kGepp;
  auto r = solve_batch_gpu(BatchShape{BatchLayout::kInterleaved, n, count, {}},
                           {dl.data(), d.data(), du.data(), f.data(), x.data()}, g);
  if (r.is_ok()) interleave(x.data(), n, count, arrays.x, /*back=*/true);
  return r;
}

// The GPU's columns: auto (spike), auto without the stability requirement (thomas), then each
// GPU algorithm as requested explicitly (no fallback allowed but spike's).
std::vector<Run> gpu_runs() {
  std::vector<std::pair<std::string, SolveOptions>> options;
  options.push_back({"auto", SolveOptions{}});
  SolveOptions unstable;
  unstable.require_stable = false;
  options.push_back({"auto, unstable ok", unstable});
  for (Algorithm a : {Algorithm::kSpike, Algorithm::kThomas, Algorithm::kCr, Algorithm::kPcr,
                      Algorithm::kCrPcr, Algorithm::kPcrThomas, Algorithm::kCrPcrThomas}) {
    SolveOptions o;
    o.algorithm = a;
    options.push_back({std::string(algorithm_name(a)), o});
  }
  std::vector<Run> runs;
  for (const auto& [name, opt] : options) {
    GpuOptions g;
    g.solve = opt;
    runs.push_back({name, [g](const BatchShape& shape, const BatchArrays& arrays) {
                      return solve_batch_gpu(shape, arrays, g);
                    }});
  }
  runs.push_back({"gepp, interleaved", solve_interleaved_gepp});
  return runs;
}

// One row: LAPACK, then each run. Messages go to `notes`.
void row(const std::string& label, const Batch& b, const std::vector<Run>& runs,
         std::vector<std::string>& notes) {
  const double ref = lapack_residual(b);
  std::printf("| %s | %s |", label.c_str(), std::isnan(ref) ? "singular" : cell(ref).c_str());
  const bool uniform =
      std::all_of(b.sizes.begin(), b.sizes.end(), [&](std::size_t n) { return n == b.sizes[0]; });
  const BatchShape shape = uniform
                               ? BatchShape{BatchLayout::kStrided, b.sizes[0], b.sizes.size(), {}}
                               : BatchShape{BatchLayout::kRagged, 0, 0, b.sizes};
  std::vector<double> x(b.f.size());
  BatchArrays arrays{b.dl.data(), b.d.data(), b.du.data(), b.f.data(), x.data()};
  for (const Run& run : runs) {
    auto r = run.solve(shape, arrays);
    if (r.status().code() == stripesolve::StatusCode::kUnimplemented) {
      std::printf(" n/a |");
      continue;
    }
    if (!r.is_ok()) {
      std::printf(" fails&sup1; |");
      notes.push_back(fmt::format("{}, {}: fails: {}", label, run.name, r.status().message()));
      continue;
    }
    std::string mark;
    for (const std::string& note : r->notes) {
      if (note.starts_with("refined once")) mark += " R";  // the GPU path's refinement
    }
    if (!r->fell_back.empty()) mark += fmt::format(" F{}", r->fell_back.size());
    if (!r->warning.empty()) {
      mark += " W";
      notes.push_back(fmt::format("{}, {}: warning: {}", label, run.name, r->warning));
    }
    if (mark.empty() && !within_tolerance(b, x)) {
      mark = " !";
      ++g_unmarked_above_tolerance;
      notes.push_back(
          fmt::format("{}, {}: a plain result above the tolerance (backward error "
                      "{:.2e} reported)",
                      label, run.name, r->max_backward_error));
    }
    std::printf(" %s%s |", cell(max_residual(b, x)).c_str(), mark.c_str());
  }
  std::printf("\n");
}

void header(const char* first, const std::vector<Run>& runs) {
  std::printf("| %s | LAPACK dgtsv |", first);
  for (const Run& run : runs) std::printf(" %s |", run.name.c_str());
  std::printf("\n|---|---|");
  for (std::size_t i = 0; i < runs.size(); ++i) std::printf("---|");
  std::printf("\n");
}

void print_notes(const std::vector<std::string>& notes) {
  if (notes.empty()) return;
  std::printf(
      "\n&sup1; Breakdowns (an error instead of a result) and warnings (the result is kept "
      "and reported):\n\n");
  for (const auto& s : notes) std::printf("- %s\n", s.c_str());
}

// Every type as a batch of `systems` systems of n (each its own matrix and right-hand side).
void table(std::size_t n, std::size_t systems, const std::vector<Run>& runs) {
  if (systems == 1) {
    std::printf("\n### n = %zu\n\n", n);
  } else {
    std::printf("\n### %zu systems of n = %zu, the largest relative residual\n\n", systems, n);
  }
  header("type", runs);
  std::vector<std::string> notes;
  for (int type = 1; type <= kToeplitzTiny; ++type) {
    row(std::to_string(type), make_batch(type, std::vector<std::size_t>(systems, n)), runs, notes);
  }
  print_notes(notes);
}

void ragged_table(const std::vector<Run>& runs) {
  // Sizes from 1 to 1000, odd and even, powers of two and not: every algorithm's edge cases.
  const std::vector<std::size_t> sizes = {1, 2, 3, 5, 8, 9, 17, 64, 100, 255, 512, 1000};
  const std::size_t total = std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
  std::printf(
      "\n### Ragged batches: %zu systems of sizes 1 to 1000 (%zu unknowns), the "
      "largest relative residual\n\n",
      sizes.size(), total);
  header("type", runs);
  std::vector<std::string> notes;
  row(std::to_string(kNearSingular), make_batch(kNearSingular, sizes), runs, notes);
  row(std::to_string(kToeplitzTiny), make_batch(kToeplitzTiny, sizes), runs, notes);
  print_notes(notes);
}

// The GPU section (--gpu): the same tables for solve_batch_gpu.
int gpu_tables(std::size_t large, std::size_t systems, std::size_t large_systems) {
  if (!gpu_available()) {
    std::fprintf(stderr,
                 "tridiag_stability_table --gpu: no CUDA device (or a build without CUDA)\n");
    return 2;
  }
  std::printf(
      "\n## GPU\n\n"
      "Generated by `build/release/bench/tridiag/tridiag_stability_table --gpu %zu %zu %zu` on "
      "the GPU machine. The same types as strided batches of %zu systems (%zu at n = %zu), each "
      "system its own matrix and right-hand side, solved by solve_batch_gpu: `auto` is spike, "
      "`auto, unstable ok` thomas (with auto's breakdown fallbacks: spike, then gepp on the "
      "CPU); the other columns request that GPU algorithm explicitly, without "
      "SolveOptions::fallback (cr, pcr and their hybrids: strided batches of n <= 4096 only, "
      "`n/a` beyond; ragged batches: spike and thomas); `gepp, interleaved` solves the same "
      "systems as an interleaved batch with gepp, a thread a system, what `auto` runs for that "
      "layout. Each cell is the largest relative "
      "residual over the batch. Every GPU solve checks each system's backward error on the "
      "device against the CPU's tolerance; `R`, `F k` and `W` are the GPU path's report (the "
      "batch refined once on the device, GpuOptions::refine: some system's backward error was "
      "above 1.25 eps; k systems solved again with gepp on the CPU; a kept result with a "
      "warning). No cell is a plain result above the tolerance.\n",
      large, systems, large_systems, systems, large_systems, large);
  const std::vector<Run> runs = gpu_runs();
  table(512, systems, runs);
  ragged_table(runs);
  table(large, large_systems, runs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--gpu") {
    const std::size_t large =
        argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (std::size_t{1} << 20);
    const std::size_t systems = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 64;
    const std::size_t large_systems = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 4;
    const int rc = gpu_tables(large, systems, large_systems);
    return rc != 0 ? rc : (g_unmarked_above_tolerance == 0 ? 0 : 1);
  }
  const std::size_t large = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (std::size_t{1} << 20);
  std::printf("# Tridiagonal stability suite\n\n");
  std::printf(
      "Generated by `build/release/bench/tridiag/tridiag_stability_table %zu > "
      "docs/tridiag-stability.md` (bench/tridiag/stability_table.cc). Relative residual "
      "||A x - f||_2 / ||f||_2 (000 Eq 13) of each CPU algorithm on the 16 matrix types of "
      "000 Table III and issue 17's two (17, 18), beside LAPACK dgtsv (OpenBLAS build) on the "
      "same matrix and right-hand side (f from U(-1,1)). `auto` is what solve_batch runs "
      "without options (stable requested: gepp on the CPU); `auto, unstable ok` is "
      "`--unstable-ok` (thomas on the CPU). The other columns request that algorithm "
      "explicitly, without SolveOptions::fallback. spike uses partitions of 9 rows (8 interior "
      "+ 1 separator), as the GPU kernels do.\n\n"
      "Every solve checks each system's normwise backward error ||f - A x||_inf / (||A||_inf "
      "||x||_inf + ||f||_inf) against max(2, log2(n) / 2) eps (tridiag.h). `F k`: k systems "
      "broke down, nearly broke down (a pivot below sqrt(eps) of its row) or missed that "
      "tolerance and were solved again with gepp (auto, spike, or any algorithm with the "
      "fallback allowed); `W`: the result missed the tolerance or went through a near "
      "breakdown and is kept with a warning (the daemon's job then ends COMPLETED_WITH_WARNING). A "
      "breakdown "
      "without fallback is an error. No cell is a plain result above the tolerance. The "
      "messages are listed under each table. The default is within 10x of LAPACK on every "
      "type where LAPACK's result is finite (GalleryTest holds it there).\n\n"
      "This table is the CPU's. The GPU kernels (tridiag/cuda) check their results on the "
      "device with the same formula, tolerance and rule (systems above the tolerance solved "
      "again with gepp on the CPU under auto, spike or `--fallback`, else a warning); their "
      "table is `tridiag_stability_table --gpu`, run on a machine with a GPU.\n\n",
      large);
  std::printf("| type | matrix |\n|---|---|\n");
  for (int t = 1; t <= kStabilityTypes; ++t) {
    std::printf("| %d | %s |\n", t, std::string(stability_matrix_description(t)).c_str());
  }
  std::printf(
      "| %d | nearly singular: U(-1,1), the last diagonal entry moved so that the last "
      "unpivoted pivot is 1e-13 (tridiag::near_singular_matrix) |\n",
      kNearSingular);
  std::printf("| %d | Toeplitz (1, 1e-8, 1) (issue 17) |\n", kToeplitzTiny);
  std::printf(
      "\nFor n > 512 the randsvd types (8-11) are block diagonal with copies of the 512 x 512 "
      "randsvd matrix (the dense construction is O(n^3)); type 4 scales sub-diagonal element "
      "256.\n");
  const std::vector<Run> runs = cpu_runs();
  table(512, 1, runs);
  ragged_table(runs);
  table(large, 1, runs);
  return g_unmarked_above_tolerance == 0 ? 0 : 1;
}
