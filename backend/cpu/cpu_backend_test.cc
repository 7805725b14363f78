#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/critical_helpers.h"
#include "stripe/dense_reference.h"

namespace stripesolve::backend {
namespace {

using stripe::uniform_matrix;

// The operands of a BlockUpdate, random: U (k x cols, its diagonal raised by `boost` so that the
// triangular solve is well conditioned) and T (t_rows x cols).
struct UpdateOperands {
  int64_t k, cols, t_rows;
  std::vector<double> u, t;

  UpdateOperands(int64_t k_, int64_t cols_, int64_t t_rows_, double boost)
      : k(k_),
        cols(cols_),
        t_rows(t_rows_),
        u(uniform_matrix(k, cols, 1)),
        t(uniform_matrix(t_rows, cols, 2)) {
    for (int64_t i = 0; i < k; ++i) u[i + i * k] += boost;
  }
  // The update by U of `target`, a t_rows x cols block (a copy of t).
  BlockUpdate of(std::vector<double>& target) const {
    return BlockUpdate{u.data(), k, k, cols, target.data(), t_rows, t_rows};
  }
};

// Checks panel * Q = L * U (kRow) or P * panel = L * U (kLocal, kNone) on a p x m panel that is
// a whole part (block_col = 0, panel_row = 0, rows = p).
double factor_error(const std::vector<double>& original, const std::vector<double>& lu,
                    const std::vector<int64_t>& swaps, int64_t p, int64_t m, PivotMode mode) {
  std::vector<double> a = original;
  for (int64_t k = 0; k < p; ++k) {
    if (swaps[k] == k) continue;
    if (mode == PivotMode::kRow) {
      for (int64_t r = 0; r < p; ++r) std::swap(a[r + k * p], a[r + swaps[k] * p]);
    } else {
      for (int64_t c = 0; c < m; ++c) std::swap(a[k + c * p], a[swaps[k] + c * p]);
    }
  }
  double worst = 0;
  for (int64_t r = 0; r < p; ++r) {
    for (int64_t c = 0; c < m; ++c) {
      double s = 0;
      for (int64_t q = 0; q <= std::min(r, c); ++q) {
        const double l = q == r ? 1.0 : lu[r + q * p];
        s += l * lu[q + c * p];
      }
      worst = std::max(worst, std::abs(s - a[r + c * p]));
    }
  }
  return worst;
}

TEST(CpuBackend, PanelFactorReproducesThePanel) {
  CpuBackend cpu;
  const int64_t p = 9;
  const int64_t m = 23;
  for (auto mode : {PivotMode::kRow, PivotMode::kLocal, PivotMode::kNone}) {
    const auto original = uniform_matrix(p, m, 3);
    auto lu = original;
    std::vector<int64_t> swaps(p);
    PanelFactor op{lu.data(), p, p, m, 0, 0, p, mode, swaps.data(), 100};
    ASSERT_TRUE(cpu.can_implement(op).is_ok());
    std::vector<std::byte> ws(cpu.workspace_size(op).host_bytes + 64);
    ASSERT_TRUE(cpu.run(op, {ws.data(), ws.size(), nullptr, 0}).is_ok());
    for (int64_t k = 0; k < p; ++k) {
      EXPECT_GE(swaps[k], k);
      EXPECT_LT(swaps[k], mode == PivotMode::kRow ? m : p);
    }
    EXPECT_LE(factor_error(original, lu, swaps, p, m, mode), 1e-13) << pivot_mode_name(mode);
    if (mode == PivotMode::kRow) {
      // GEPP on the transpose: every multiplier is at most 1 in magnitude... of U's row: |U_kk|
      // is the largest of its row.
      for (int64_t r = 0; r < p; ++r) {
        for (int64_t c = r; c < m; ++c) EXPECT_LE(std::abs(lu[r + c * p]), std::abs(lu[r + r * p]));
      }
    }
  }
}

TEST(CpuBackend, PanelFactorNamesTheGlobalRowOfAZeroPivot) {
  CpuBackend cpu;
  std::vector<double> a = {0, 1, 0, 1, 0, 1};  // 2 x 3, first row zero
  std::vector<int64_t> swaps(2);
  std::vector<std::byte> ws(256);
  PanelFactor op{a.data(), 2, 2, 3, 0, 0, 2, PivotMode::kRow, swaps.data(), 1234};
  EXPECT_EQ(cpu.run(op, {ws.data(), ws.size(), nullptr, 0}),
            Status::numerical("zero pivot at row 1234"));
  a = {1, 2, std::nan(""), 1, 0, 0};
  op.mode = PivotMode::kNone;
  EXPECT_EQ(cpu.run(op, {ws.data(), ws.size(), nullptr, 0}),
            Status::numerical("non-finite pivot at row 1235"));
}

TEST(CpuBackend, RejectsBadShapesAndSmallWorkspace) {
  CpuBackend cpu;
  std::vector<double> a(12, 1.0);
  std::vector<int64_t> swaps(4);
  PanelFactor op{a.data(), 2, 3, 4, 0, 0, 1, PivotMode::kRow, swaps.data(), 0};
  EXPECT_EQ(cpu.can_implement(op), Status::invalid_argument("panel factor: ld 2 < rows 3"));
  op = PanelFactor{a.data(), 3, 3, 4, 2, 0, 1, PivotMode::kRow, swaps.data(), 0};
  EXPECT_EQ(cpu.can_implement(op),
            Status::invalid_argument(
                "panel factor: diagonal block at column 2 of 3 rows does not fit 4 columns"));
  op.block_col = 0;
  EXPECT_EQ(cpu.run(op, {}), Status::invalid_argument(
                                 "workspace too small: need 40 host + 0 device bytes, got 0 + 0"));
}

// T <- T * triu(U)^-1 then T_right -= T_left * U_right, against a naive loop.
TEST(CpuBackend, BlockUpdateMatchesNaiveElimination) {
  CpuBackend cpu;
  const UpdateOperands op(6, 15, 5, 3.0);
  const auto& [k, cols, t_rows, u, t0] = op;
  auto t = t0;
  ASSERT_TRUE(cpu.run(op.of(t), {}).is_ok());
  // Naive: eliminate each row of T with the rows of U in order (002 Fig 5 <JI>,<JK>).
  auto ref = t0;
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < t_rows; ++j) {
      const double r = ref[j + i * t_rows] / u[i + i * k];
      ref[j + i * t_rows] = r;
      for (int64_t c = i + 1; c < cols; ++c) ref[j + c * t_rows] -= r * u[i + c * k];
    }
  }
  for (size_t i = 0; i < t.size(); ++i) EXPECT_NEAR(t[i], ref[i], 1e-12) << i;
}

