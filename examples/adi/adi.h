// Paper 003's application (§2.2.1, §4.1.1 Algorithm 2): the alternating direction implicit (ADI)
// method, Peaceman-Rachford form, on the paper's test problem, a 2-D diffusion equation with a
// source whose solution is known:
//
//   u_xx + u_yy = 5 e^(x + 2y) on the unit square, u = e^(x + 2y) on its boundary,
//   so u(x, y) = e^(x + 2y) everywhere (the paper's "Cell Solution" of the ghost cells).
//
// G x G inner cells of width h = 1 / (G + 1), the five-point Laplacian. One ADI step (a pseudo
// time step of size 2 h^2 / alpha) is two half steps, each a batch of G independent tridiagonal
// systems of order G (the paper's z, a, b, c of §2.2.1, with a = c = -1 and b = alpha + 2):
//
//   rows    (x implicit): (alpha - d_xx) u*      = (alpha + d_yy) u^k - h^2 f
//   columns (y implicit): (alpha - d_yy) u^(k+1) = (alpha + d_xx) u*  - h^2 f
//
// d_xx, d_yy the unscaled second differences; boundary neighbours move into the right-hand side.
// alpha cycles over `alphas` values spread geometrically between the smallest and largest
// eigenvalue of -d_xx (Peaceman-Rachford with a parameter cycle; a single fixed alpha, as the
// paper uses, converges in O(G) steps instead of O(log G)).
//
// The field is stored row-major, u[j * G + i] at x = (i + 1) h, y = (j + 1) h, so a row system
// is contiguous (batch layout "strided") and a column system has stride G (layout
// "interleaved": element j of system i at j * G + i): neither half step transposes the field
// (the transposition of 003 §4.1.2 is the daemon's layout option).
//
// Error: the discrete solution differs from e^(x + 2y) by at most
// (1/8) (h^2 / 12) (max|u_xxxx| + max|u_yyyy|) = 17 e^3 h^2 / 96 (discrete maximum principle with
// the comparison function x (1 - x) / 2); converged ADI iterates meet it, early ones do not.
// Pure code: no I/O, no threads.
#pragma once

#include <cstdint>
#include <vector>

namespace stripesolve::examples::adi {

// One batch of tridiagonal systems: systems x n values each in the layout the solver is told.
struct TridiagBatch {
  bool interleaved = false;
  int64_t systems = 0, n = 0;
  std::vector<double> dl, d, du, rhs;
};

class PoissonAdi {
 public:
  PoissonAdi(int64_t grid, int alphas, double fixed_alpha = 0);

  int64_t grid() const { return g_; }
  double h() const { return h_; }
  // The alpha of step k (0-based).
  double alpha(int64_t step) const;
  const std::vector<double>& field() const { return u_; }

  // The row systems of step k from the current field (u^k).
  TridiagBatch row_half_step(int64_t step) const;
  // Takes the rows' solution u* (row-major, G x G) and returns the column systems of step k.
  TridiagBatch column_half_step(int64_t step, const std::vector<double>& u_star) const;
  // Takes the columns' solution as u^(k+1); returns max |u^(k+1) - u^k|.
  double finish_step(const std::vector<double>& u_next);

  double exact(int64_t i, int64_t j) const;  // e^(x + 2y) at the inner cell (i, j)
  double max_error() const;                  // max |u - exact| over the inner cells
  double error_bound() const;                // 17 e^3 h^2 / 96

 private:
  double boundary(int64_t i, int64_t j) const;  // exact value; i or j in {-1, G}
  double value(const std::vector<double>& u, int64_t i, int64_t j) const;  // boundary aware
  double source_h2(int64_t i, int64_t j) const;                            // h^2 f

  int64_t g_;
  double h_;
  std::vector<double> alphas_;
  std::vector<double>
      exact_;  // e^(x + 2y) at the inner cells, row-major (exp once per cell, 003 §4.1.1)
  std::vector<double> u_;
};

}  // namespace stripesolve::examples::adi
