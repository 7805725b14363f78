// Writes the stability suite (000 Table III/IV) as a Markdown table: relative residual
// ||A x - f||_2 / ||f||_2 (000 Eq 13) of every CPU algorithm beside LAPACK dgtsv, for the 16
// matrix types and issue 17's nearly singular and Toeplitz (1, 1e-8, 1) matrices at n = 512 and
// a large n, and for ragged batches of the last two; each cell says whether the solve fell back
// to gepp or ended with a warning (tridiag.h: the quality check).
// Usage: tridiag_stability_table [large_n] > docs/tridiag-stability.md
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tridiag/gallery.h"
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
    worst = std::max(worst, relative_residual(&b.dl[o], &b.d[o], &b.du[o], x.data(), &b.f[o],
                                              b.sizes[j]));
  }
  return worst;
}

// One row: LAPACK, auto, auto without the stability requirement, then every algorithm as
// requested explicitly (no fallback allowed but spike's). Messages go to `notes`.
void row(const std::string& label, const Batch& b, std::vector<std::string>& notes) {
  const double ref = lapack_residual(b);
  std::printf("| %s | %s |", label.c_str(), std::isnan(ref) ? "singular" : cell(ref).c_str());
  BatchShape shape{BatchLayout::kRagged, 0, 0, b.sizes};
  std::vector<double> x(b.f.size());
  BatchArrays arrays{b.dl.data(), b.d.data(), b.du.data(), b.f.data(), x.data()};
  std::vector<std::pair<std::string, SolveOptions>> runs;
  runs.push_back({"auto", SolveOptions{}});
  SolveOptions unstable;
  unstable.require_stable = false;
  runs.push_back({"auto, unstable ok", unstable});
  for (Algorithm a : all_algorithms()) {
    SolveOptions o;
    o.algorithm = a;
    runs.push_back({std::string(algorithm_name(a)), o});
  }
  for (auto& [name, opt] : runs) {
    opt.threads = 1;
    auto r = solve_batch(shape, arrays, opt);
    if (!r.is_ok()) {
      std::printf(" fails&sup1; |");
      notes.push_back(fmt::format("{}, {}: fails: {}", label, name, r.status().message()));
      continue;
    }
    std::string mark;
    if (!r->fell_back.empty()) mark += fmt::format(" F{}", r->fell_back.size());
    if (!r->warning.empty()) {
      mark += " W";
      notes.push_back(fmt::format("{}, {}: warning: {}", label, name, r->warning));
    }
    std::printf(" %s%s |", cell(max_residual(b, x)).c_str(), mark.c_str());
  }
  std::printf("\n");
}

void header(const char* first) {
  std::printf("| %s | LAPACK dgtsv | auto | auto, unstable ok |", first);
  for (Algorithm a : all_algorithms()) std::printf(" %s |", std::string(algorithm_name(a)).c_str());
  std::printf("\n|---|---|---|---|");
  for (std::size_t i = 0; i < all_algorithms().size(); ++i) std::printf("---|");
  std::printf("\n");
}

void print_notes(const std::vector<std::string>& notes) {
  if (notes.empty()) return;
  std::printf("\n&sup1; Breakdowns (an error instead of a result) and warnings (the result is kept "
              "and reported):\n\n");
  for (const auto& s : notes) std::printf("- %s\n", s.c_str());
}

void table(std::size_t n) {
  std::printf("\n### n = %zu\n\n", n);
  header("type");
  std::vector<std::string> notes;
  for (int type = 1; type <= kToeplitzTiny; ++type) {
    row(std::to_string(type), make_batch(type, {n}), notes);
  }
  print_notes(notes);
}

void ragged_table() {
  // Sizes from 1 to 1000, odd and even, powers of two and not: every algorithm's edge cases.
  const std::vector<std::size_t> sizes = {1, 2, 3, 5, 8, 9, 17, 64, 100, 255, 512, 1000};
  const std::size_t total = std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
  std::printf("\n### Ragged batches: %zu systems of sizes 1 to 1000 (%zu unknowns), the "
              "largest relative residual\n\n", sizes.size(), total);
  header("type");
  std::vector<std::string> notes;
  row(std::to_string(kNearSingular), make_batch(kNearSingular, sizes), notes);
  row(std::to_string(kToeplitzTiny), make_batch(kToeplitzTiny, sizes), notes);
  print_notes(notes);
}

}  // namespace

int main(int argc, char** argv) {
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
      "breakdown and is kept with a warning (the daemon's job then ends COMPLETED_WITH_WARNING). A breakdown "
      "without fallback is an error. No cell is a plain result above the tolerance. The "
      "messages are listed under each table. The default is within 10x of LAPACK on every "
      "type where LAPACK's result is finite (GalleryTest holds it there).\n\n"
      "This table is the CPU's. The GPU kernels (tridiag/cuda) do not check their results "
      "themselves; the daemon checks a GPU solve's systems on the CPU afterwards with the same "
      "rule (`tridiag::check_solution`: systems above the tolerance solved again with gepp under "
      "auto, spike or `--fallback`, else a warning). The GPU table, and what that check costs "
      "beside the GPU's solve, are for a session with a GPU.\n\n",
      large);
  std::printf("| type | matrix |\n|---|---|\n");
  for (int t = 1; t <= kStabilityTypes; ++t) {
    std::printf("| %d | %s |\n", t, std::string(stability_matrix_description(t)).c_str());
  }
  std::printf("| %d | nearly singular: U(-1,1), the last diagonal entry moved so that the last "
              "unpivoted pivot is 1e-13 (tridiag::near_singular_matrix) |\n", kNearSingular);
  std::printf("| %d | Toeplitz (1, 1e-8, 1) (issue 17) |\n", kToeplitzTiny);
  std::printf(
      "\nFor n > 512 the randsvd types (8-11) are block diagonal with copies of the 512 x 512 "
      "randsvd matrix (the dense construction is O(n^3)); type 4 scales sub-diagonal element "
      "256.\n");
  table(512);
  ragged_table();
  table(large);
  return 0;
}