TEST(CpuBackend, SubstitutionsSolveTriangularSystems) {
  CpuBackend cpu;
  const int64_t n = 12, r0 = 5, h = 4, nrhs = 2;
  // Stripe rows [5, 9) from column 0, with a dominant diagonal block.
  auto part = uniform_matrix(h, n, 4);
  for (int64_t i = 0; i < h; ++i) part[i + (r0 + i) * h] += 4.0;
  const auto rhs0 = uniform_matrix(n, nrhs, 5);
  auto rhs = rhs0;
  std::vector<int64_t> swaps = {1, 1, 3, 3};
  ASSERT_TRUE(
      cpu.run(LowerSubstitution{part.data(), h, h, r0, swaps.data(), rhs.data(), n, nrhs}, {})
          .is_ok());
  for (int64_t j = 0; j < nrhs; ++j) {
    std::vector<double> b(h);
    for (int64_t i = 0; i < h; ++i) {
      b[i] = rhs0[r0 + i + j * n];
      for (int64_t c = 0; c < r0; ++c) b[i] -= part[i + c * h] * rhs0[c + j * n];
    }
    std::swap(b[0], b[1]);
    std::swap(b[2], b[3]);
    for (int64_t i = 0; i < h; ++i) {
      double s = rhs[r0 + i + j * n];
      for (int64_t c = 0; c < i; ++c) s += part[i + (r0 + c) * h] * rhs[r0 + c + j * n];
      EXPECT_NEAR(s, b[i], 1e-13);
    }
    for (int64_t i = 0; i < r0; ++i) EXPECT_EQ(rhs[i + j * n], rhs0[i + j * n]);
  }
  auto x = rhs0;
  const double* u = part.data() + r0 * h;
  ASSERT_TRUE(cpu.run(UpperSubstitution{u, h, h, n - r0, x.data() + r0, n, nrhs}, {}).is_ok());
  for (int64_t j = 0; j < nrhs; ++j) {
    for (int64_t i = 0; i < h; ++i) {
      double s = 0;
      for (int64_t c = i; c < n - r0; ++c) {
        s += u[i + c * h] * (c < h ? x[r0 + c + j * n] : rhs0[r0 + c + j * n]);
      }
      EXPECT_NEAR(s, rhs0[r0 + i + j * n], 1e-13);
    }
  }
}

