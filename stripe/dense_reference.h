// Reference pieces for dense tests and bench/dense (not part of the engine): uniform random
// matrices on [-0.5, 0.5] (002 §9.1), the normwise backward error, and LAPACK dgesv.
#pragma once

#include <cstdint>
#include <vector>

namespace stripesolve::stripe {

// n x m column-major, uniform on [-0.5, 0.5], reproducible from seed.
std::vector<double> uniform_matrix(int64_t rows, int64_t cols, uint64_t seed);

// ||A X - B||_inf / (||A||_inf ||X||_inf + ||B||_inf), the largest over the nrhs columns.
double scaled_residual(const double* a, int64_t n, const double* x, const double* b, int64_t nrhs);

// ||X||_inf (largest |x| over all columns).
double max_abs(const std::vector<double>& x);

// LAPACK dgesv on copies: returns X (n x nrhs) or an empty vector when A is singular.
std::vector<double> lapack_solve(const std::vector<double>& a, int64_t n,
                                 const std::vector<double>& b, int64_t nrhs);

// ||A||_1 and the exact ||A^-1||_1 (LAPACK dgetrf + dgetri on a copy); -1 when A is singular.
// Their product is numpy.linalg.cond(A, 1).
double norm_1(const std::vector<double>& a, int64_t n);
double inverse_norm_1(const std::vector<double>& a, int64_t n);

}  // namespace stripesolve::stripe
