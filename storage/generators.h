// Matrix generators: every value is a pure function of (generator, seed, n, row, col), independent
// of stripe height, placement and the order of generation, so tests and refinement can rebuild any
// element of A in RAM.
//
//   uniform        002 §9.1: independent values uniform on [-0.5, 0.5).
//   diag_dominant  uniform, plus n on the diagonal: |a_ii| > sum_{j != i} |a_ij| (strictly
//                  diagonally dominant by rows), safe without pivoting.
//   normal         independent standard normal values (Box-Muller).
//   identity       I.
//   hilbert        1 / (row + col + 1): symmetric positive definite and badly conditioned.
//   gepp_growth    Wilkinson's matrix (also named `wilkinson`): 1 on the diagonal and in the last
//                  column, -1 below the diagonal; partial pivoting grows entries by 2^(n-1).
//   wilkinson_t    its transpose: 1 on the diagonal and in the last row, -1 above the diagonal.
//                  `row` pivoting (GEPP on A^T) meets the growth of 2^(n-1) here (issue 17).
//   graded         uniform, with the leading 64 x 64 block scaled by 1e-14 (hard for `local`).
//   near_singular  uniform, with the last row a copy of the first perturbed by 1e-20: singular
//                  to working precision (issue 17's "x of size 1e15").
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace stripesolve::storage {

struct GeneratorSpec {
  std::string name = "uniform";
  uint64_t seed = 0;
};

const std::vector<std::string>& generator_names();

// OK if `spec.name` is a known generator; else kInvalidArgument listing the known ones.
Status check_generator(const GeneratorSpec& spec);

// Element (row, col) of the n x n matrix; `spec` must have passed check_generator.
double generated_value(const GeneratorSpec& spec, int64_t n, int64_t row, int64_t col);

// Fills out[k] = element number e0 + k of a column-major block of `rows` rows starting at matrix
// row `row0` (element e is (row0 + e % rows, e / rows)), for k < count: the layout of a stripe.
void fill_generated(const GeneratorSpec& spec, int64_t n, int64_t row0, int64_t rows, int64_t e0,
                    int64_t count, double* out);

// The generated right-hand sides of a dense solve (n x nrhs, column-major): "ones", or "uniform"
// on [-0.5, 0.5) from (seed, row, col); kInvalidArgument naming the kind otherwise.
Result<std::vector<double>> generate_rhs(const std::string& kind, int64_t n, int64_t nrhs,
                                         uint64_t seed);

}  // namespace stripesolve::storage
