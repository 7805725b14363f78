// CPU throughput of the in-RAM stripe driver (factor + solve, 002 Fig 5 order) beside OpenBLAS
// dgetrf + dgetrs on the same matrix, in one run: GFLOP/s (2/3 n^3 + 2 n^2 nrhs flops), the
// ratio to OpenBLAS and the scaled residuals. Best of --reps runs for each.
//
//   bench_dense_cpu [--n 8192] [--stripe-rows 512] [--substripe-rows 64] [--pivot
//   row|local|none|all]
//                   [--reps 1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <lapacke.h>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "stripe/dense_reference.h"
#include "stripe/in_ram_solver.h"

namespace {

using Clock = std::chrono::steady_clock;
using stripesolve::stripe::PivotMode;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: bench_dense_cpu [--n N] [--stripe-rows S] [--substripe-rows S'] "
               "[--pivot row|local|none|all] [--reps R]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 8192;
  int64_t stripe_rows = 512;
  int64_t substripe_rows = 64;
  int reps = 1;
  std::string pivot = "row";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) usage();
    const std::string value = argv[++i];
    if (arg == "--n")
      n = std::stoll(value);
    else if (arg == "--stripe-rows")
      stripe_rows = std::stoll(value);
    else if (arg == "--substripe-rows")
      substripe_rows = std::stoll(value);
    else if (arg == "--pivot")
      pivot = value;
    else if (arg == "--reps")
      reps = std::stoi(value);
    else
      usage();
  }
  std::vector<PivotMode> modes;
  if (pivot == "all") {
    modes = {PivotMode::kRow, PivotMode::kLocal, PivotMode::kNone};
  } else {
    auto mode = stripesolve::backend::parse_pivot_mode(pivot);
    if (!mode.is_ok()) usage();
    modes = {*mode};
  }
  const int64_t nrhs = 1;
  const double flops = 2.0 / 3.0 * n * double(n) * n + 2.0 * n * double(n) * nrhs;
  const auto a = stripesolve::stripe::uniform_matrix(n, n, 42);
  const auto b = stripesolve::stripe::uniform_matrix(n, nrhs, 43);

  nlohmann::json out;
  out["benchmark"] = "dense_cpu_in_ram";
  out["n"] = n;
  out["nrhs"] = nrhs;
  out["stripe_rows"] = stripe_rows;
  out["substripe_rows"] = substripe_rows;
  out["reps"] = reps;

  // Peer: OpenBLAS dgetrf + dgetrs (copy of A made outside the timed region).
  double best_lapack = 1e300;
  double lapack_residual = 0;
  for (int r = 0; r < reps; ++r) {
    std::vector<double> lu = a;
    std::vector<double> x = b;
    std::vector<lapack_int> ipiv(n);
    const auto t0 = Clock::now();
    lapack_int info = LAPACKE_dgetrf(LAPACK_COL_MAJOR, n, n, lu.data(), n, ipiv.data());
    if (info == 0) {
      info = LAPACKE_dgetrs(LAPACK_COL_MAJOR, 'N', n, nrhs, lu.data(), n, ipiv.data(), x.data(), n);
    }
    best_lapack = std::min(best_lapack, seconds_since(t0));
    if (info != 0) {
      std::cerr << "dgetrf/dgetrs failed: info " << info << "\n";
      return 1;
    }
    lapack_residual = stripesolve::stripe::scaled_residual(a.data(), n, x.data(), b.data(), nrhs);
  }
  out["openblas"] = {{"seconds", best_lapack},
                     {"gflops", flops / best_lapack * 1e-9},
                     {"residual", lapack_residual}};

  stripesolve::backend::CpuBackend cpu;
  for (PivotMode mode : modes) {
    double best = 1e300;
    double residual = 0;
    for (int r = 0; r < reps; ++r) {
      std::vector<double> x = b;
      // Timed: the copy into stripe layout, the factorisation and the solve.
      const auto t0 = Clock::now();
      auto solver = stripesolve::stripe::InRamSolver::factor(cpu, a.data(), n, n,
                                                             {stripe_rows, substripe_rows, mode});
      stripesolve::Status st =
          solver.is_ok() ? solver->solve(cpu, x.data(), n, nrhs) : solver.status();
      best = std::min(best, seconds_since(t0));
      if (!st.is_ok()) {
        std::cerr << "stripe solve failed: " << st.to_string() << "\n";
        return 1;
      }
      residual = stripesolve::stripe::scaled_residual(a.data(), n, x.data(), b.data(), nrhs);
    }
    const std::string name = "stripe_" + std::string(stripesolve::backend::pivot_mode_name(mode));
    out[name] = {{"seconds", best},
                 {"gflops", flops / best * 1e-9},
                 {"ratio_to_openblas", best_lapack / best},
                 {"residual", residual}};
  }
  std::cout << out.dump(2) << "\n";
  return 0;
}
