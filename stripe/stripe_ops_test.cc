#include "stripe/stripe_ops.h"

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "stripe/dense_reference.h"
#include "stripe/geometry.h"

namespace stripesolve::stripe {
namespace {

// A matrix held as stripes (each from column 0), driven in an arbitrary order the way the
// scheduler does: every operation gets its own copy of the stripe part, starting at the column the
// cache would store it from (i0_store), and writes it back afterwards.
class StripedMatrix {
 public:
  StripedMatrix(const std::vector<double>& a, int64_t n, int64_t stripe_rows)
      : n_(n), stripes_(EvenPartition::with_max_part(n, stripe_rows)) {
    for (int64_t i = 0; i < stripes_.count; ++i) {
      const int64_t h = stripes_.size(i);
      data_.emplace_back(h * n);
      for (int64_t c = 0; c < n; ++c) {
        for (int64_t r = 0; r < h; ++r) data_[i][r + c * h] = a[stripes_.begin(i) + r + c * n];
      }
    }
    pivots_.resize(stripes_.count);
  }

  // A copy of stripe I from column c0 (like a cache cell filled by read_part).
  std::vector<double> read(int64_t i, int64_t c0) const {
    const int64_t h = stripes_.size(i);
    return {data_[i].begin() + h * c0, data_[i].end()};
  }
  void write(int64_t i, int64_t c0, const std::vector<double>& part) {
    std::memcpy(data_[i].data() + stripes_.size(i) * c0, part.data(), part.size() * 8);
  }
  StripePart view(int64_t i, int64_t c0, std::vector<double>& buffer) const {
    return {buffer.data(), stripes_.begin(i), stripes_.size(i), c0, n_};
  }

  Status eliminate(backend::Backend& be, int64_t i, PivotMode mode, int64_t sub) {
    const int64_t c0 = stripes_.begin(i);
    auto buf = read(i, c0);
    const auto part = view(i, c0, buf);
    std::vector<std::byte> ws(eliminate_workspace_size(be, part, mode, sub).host_bytes + 64);
    STRIPESOLVE_RETURN_IF_ERROR(
        eliminate_stripe(be, part, mode, sub, {ws.data(), ws.size(), nullptr, 0}, &pivots_[i]));
    // The pivots travel through their blob format, as they do through the store.
    STRIPESOLVE_ASSIGN_OR_RETURN(pivots_[i], parse_pivots(serialize_pivots(pivots_[i])));
    write(i, c0, buf);
    return Status::ok();
  }

  Status update(backend::Backend& be, int64_t i, int64_t j) {
    const int64_t c0 = stripes_.begin(i);
    auto bi = read(i, c0);
    auto bj = read(j, c0);
    STRIPESOLVE_ASSIGN_OR_RETURN(
        HostWorkspace ws, HostWorkspace::allocate(
                              update_workspace_size(be, view(i, c0, bi), view(j, c0, bj)), "test"));
    STRIPESOLVE_RETURN_IF_ERROR(
        update_stripe(be, view(i, c0, bi), pivots_[i], view(j, c0, bj), ws.view()));
    write(j, c0, bj);
    return Status::ok();
  }

  Status solve(backend::Backend& be, std::vector<double>& x, int64_t nrhs) {
    backend::WorkspaceSize need;
    for (int64_t i = 0; i < stripes_.count; ++i) {
      const StripePart probe{nullptr, stripes_.begin(i), stripes_.size(i), 0, n_};
      need = larger(need, substitution_workspace_size(be, probe, nrhs));
    }
    STRIPESOLVE_ASSIGN_OR_RETURN(HostWorkspace ws, HostWorkspace::allocate(need, "test"));
    for (int64_t i = 0; i < stripes_.count; ++i) {
      // Columns [0, row_end) only, as the out-of-core forward pass reads them.
      const int64_t row_end = stripes_.begin(i) + stripes_.size(i);
      std::vector<double> buf(data_[i].begin(), data_[i].begin() + stripes_.size(i) * row_end);
      StripePart prefix = view(i, 0, buf);
      prefix.col_end = row_end;
      STRIPESOLVE_RETURN_IF_ERROR(
          forward_substitute_stripe(be, prefix, pivots_[i], x.data(), n_, nrhs, ws.view()));
    }
    for (int64_t i = stripes_.count - 1; i >= 0; --i) {
      const int64_t c0 = stripes_.begin(i);
      auto buf = read(i, c0);
      STRIPESOLVE_RETURN_IF_ERROR(
          backward_substitute_stripe(be, view(i, c0, buf), x.data(), n_, nrhs, ws.view()));
      apply_solution_swaps(pivots_[i], x.data(), n_, nrhs);
    }
    return Status::ok();
  }

