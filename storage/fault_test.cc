// Each injected fault surfaces as the right error and leaves the store consistent.
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "storage/engine_select.h"
#include "storage/fault_engine.h"
#include "storage/matrix_store.h"
#include "storage/pread_engine.h"
#include "storage/store_test_support.h"

namespace stripesolve::storage {
namespace {

class FaultTest : public ::testing::TestWithParam<std::string> {
 protected:
  void open_with(FaultPlan plan) {
    StoreConfig inner_config;
    inner_config.io_engine = GetParam();
    if (GetParam() == "io_uring" && !io_uring_usable().is_ok()) {
      GTEST_SKIP() << "io_uring unavailable: " << io_uring_usable().message();
    }
    inner_config.queue_depth = 4;
    inner_config.request_bytes = 8192;
    inner_config.write_request_bytes = 8192;
    auto inner = make_io_engine(inner_config);
    ASSERT_TRUE(inner.is_ok());
    config_ = temp_store_config("fault", 2, GetParam());
    fault_ = std::make_shared<FaultEngine>(*inner, plan);
    auto s = MatrixStore::open(config_, fault_);
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    store_ = std::move(s).value();
  }

  // Creates matrix `name` (uniform, seed 1, n = 150) through a clean engine, then reopens the
  // store over the fault engine and opens the matrix: the plan's faults fire on its reads.
  std::unique_ptr<StripedMatrix> create_then_open_faulty(const std::string& name) {
    store_.reset();
    {
      auto clean = std::move(MatrixStore::open(config_)).value();
      EXPECT_TRUE(clean->create_generated(name, 150, {"uniform", 1}).is_ok());
    }
    store_ = std::move(MatrixStore::open(config_, fault_)).value();
    return std::move(store_->open_matrix(name)).value();
  }

  // Nothing of `name` on any path.
  void expect_gone(const std::string& name) {
    for (const auto& p : config_.paths) {
      EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(p) / "objects" / name)) << p;
    }
    EXPECT_EQ(store_->info(name).status().code(), StatusCode::kNotFound);
  }

  void expect_generated(const std::string& name, const GeneratorSpec& spec) {
    auto m = store_->open_matrix(name);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    const StripeGeometry& g = (*m)->geometry();
    for (int64_t i = 0; i < g.stripes; ++i) {
      auto v = read_part_values(**m, i, 0);
      ASSERT_TRUE(v.is_ok()) << v.status().to_string();
      for (int64_t c = 0; c < g.n; ++c) {
        for (int64_t r = 0; r < g.rows(i); ++r) {
          ASSERT_EQ((*v)[c * g.rows(i) + r], generated_value(spec, g.n, g.row_begin(i) + r, c));
        }
      }
    }
  }

  StoreConfig config_;
  std::shared_ptr<FaultEngine> fault_;
  std::unique_ptr<MatrixStore> store_;
};

TEST_P(FaultTest, FailedWriteDuringCreateLeavesNothing) {
  open_with({FaultPlan::Kind::kFail, 3, EIO});
  if (IsSkipped()) return;
  auto info = store_->create_generated("A", 150, {"uniform", 1});
  ASSERT_TRUE(fault_->fired());
  EXPECT_EQ(info.status().code(), StatusCode::kIoError);
  EXPECT_NE(info.status().message().find("/objects/A/data at offset "), std::string::npos)
      << info.status().message();
  EXPECT_NE(info.status().message().find("(errno 5)"), std::string::npos);
  EXPECT_TRUE(info.status().data_lost());
  expect_gone("A");
  ASSERT_TRUE(store_->create_generated("A", 150, {"uniform", 1}).is_ok());
  expect_generated("A", {"uniform", 1});
}

TEST_P(FaultTest, DiskFullDuringCreateIsNoSpace) {
  open_with({FaultPlan::Kind::kFail, 1, ENOSPC});
  if (IsSkipped()) return;
  auto info = store_->create_generated("A", 150, {"uniform", 1});
  EXPECT_EQ(info.status().code(), StatusCode::kNoSpace);
  EXPECT_NE(info.status().message().find("No space left on device (errno 28)"), std::string::npos);
  expect_gone("A");
}

TEST_P(FaultTest, TornWriteDuringCreateLeavesNothing) {
  open_with({FaultPlan::Kind::kTornWrite, 2, EIO});
  if (IsSkipped()) return;
  EXPECT_EQ(store_->create_generated("A", 150, {"uniform", 1}).status().code(),
            StatusCode::kIoError);
  expect_gone("A");
  EXPECT_TRUE(store_->list()->empty());
}

TEST_P(FaultTest, ShortReadOfAPart) {
  open_with({FaultPlan::Kind::kShortTransfer, 0, EIO, /*writes_only=*/false});
  if (IsSkipped()) return;
  auto m = create_then_open_faulty("A");
  auto v = read_part_values(*m, 0, 0);
  EXPECT_EQ(v.status().code(), StatusCode::kCorruption);
  EXPECT_NE(v.status().message().find("matrix 'A' stripe 0: read " + config_.paths[0]),
            std::string::npos)
      << v.status().message();
  EXPECT_NE(v.status().message().find("unexpected end of file after"), std::string::npos);
  m.reset();
  expect_generated("A", {"uniform", 1});  // the fault fired once; the data is intact
}

