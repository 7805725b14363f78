// Partitioned solvers: SPIKE with diagonal pivoting (000 §II-III) and Bondeli's divide and
// conquer (001 §2.2).
//
// SPIKE here uses the separator form of the partitioning: partition j holds rows
// [j m, (j+1) m) of which the last row is a separator s_j and the others the interior. Given the
// separators, each interior is an independent system
//   A_j x_j = f_j - a_first x(s_{j-1}) e_1 - c_last x(s_j) e_q,
// so x_j = Y_j + (left spike) x(s_{j-1}) + (right spike) x(s_j) (000 Eq 3-7: Y, V, W). Each
// separator row then couples only x(s_{j-1}), x(s_j), x(s_{j+1}): the reduced system is again
// tridiagonal (where 000 Eq 8 is 2x2-block tridiagonal), so it is solved by the same code,
// recursively (000 §II-A, "on-the-fly recursive SPIKE"). The GPU kernels use the same scheme.
#include <algorithm>
#include <cmath>
#include <vector>

#include "tridiag/diagonal_pivoting.h"
#include "tridiag/parallel_for.h"
#include "tridiag/system_solvers.h"

namespace stripesolve::tridiag {

namespace {

// Top and bottom of the interior solution of one partition as affine functions of its two
// separators: first = yf + r x_left + s x_right, last = yl + p x_left + q x_right.
struct PartitionEnds {
  double yf, r, s, yl, p, q;
};

}  // namespace

Status solve_spike(const SystemRef& sys, unsigned threads) {
  const std::size_t n = sys.n;
  const std::size_t m = kSpikePartition;
  if (n <= m) {
    Workspace work;
    return solve_diagonal_pivoting(sys, work);
  }
  const std::size_t parts = (n + m - 1) / m;
  std::vector<double> zl(n), zr(n), piv(n);
  std::vector<std::uint8_t> kinds(n);
  std::vector<PartitionEnds> ends(parts);
  const double* dl = sys.dl;
  const double* du = sys.du;
  // Partition solves: Y into x, the two spikes into zl and zr.
  Status st = parallel_for(parts, threads, 256, [&](std::size_t b, std::size_t e, unsigned) {
    for (std::size_t j = b; j < e; ++j) {
      const std::size_t start = j * m, q = std::min(n, start + m) - start - 1;
      PartitionEnds& pe = ends[j];
      if (q == 0) {
        pe = {0.0, 0.0, 1.0, 0.0, j > 0 ? 1.0 : 0.0, 0.0};
        continue;
      }
      Status fs = dp_factor(dl + start, sys.d + start, du + start, q, piv.data() + start,
                            kinds.data() + start, start);
      if (!fs.is_ok()) return fs.with_context("partition " + std::to_string(j));
      double* y = sys.x + start;
      if (sys.x != sys.f) std::copy(sys.f + start, sys.f + start + q, y);
      double* l = zl.data() + start;
      double* r = zr.data() + start;
      std::fill(l, l + q, 0.0);
      std::fill(r, r + q, 0.0);
      const double a_first = j > 0 ? dl[start] : 0.0;
      const double c_last = du[start + q - 1];
      l[0] = -a_first;
      r[q - 1] = -c_last;
      for (double* v : {y, l, r}) {
        dp_solve(dl + start, du + start, piv.data() + start, kinds.data() + start, q, v);
      }
      pe = {y[0], l[0], r[0], y[q - 1], l[q - 1], r[q - 1]};
    }
    return Status::ok();
  });
  STRIPESOLVE_RETURN_IF_ERROR(st);
  // Reduced system over the separators (saved before x is overwritten, which may alias f).
  std::vector<double> rl(parts), rd(parts), ru(parts), rf(parts), rx(parts);
  for (std::size_t j = 0; j < parts; ++j) {
    const std::size_t s = std::min(n, (j + 1) * m) - 1;
    const double a = s > 0 ? dl[s] : 0.0;
    const double c = j + 1 < parts ? du[s] : 0.0;
    const PartitionEnds& cur = ends[j];
    const PartitionEnds next = j + 1 < parts ? ends[j + 1] : PartitionEnds{0, 0, 0, 0, 0, 0};
    rl[j] = a * cur.p;
    rd[j] = sys.d[s] + a * cur.q + c * next.r;
    ru[j] = c * next.s;
    rf[j] = sys.f[s] - a * cur.yl - c * next.yf;
  }
  SystemRef reduced{{rl.data(), rd.data(), ru.data(), rf.data(), rx.data()}, parts};
  if (Status rs = solve_spike(reduced, parts >= 4096 ? threads : 1); !rs.is_ok()) {
    // Deeper levels already say so; name the reduced system once.
    if (rs.message().rfind("reduced system", 0) == 0) return rs;
    return rs.with_context("reduced system (row i: separator of partition i)");
  }
  // Interiors from their separators.
  st = parallel_for(parts, threads, 256, [&](std::size_t b, std::size_t e, unsigned) {
    for (std::size_t j = b; j < e; ++j) {
      const std::size_t start = j * m, q = std::min(n, start + m) - start - 1;
      const double left = j > 0 ? rx[j - 1] : 0.0, right = rx[j];
      for (std::size_t i = start; i < start + q; ++i) {
        sys.x[i] += left * zl[i] + right * zr[i];
      }
      sys.x[start + q] = right;
    }
    return Status::ok();
  });
  STRIPESOLVE_RETURN_IF_ERROR(st);
  return check_finite("spike", sys.x, n);
}

// 001 §2.2 with blocks of kBondeliBlock rows: per block B_i y_i = d_i, B_i zl_i = e_1,
// B_i zr_i = e_k by Thomas (001 §3.2.2), then the interface system H in the unknowns
// [last_0, first_1, last_1, ..., first_{p-1}] (2p - 2 of them; first_i/last_i are the first and
// last unknowns of block i), made tridiagonal by combining the two equations of each middle
// block, then x_i = y_i - a_first_i last_{i-1} zl_i - c_last_i first_{i+1} zr_i (Eq 8).
Status solve_bondeli(const SystemRef& sys, double tol, Workspace& w) {
  const std::size_t n = sys.n, k = kBondeliBlock;
  const std::size_t p = n / k;
  if (p < 2) {
    Status st = solve_thomas(sys, tol, w);
    if (st.is_ok()) return st;
    return Status::numerical("bondeli: " + st.message());
  }
  auto block_start = [&](std::size_t i) { return i * k; };
  auto block_end = [&](std::size_t i) { return i + 1 == p ? n : (i + 1) * k; };
  w.g.resize(n);
  w.h.resize(n);
  w.p.resize(n);
  double* zl = w.g.data();
  double* zr = w.h.data();
  double* cp = w.p.data();
  if (sys.x != sys.f) std::copy(sys.f, sys.f + n, sys.x);
  double* y = sys.x;
  // Step 1: 3 right-hand sides per block through one Thomas factorisation.
  for (std::size_t i = 0; i < p; ++i) {
    const std::size_t b = block_start(i), e = block_end(i);
    double pc = 0.0, py = 0.0, pl = 0.0, pr = 0.0;
    for (std::size_t r = b; r < e; ++r) {
      const double a = r > b ? sys.dl[r] : 0.0;
      const double c = r + 1 < e ? sys.du[r] : 0.0;
      const double piv = sys.d[r] - a * pc;
      const double scale = std::max({std::abs(a), std::abs(sys.d[r]), std::abs(c)});
      STRIPESOLVE_RETURN_IF_ERROR(check_pivot("bondeli", piv, scale, tol, r));
      pc = c / piv;
      py = (y[r] - a * py) / piv;
      pl = ((r == b ? 1.0 : 0.0) - a * pl) / piv;
      pr = ((r + 1 == e ? 1.0 : 0.0) - a * pr) / piv;
      cp[r] = pc;
      y[r] = py;
      zl[r] = pl;
      zr[r] = pr;
    }
    for (std::size_t r = e - 1; r-- > b;) {
      y[r] -= cp[r] * y[r + 1];
      zl[r] -= cp[r] * zl[r + 1];
      zr[r] -= cp[r] * zr[r + 1];
    }
  }
  // Step 2: the interface system H (size 2p - 2).
  const std::size_t hn = 2 * p - 2;
  for (int j = 0; j < 5; ++j) w.small[j].assign(hn, 0.0);
  double *hl = w.small[0].data(), *hd = w.small[1].data(), *hu = w.small[2].data();
  double *hf = w.small[3].data(), *hx = w.small[4].data();
  for (std::size_t i = 0; i < p; ++i) {
    const std::size_t b = block_start(i), L = block_end(i) - 1;
    const double af = i > 0 ? sys.dl[b] : 0.0;
    const double cl = i + 1 < p ? sys.du[L] : 0.0;
    if (i == 0) {  // last_0 + cl zr[L] first_1 = y[L]
      hd[0] = 1.0;
      hu[0] = cl * zr[L];
      hf[0] = y[L];
    } else if (i + 1 == p) {  // af zl[0] last_{p-2} + first_{p-1} = y[0]
      hl[hn - 1] = af * zl[b];
      hd[hn - 1] = 1.0;
      hf[hn - 1] = y[b];
    } else {
      STRIPESOLVE_RETURN_IF_ERROR(
          check_pivot("bondeli", zr[L], std::max(std::abs(zr[b]), std::abs(zr[L])), tol, L));
      STRIPESOLVE_RETURN_IF_ERROR(
          check_pivot("bondeli", zl[b], std::max(std::abs(zl[b]), std::abs(zl[L])), tol, b));
      const double rr = zr[b] / zr[L], ll = zl[L] / zl[b];
      const std::size_t fi = 2 * i - 1, li = 2 * i;
      hl[fi] = af * (zl[b] - rr * zl[L]);
      hd[fi] = 1.0;
      hu[fi] = -rr;
      hf[fi] = y[b] - rr * y[L];
      hl[li] = -ll;
      hd[li] = 1.0;
      hu[li] = cl * (zr[L] - ll * zr[b]);
      hf[li] = y[L] - ll * y[b];
    }
  }
  SystemRef h{{hl, hd, hu, hf, hx}, hn};
  Status st = solve_thomas(h, tol, w);
  if (!st.is_ok()) return Status::numerical("bondeli: interface system: " + st.message());
  // Step 3: x_i = y_i + the two spikes times their interface values.
  for (std::size_t i = 0; i < p; ++i) {
    const std::size_t b = block_start(i), e = block_end(i);
    const double left = i > 0 ? -sys.dl[b] * hx[2 * i - 2] : 0.0;
    const double right = i + 1 < p ? -sys.du[e - 1] * hx[2 * i + 1] : 0.0;
    for (std::size_t r = b; r < e; ++r) y[r] += left * zl[r] + right * zr[r];
  }
  return check_finite("bondeli", sys.x, n);
}

}  // namespace stripesolve::tridiag