  int64_t count() const { return stripes_.count; }

 private:
  int64_t n_;
  EvenPartition stripes_;
  std::vector<std::vector<double>> data_;
  std::vector<StripePivots> pivots_;
};

enum class Order { kRightLooking, kLeftLooking, kZigzag, kMetaZigzag };

// Runs the triangulation in `order`; each respects "J updated by I0 < I1 < ..., I eliminated after
// all its updates" but visits J stripes in different orders (002 §8.4).
Status triangulate(backend::Backend& be, StripedMatrix& m, Order order, PivotMode mode,
                   int64_t sub) {
  const int64_t stripes = m.count();
  switch (order) {
    case Order::kRightLooking:
      for (int64_t i = 0; i < stripes; ++i) {
        STRIPESOLVE_RETURN_IF_ERROR(m.eliminate(be, i, mode, sub));
        for (int64_t j = i + 1; j < stripes; ++j) STRIPESOLVE_RETURN_IF_ERROR(m.update(be, i, j));
      }
      return Status::ok();
    case Order::kLeftLooking:
      for (int64_t j = 0; j < stripes; ++j) {
        for (int64_t i = 0; i < j; ++i) STRIPESOLVE_RETURN_IF_ERROR(m.update(be, i, j));
        STRIPESOLVE_RETURN_IF_ERROR(m.eliminate(be, j, mode, sub));
      }
      return Status::ok();
    case Order::kZigzag:
      for (int64_t i = 0; i < stripes; ++i) {
        STRIPESOLVE_RETURN_IF_ERROR(m.eliminate(be, i, mode, sub));
        if (i % 2 == 0) {
          for (int64_t j = stripes - 1; j > i; --j) STRIPESOLVE_RETURN_IF_ERROR(m.update(be, i, j));
        } else {
          for (int64_t j = i + 1; j < stripes; ++j) STRIPESOLVE_RETURN_IF_ERROR(m.update(be, i, j));
        }
      }
      return Status::ok();
    case Order::kMetaZigzag: {
      // Meta-stripes of 2: eliminate a meta-stripe's stripes, then update every later J by the
      // whole range of I's, J visited from the last one down.
      for (int64_t m0 = 0; m0 < stripes; m0 += 2) {
        const int64_t m1 = std::min(stripes, m0 + 2);
        for (int64_t i = m0; i < m1; ++i) {
          STRIPESOLVE_RETURN_IF_ERROR(m.eliminate(be, i, mode, sub));
          for (int64_t j = i + 1; j < m1; ++j) STRIPESOLVE_RETURN_IF_ERROR(m.update(be, i, j));
        }
        for (int64_t j = stripes - 1; j >= m1; --j) {
          for (int64_t i = m0; i < m1; ++i) STRIPESOLVE_RETURN_IF_ERROR(m.update(be, i, j));
        }
      }
      return Status::ok();
    }
  }
  return Status::internal("unknown order");
}

class StripeOrderTest : public ::testing::TestWithParam<std::tuple<Order, PivotMode>> {};

TEST_P(StripeOrderTest, AnyDependencyRespectingOrderSolves) {
  const auto [order, mode] = GetParam();
  backend::CpuBackend cpu;
  const int64_t n = 451;
  const int64_t nrhs = 3;
  const auto a = uniform_matrix(n, n, 77);
  StripedMatrix m(a, n, 60);  // 8 stripes of 56-57 rows
  ASSERT_TRUE(triangulate(cpu, m, order, mode, 13).is_ok());
  const auto b = uniform_matrix(n, nrhs, 78);
  auto x = b;
  ASSERT_TRUE(m.solve(cpu, x, nrhs).is_ok());
  ASSERT_GT(max_abs(x), 0.0);
  const auto x_ref = lapack_solve(a, n, b, nrhs);
  const double res = scaled_residual(a.data(), n, x.data(), b.data(), nrhs);
  const double res_ref = scaled_residual(a.data(), n, x_ref.data(), b.data(), nrhs);
  EXPECT_LE(res, mode == PivotMode::kRow ? std::max(10 * res_ref, 1e-15) : 1e-11);
}

INSTANTIATE_TEST_SUITE_P(
    Orders, StripeOrderTest,
    ::testing::Combine(::testing::Values(Order::kRightLooking, Order::kLeftLooking, Order::kZigzag,
                                         Order::kMetaZigzag),
                       ::testing::Values(PivotMode::kRow, PivotMode::kLocal, PivotMode::kNone)));

TEST(StripeOps, PivotsRoundTripAndRejectCorruptBytes) {
  StripePivots p{PivotMode::kRow, 100, {103, 101, 110}};
  auto bytes = serialize_pivots(p);
  EXPECT_EQ(bytes.size(), 24u + 24u);
  auto back = parse_pivots(bytes);
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, p);
  EXPECT_EQ(parse_pivots(std::span(bytes).first(10)).status(),
            Status::corruption("pivot record of 10 bytes is shorter than its 24-byte header"));
  bytes[24] = std::byte{0};  // swaps[0] = 0 < row 100
  EXPECT_EQ(parse_pivots(bytes).status(),
            Status::corruption("pivot record: swap 0 of row 100 points backwards"));
  bytes[0] = std::byte{0};
  EXPECT_EQ(parse_pivots(bytes).status(), Status::corruption("pivot record: bad magic"));
}

TEST(StripeOps, RejectsPartsInTheWrongPlace) {
  backend::CpuBackend cpu;
  std::vector<double> a(4 * 10, 1.0), b(4 * 10, 1.0);
  StripePart i{a.data(), 4, 4, 0, 10};
  StripePart j{b.data(), 2, 4, 0, 10};  // overlaps I: not below it
  StripePivots p{PivotMode::kNone, 4, {}};
  EXPECT_EQ(update_stripe(cpu, i, p, j, {}),
            Status::invalid_argument("update stripe: stripe of rows from 2 (columns from 0) cannot "
                                     "be updated by stripe of rows [4, 8) (columns from 0)"));
  StripePart late{a.data(), 4, 4, 5, 10};
  EXPECT_EQ(eliminate_stripe(cpu, late, PivotMode::kNone, 2, {}, &p),
            Status::invalid_argument(
                "eliminate stripe: part of rows from 4 starts at column 5, after its diagonal"));
  // Parts that end before n: enough for the forward passes up to the stripe's last row, never
  // for an op that reads through n.
  StripePart prefix{a.data(), 4, 4, 0, 10, 7};
  std::vector<double> x(10, 1.0);
  EXPECT_EQ(forward_substitute_stripe(cpu, prefix, p, x.data(), 10, 1, {}),
            Status::invalid_argument("forward substitution: stripe part rows [4, 8) holds columns "
                                     "[0, 7), needs them up to 8 of n=10"));
  prefix.col_end = 8;
  EXPECT_TRUE(transposed_lower_substitute_stripe(cpu, prefix, p, x.data(), 10, 1, {}).is_ok());
  EXPECT_EQ(backward_substitute_stripe(cpu, prefix, x.data(), 10, 1, {}),
            Status::invalid_argument("backward substitution: stripe part rows [4, 8) holds "
                                     "columns [0, 8), needs them up to 10 of n=10"));
}

// The forward pass from a column c > 0 (its right-hand side zero above c, as a unit vector's):
// the same rows as from column 0, and refused when the right-hand side is not zero above c or c
// lies after the stripe's first row.
TEST(StripeOps, ForwardPassFromAColumnSkipsTheZeroRows) {
  backend::CpuBackend cpu;
  const int64_t n = 10, r0 = 4, rows = 4, c0 = 2;
  std::vector<double> a(static_cast<size_t>(rows * (r0 + rows)));
  for (size_t k = 0; k < a.size(); ++k) a[k] = 0.25 + 0.01 * static_cast<double>(k % 13);
  std::vector<double> x(n, 0.0);
  for (int64_t r = c0; r < n; ++r) x[r] = 1.0 + 0.1 * static_cast<double>(r);
  std::vector<double> whole = x, skipped = x;
  StripePivots p{PivotMode::kNone, r0, {}};
  StripePart from0{a.data(), r0, rows, 0, n, r0 + rows};
  ASSERT_TRUE(forward_substitute_stripe(cpu, from0, p, whole.data(), n, 1, {}).is_ok());
  StripePart from_c0{a.data() + c0 * rows, r0, rows, c0, n, r0 + rows};
  ASSERT_TRUE(forward_substitute_stripe(cpu, from_c0, p, skipped.data(), n, 1, {}).is_ok());
  for (int64_t r = 0; r < n; ++r) EXPECT_NEAR(skipped[r], whole[r], 1e-14) << "row " << r;
  EXPECT_NE(skipped[r0], x[r0]);
  std::vector<double> dense(n, 1.0);
  EXPECT_EQ(forward_substitute_stripe(cpu, from_c0, p, dense.data(), n, 1, {}),
            Status::invalid_argument("forward substitution: part of rows from 4 starts at column "
                                     "2, and the right-hand side is not zero above it"));
  StripePart late{a.data(), r0, rows, r0 + 1, n, r0 + rows};
  EXPECT_EQ(
      forward_substitute_stripe(cpu, late, p, skipped.data(), n, 1, {}),
      Status::invalid_argument(
          "forward substitution: part of rows from 4 starts at column 5, after its diagonal"));
}

// A backend whose block updates and substitutions want scratch memory: every stripe op asks
// for it and refuses to run short, before it touches the part.
class HungryBackend final : public backend::Backend {
 public:
  std::string_view name() const override { return "hungry"; }
  Status can_implement(const backend::PanelFactor& op) const override {
    return cpu_.can_implement(op);
  }
  Status can_implement(const backend::BlockUpdate& op) const override {
    return cpu_.can_implement(op);
  }
  Status can_implement(const backend::LowerSubstitution& op) const override {
    return cpu_.can_implement(op);
  }
  Status can_implement(const backend::UpperSubstitution& op) const override {
    return cpu_.can_implement(op);
  }
  backend::WorkspaceSize workspace_size(const backend::PanelFactor& op) const override {
    return cpu_.workspace_size(op);
  }
  Status run(const backend::PanelFactor& op, const backend::Workspace& w) override {
    return cpu_.run(op, w);
  }
  backend::WorkspaceSize workspace_size(const backend::BlockUpdate&) const override {
    return {4096, 0};
  }
  Status run(const backend::BlockUpdate& op, const backend::Workspace& w) override {
    STRIPESOLVE_RETURN_IF_ERROR(backend::check_workspace(w, {4096, 0}));
    return cpu_.run(op, w);
  }
  backend::WorkspaceSize workspace_size(const backend::LowerSubstitution&) const override {
    return {512, 0};
  }
  Status run(const backend::LowerSubstitution& op, const backend::Workspace& w) override {
    return cpu_.run(op, w);
  }
  backend::WorkspaceSize workspace_size(const backend::UpperSubstitution&) const override {
    return {1024, 0};
  }
  Status run(const backend::UpperSubstitution& op, const backend::Workspace& w) override {
    return cpu_.run(op, w);
  }

