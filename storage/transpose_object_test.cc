#include "storage/transpose_object.h"

#include <gtest/gtest.h>

#include "storage/matrix_store.h"
#include "storage/store_test_support.h"

namespace stripesolve::storage {
namespace {

class TransposeObjectTest : public StoreCaseTest {
 protected:
  void SetUp() override {
    open_store("transpose");
    if (IsSkipped() || HasFatalFailure()) return;
    // Small stream buffers too, so that the budgets below hold.
    store_.reset();
    config_.import_buffer = 64 * 1024;
    auto reopened = MatrixStore::open(config_);
    ASSERT_TRUE(reopened.is_ok()) << reopened.status().to_string();
    store_ = std::move(reopened).value();
  }

  // Every element of `t` is the generator's (c, r): t = A^T exactly, and not all zero.
  void expect_transpose(const std::string& name, const GeneratorSpec& spec) {
    auto t = store_->open_matrix(name);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    const StripeGeometry& g = (*t)->geometry();
    int64_t nonzero = 0;
    for (int64_t J = 0; J < g.stripes; ++J) {
      auto v = read_part_values(**t, J, 0);
      ASSERT_TRUE(v.is_ok()) << v.status().to_string();
      const int64_t h = g.rows(J);
      for (int64_t c = 0; c < g.n; ++c) {
        for (int64_t q = 0; q < h; ++q) {
          const double got = (*v)[static_cast<size_t>(c * h + q)];
          ASSERT_EQ(got, generated_value(spec, g.n, c, g.row_begin(J) + q))
              << name << " stripe " << J << " row " << q << " col " << c;
          nonzero += got != 0;
        }
      }
    }
    EXPECT_GT(nonzero, 0) << name;
  }
};

TEST_P(TransposeObjectTest, RaggedOrdersEqualTheTransposeExactly) {
  const GeneratorSpec spec{"uniform", 7};
  // n < S, n = S, and several stripes of unequal heights (n not a multiple of S).
  for (int64_t n : {1, 7, 50, 131, 301}) {
    const std::string a = std::string("A").append(std::to_string(n));
    ASSERT_TRUE(store_->create_generated(a, n, spec, 50).is_ok());
    auto m = std::move(store_->open_matrix(a)).value();
    auto info = store_->create_transpose(a + ".t", *m, uint64_t{1} << 30);
    ASSERT_TRUE(info.is_ok()) << info.status().to_string();
    EXPECT_EQ(info->kind, "transpose");
    EXPECT_EQ(info->geometry, m->geometry());
    EXPECT_TRUE(is_factor_of(*info, m->info()));
    expect_transpose(a + ".t", spec);
  }
}

TEST_P(TransposeObjectTest, SmallBudgetTransposesInSeveralGroups) {
  const GeneratorSpec spec{"uniform", 3};
  const int64_t n = 203;
  ASSERT_TRUE(store_->create_generated("A", n, spec, 20).is_ok());  // 11 stripes of 18-19 rows
  auto m = std::move(store_->open_matrix("A")).value();
  const StripeGeometry& g = m->geometry();
  // Room for about three stripes beside the smallest stream buffer and the reads.
  const uint64_t budget = 4 * kAlignment + 4 * g.stripe_bytes(0);
  const TransposeMemory memory = transpose_memory(g, budget, config_.import_buffer);
  EXPECT_EQ(memory.stream_bytes % kAlignment, 0u);
  EXPECT_LE(memory.stream_bytes + memory.group_bytes, budget);
  const auto groups = transpose_groups(g, memory.group_bytes);
  ASSERT_GE(groups.size(), 4u);
  int64_t next = 0;
  for (const StripeGroup& k : groups) {
    EXPECT_EQ(k.first, next);
    EXPECT_GT(k.end, k.first);
    uint64_t bytes = 0;
    for (int64_t J = k.first; J < k.end; ++J) bytes += g.stripe_bytes(J);
    EXPECT_LE(bytes, memory.group_bytes);
    next = k.end;
  }
  EXPECT_EQ(next, g.stripes);
  ASSERT_TRUE(store_->create_transpose("A.t", *m, budget).is_ok());
  expect_transpose("A.t", spec);
  // A budget below one stripe still moves a stripe at a time.
  ASSERT_TRUE(store_->create_transpose("A.t1", *m, 1).is_ok());
  expect_transpose("A.t1", spec);
}

TEST_P(TransposeObjectTest, GoesWithItsMatrixAndLeavesNothingWhenCancelled) {
  ASSERT_TRUE(store_->create_generated("A", 64, {"uniform", 1}, 16).is_ok());
  {
    auto m = std::move(store_->open_matrix("A")).value();
    auto stopped = store_->create_transpose("A.t", *m, uint64_t{1} << 20, [] { return true; });
    EXPECT_EQ(stopped.status().code(), StatusCode::kCancelled);
    EXPECT_EQ(store_->info("A.t").status().code(), StatusCode::kNotFound);
    EXPECT_EQ(store_->list()->size(), 1u);
    ASSERT_TRUE(store_->create_transpose("A.t", *m, uint64_t{1} << 20).is_ok());
  }
  EXPECT_EQ(*store_->factors_of("A"), std::vector<std::string>{"A.t"});
  auto removed = store_->remove_with_factors("A");
  ASSERT_TRUE(removed.is_ok()) << removed.status().to_string();
  EXPECT_EQ(*removed, std::vector<std::string>{"A.t"});
  EXPECT_TRUE(store_->list()->empty());
}

INSTANTIATE_TEST_SUITE_P(Engines, TransposeObjectTest,
                         ::testing::Values(StoreCase{"pread", 1}, StoreCase{"pread", 3},
                                           StoreCase{"io_uring", 2}),
                         [](const auto& p) {
                           return p.param.engine + "_" + std::to_string(p.param.paths) + "paths";
                         });

}  // namespace
}  // namespace stripesolve::storage
