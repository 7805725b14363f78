// The 16 matrix types of the stability suite (000 Table III), built from their definitions,
// including the Matlab gallery matrices lesp, kms (inverse), randsvd (kl = ku = 1), dorr and
// clement, plus the relative residual used to judge a solution (000 Eq 13).
//
// Arrays have length n with dl[0] = du[n-1] = 0. Random entries come from std::mt19937_64
// seeded by `seed`, so a (type, n, seed) triple always gives the same matrix.
// randsvd (types 8-11) is built as Matlab does for n <= 512: a diagonal of the prescribed
// singular values, random orthogonal factors on both sides (Stewart's product of Householder
// reflectors) and a two-sided Householder reduction to tridiagonal form (bandred), O(n^3).
// For n > 512 the n x n dense work is out of reach, so the large matrix is block diagonal with
// copies of the 512 x 512 randsvd matrix (same condition number; zero coupling between blocks).
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace stripesolve::tridiag {

inline constexpr int kStabilityTypes = 16;

struct TridiagonalMatrix {
  std::vector<double> dl, d, du;
};

// type in 1..16 (000 Table III).
TridiagonalMatrix stability_matrix(int type, std::size_t n, std::uint64_t seed);
std::string_view stability_matrix_description(int type);

// A random, strictly diagonally dominant matrix (|d| >= |dl| + |du| + 1) and U(-1, 1) vectors.
TridiagonalMatrix diagonally_dominant_matrix(std::size_t n, std::uint64_t seed);
std::vector<double> random_vector(std::size_t n, std::uint64_t seed);

// Toeplitz (sub, diag, super): toeplitz_matrix(n, 1, 1e-8, 1) is issue 17's case, on which
// elimination without pivoting grows by 1e8 at each step.
TridiagonalMatrix toeplitz_matrix(std::size_t n, double sub, double diag, double super);
// A U(-1,1) matrix whose last diagonal entry is moved so that the last pivot of elimination
// without pivoting is delta * max(1, |off-diagonals of the last row|): singular but for delta,
// condition about 1 / delta (n = 1: d = delta). The leading blocks stay as random as type 1's.
TridiagonalMatrix near_singular_matrix(std::size_t n, std::uint64_t seed, double delta = 1e-13);

// ||A x - f||_2 / ||f||_2 in long double; +inf when x has a non-finite entry.
double relative_residual(const double* dl, const double* d, const double* du, const double* x,
                         const double* f, std::size_t n);

// `count` systems of n rows moved from v in strided order (element i of system j at j * n + i)
// to `out` in interleaved order (at i * count + j), or back.
inline void interleave(const double* v, std::size_t n, std::size_t count, double* out,
                       bool back = false) {
  for (std::size_t j = 0; j < count; ++j) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t strided = j * n + i, interleaved = i * count + j;
      if (back) {
        out[strided] = v[interleaved];
      } else {
        out[interleaved] = v[strided];
      }
    }
  }
}

}  // namespace stripesolve::tridiag