 private:
  backend::CpuBackend cpu_;
};

TEST(StripeOps, EveryOpAsksForItsWorkspace) {
  HungryBackend be;
  std::vector<double> a(4 * 10, 1.0), b(4 * 10, 2.0);
  const StripePart i{a.data(), 0, 4, 0, 10};
  const StripePart j{b.data(), 4, 4, 0, 10};
  EXPECT_EQ(update_workspace_size(be, i, j).host_bytes, 4096u);
  EXPECT_EQ(substitution_workspace_size(be, j, 3).host_bytes, 1024u);  // the larger of the two
  EXPECT_GE(eliminate_workspace_size(be, i, PivotMode::kNone, 2).host_bytes, 4096u);  // its updates
  const StripePivots none{PivotMode::kNone, 0, {}};
  const std::vector<double> before = b;
  EXPECT_EQ(update_stripe(be, i, none, j, {}).message(),
            "workspace too small: need 4096 host + 0 device bytes, got 0 + 0");
  EXPECT_EQ(b, before);  // untouched
  std::vector<double> x(10, 1.0);
  EXPECT_FALSE(backward_substitute_stripe(be, j, x.data(), 10, 1, {}).is_ok());
  auto ws = HostWorkspace::allocate(update_workspace_size(be, i, j), "test");
  ASSERT_TRUE(ws.is_ok());
  EXPECT_TRUE(update_stripe(be, i, none, j, ws->view()).is_ok());
  EXPECT_NE(b, before);
  EXPECT_EQ(HostWorkspace::allocate({0, 8}, "test").status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace stripesolve::stripe