// A stream of parts over the fault engine: the k-th request fails; the error names the stripe,
// path, offset and errno, parts reported done are correct, and the stored matrix is untouched.
TEST_P(FaultTest, FailedRequestInAStreamOfParts) {
  for (const auto kind : {FaultPlan::Kind::kFail, FaultPlan::Kind::kShortTransfer}) {
    open_with({kind, 5, EIO, /*writes_only=*/false});
    if (IsSkipped()) return;
    auto m = create_then_open_faulty("A");
    const StripeGeometry& g = m->geometry();
    std::vector<AlignedBuffer> buffers;
    std::vector<PartRead> parts;
    for (int rep = 0; rep < 2; ++rep) {
      for (int64_t i = 0; i < g.stripes; ++i) {
        buffers.push_back(
            std::move(AlignedBuffer::allocate(m->part_layout(i, 1).buffer_bytes)).value());
        parts.push_back({i, 1, buffers.back().data()});
      }
    }
    std::vector<int> done(parts.size(), 0);
    const Status st = m->read_parts(parts, [&](size_t k) { ++done[k]; });
    ASSERT_TRUE(fault_->fired());
    ASSERT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("matrix 'A' stripe "), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("/objects/A/data at offset "), std::string::npos) << st.message();
    if (kind == FaultPlan::Kind::kFail) {
      EXPECT_EQ(st.code(), StatusCode::kIoError);
      EXPECT_NE(st.message().find("(errno 5)"), std::string::npos) << st.message();
    } else {
      EXPECT_EQ(st.code(), StatusCode::kCorruption);
      EXPECT_NE(st.message().find("unexpected end of file after"), std::string::npos);
    }
    EXPECT_FALSE(st.data_lost());  // a failed read loses nothing
    int reported = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      if (done[k] == 0) continue;
      ++reported;
      EXPECT_EQ(done[k], 1);
      const int64_t i = parts[k].stripe;
      const PartLayout layout = m->part_layout(i, 1);
      for (int64_t c = 1; c < g.n; ++c) {
        for (int64_t r = 0; r < g.rows(i); ++r) {
          double v = 0;
          std::memcpy(&v, parts[k].buffer + layout.data_offset + 8 * ((c - 1) * g.rows(i) + r), 8);
          ASSERT_EQ(v, generated_value({"uniform", 1}, g.n, g.row_begin(i) + r, c));
        }
      }
    }
    EXPECT_LT(reported, static_cast<int>(parts.size()));
    m.reset();
    expect_generated("A", {"uniform", 1});  // the fault fired once; the data is intact
  }
}

TEST_P(FaultTest, TornWriteOfAFactorPartIsDataLossAndDiscarded) {
  open_with({FaultPlan::Kind::kTornWrite, 0, EIO, /*writes_only=*/true});
  if (IsSkipped()) return;
  store_.reset();
  {
    auto clean = std::move(MatrixStore::open(config_)).value();
    ASSERT_TRUE(clean->create_generated("A", 150, {"uniform", 1}).is_ok());
  }
  store_ = std::move(MatrixStore::open(config_, fault_)).value();
  {
    auto a = std::move(store_->open_matrix("A")).value();
    auto f = std::move(store_->create_factor("F", *a)).value();
    auto v = read_part_values(*a, 0, 0);
    ASSERT_TRUE(v.is_ok());
    Status st = write_part_values(*f, 0, 0, *v);
    EXPECT_EQ(st.code(), StatusCode::kIoError);
    EXPECT_TRUE(st.data_lost());
    EXPECT_NE(st.message().find("factor 'F' stripe 0: write "), std::string::npos) << st.message();
  }
  expect_gone("F");
  expect_generated("A", {"uniform", 1});
}

TEST_P(FaultTest, FailedInPlaceWriteKeepsMatrixMarked) {
  open_with({FaultPlan::Kind::kFail, 0, EIO, /*writes_only=*/true});
  if (IsSkipped()) return;
  store_.reset();
  {
    auto clean = std::move(MatrixStore::open(config_)).value();
    ASSERT_TRUE(clean->create_generated("A", 100, {"uniform", 1}).is_ok());
  }
  store_ = std::move(MatrixStore::open(config_, fault_)).value();
  {
    auto ip = std::move(store_->open_for_in_place("A")).value();
    EXPECT_FALSE(write_part_values(*ip, 0, 0, std::vector<double>(64 * 100, 0.0)).is_ok());
  }
  EXPECT_EQ(store_->info("A")->state, ObjectState::kBeingFactored);
  EXPECT_EQ(store_->open_matrix("A").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store_->remove("A").is_ok());
  expect_gone("A");
}

INSTANTIATE_TEST_SUITE_P(Engines, FaultTest, ::testing::Values("pread", "io_uring"));

}  // namespace
}  // namespace stripesolve::storage