// The transposed steps (the condition estimate's A^-T, --pivot gepp's solves), several columns.
TEST(CpuBackend, TransposedSubstitutionsSolveWithTheTransposes) {
  CpuBackend cpu;
  const int64_t n = 12, r0 = 5, h = 4, nrhs = 2;
  auto part = uniform_matrix(h, n, 6);  // rows [5, 9) from column 0
  for (int64_t i = 0; i < h; ++i) part[i + (r0 + i) * h] += 4.0;
  const auto rhs0 = uniform_matrix(n, nrhs, 7);
  // Upper, from the diagonal column: z_I <- U_II^-T z_I, then rows below -= U_right^T z_I.
  auto z = rhs0;
  const double* u = part.data() + r0 * h;
  UpperSubstitution up{u, h, h, n - r0, z.data() + r0, n, nrhs};
  up.transposed = true;
  ASSERT_TRUE(cpu.run(up, {}).is_ok());
  for (int64_t j = 0; j < nrhs; ++j) {
    for (int64_t c = 0; c < n - r0; ++c) {  // (U^T z)_c over the stripe's rows
      double s = 0;
      for (int64_t i = 0; i < std::min(h, c + 1); ++i) s += u[i + c * h] * z[r0 + i + j * n];
      if (c < h) {
        EXPECT_NEAR(s, rhs0[r0 + c + j * n], 1e-13);
      } else {
        EXPECT_NEAR(z[r0 + c + j * n], rhs0[r0 + c + j * n] - s, 1e-13);
      }
    }
    for (int64_t i = 0; i < r0; ++i) EXPECT_EQ(z[i + j * n], rhs0[i + j * n]);
  }
  // Lower, from column 0: t <- L_II^-T z_I, z_I <- P^T t (swaps in reverse order), then rows
  // above -= L_left^T z_I.
  z = rhs0;
  std::vector<int64_t> swaps = {1, 1, 3, 3};
  LowerSubstitution lo{part.data(), h, h, r0, swaps.data(), z.data(), n, nrhs};
  lo.transposed = true;
  ASSERT_TRUE(cpu.run(lo, {}).is_ok());
  for (int64_t j = 0; j < nrhs; ++j) {
    std::vector<double> t(z.begin() + r0 + j * n, z.begin() + r0 + h + j * n);
    std::swap(t[2], t[3]);  // P applied again: the order before the swaps
    std::swap(t[0], t[1]);
    for (int64_t c = 0; c < h; ++c) {  // (L_II^T t)_c, unit diagonal
      double s = t[c];
      for (int64_t i = c + 1; i < h; ++i) s += part[i + (r0 + c) * h] * t[i];
      EXPECT_NEAR(s, rhs0[r0 + c + j * n], 1e-13);
    }
    for (int64_t c = 0; c < r0; ++c) {
      double s = 0;
      for (int64_t i = 0; i < h; ++i) s += part[i + c * h] * z[r0 + i + j * n];
      EXPECT_NEAR(z[c + j * n], rhs0[c + j * n] - s, 1e-13);
    }
  }
}

// Several elim.J threads update disjoint stripes with the same U at once.
TEST(CpuBackend, ConcurrentBlockUpdatesOnDisjointData) {
  CpuBackend cpu;
  const UpdateOperands op(32, 200, 40, 4.0);
  auto expected = op.t;
  ASSERT_TRUE(cpu.run(op.of(expected), {}).is_ok());
  std::vector<std::vector<double>> ts(4, op.t);
  std::vector<Status> results(ts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ts.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = cpu.run(op.of(ts[i]), {}); });
  }
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_TRUE(results[i].is_ok());
    for (size_t e = 0; e < op.t.size(); ++e) ASSERT_NEAR(ts[i][e], expected[e], 1e-12);
  }
}

// On the critical path a block update goes in pieces over the helpers, with the same result.
TEST(CpuBackend, BlockUpdateSplitOverCriticalHelpersMatchesOneCall) {
  CpuBackend cpu;
  const UpdateOperands op(64, 2000, 200, 8.0);  // 5.1e7 flops: above the split's threshold
  auto whole = op.t;
  ASSERT_TRUE(cpu.run(op.of(whole), {}).is_ok());
  CriticalHelpers helpers(3);
  auto split = op.t;
  {
    const CriticalScope scope(&helpers);
    EXPECT_EQ(critical_helpers(), &helpers);
    ASSERT_TRUE(cpu.run(op.of(split), {}).is_ok());
  }
  EXPECT_EQ(critical_helpers(), nullptr);
  EXPECT_EQ(helpers.helped(), 6);  // 4 pieces of rows, 4 of columns: 3 + 3 on the helpers
  double worst = 0;
  for (size_t e = 0; e < whole.size(); ++e) {
    worst = std::max(worst, std::abs(split[e] - whole[e]) / std::max(1.0, std::abs(whole[e])));
  }
  EXPECT_LE(worst, 1e-13);
  // A small update stays in one piece.
  const UpdateOperands small(8, 100, 10, 4.0);
  auto t = small.t;
  const CriticalScope scope(&helpers);
  ASSERT_TRUE(cpu.run(small.of(t), {}).is_ok());
  EXPECT_EQ(helpers.helped(), 6);
}

TEST(CriticalHelpers, RunsEveryPieceOnceFromSeveralCallers) {
  CriticalHelpers helpers(2);
  std::vector<std::atomic<int>> hits(4 * 7);
  std::vector<std::thread> callers;
  callers.reserve(4);
  for (size_t c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      helpers.run(7, [&](int p) { hits[c * 7 + static_cast<size_t>(p)].fetch_add(1); });
    });
  }
  for (auto& th : callers) th.join();
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  EXPECT_EQ(helpers.helped(), 4 * 6);
}

// A critical scope's pieces go ahead of the background pieces already queued (the sweep
// updates that share the helpers must not delay the chain's).
TEST(CriticalHelpers, CriticalPiecesOvertakeQueuedBackgroundOnes) {
  CriticalHelpers helpers(1);
  std::mutex mu;
  std::vector<std::string> order;
  std::atomic<bool> helper_busy{false};
  std::atomic<bool> release{false};
  auto record = [&](const std::string& what) {
    const std::lock_guard<std::mutex> lock(mu);
    order.push_back(what);
  };
  std::thread background([&] {
    const CriticalScope scope(&helpers, /*background=*/true);
    helpers.run(4, [&](int p) {
      if (p == 0) return;
      if (p == 1) {
        helper_busy = true;
        while (!release) std::this_thread::yield();
      }
      record("b" + std::to_string(p));
    });
  });
  while (!helper_busy) std::this_thread::yield();  // the one helper holds b1; b2, b3 queued
  std::thread critical([&] {
    const CriticalScope scope(&helpers);
    helpers.run(3, [&](int p) {
      if (p > 0) record("c" + std::to_string(p));
    });
  });
  while (helpers.queued() < 4) std::this_thread::yield();
  release = true;
  critical.join();
  background.join();
  EXPECT_EQ(order, (std::vector<std::string>{"b1", "c1", "c2", "b2", "b3"}));
}

TEST(BlasThreadsScope, SetsTheThreadsPerCallAndRestoresThem) {
  const int before = blas_threads();
  {
    BlasThreadsScope two(2);
    EXPECT_EQ(blas_threads(), 2);
    {
      BlasThreadsScope none(0);  // at least one
      EXPECT_EQ(blas_threads(), 1);
    }
    EXPECT_EQ(blas_threads(), 2);
  }
  EXPECT_EQ(blas_threads(), before);
}

}  // namespace
}  // namespace stripesolve::backend
