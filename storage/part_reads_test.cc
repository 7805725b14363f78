// StripedMatrix::read_parts: a stream of parts equals read_part part by part, with both engines,
// one and several paths, odd n and n < S; rings of buffers; errors and checksum mismatches.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "storage/data_file.h"
#include "storage/engine_select.h"
#include "storage/store_test_support.h"

namespace stripesolve::storage {
namespace {

class PartReadsTest : public StoreCaseTest {
 protected:
  void SetUp() override { open_store("parts"); }

  std::unique_ptr<StripedMatrix> make(int64_t n) {
    const std::string name = std::string("A").append(std::to_string(n));
    EXPECT_TRUE(store_->create_generated(name, n, spec_).is_ok());
    auto m = store_->open_matrix(name);
    EXPECT_TRUE(m.is_ok()) << m.status().to_string();
    return m.is_ok() ? std::move(m).value() : nullptr;
  }

  // Whether `buffer` holds columns [c0, c1) of stripe I of the generated matrix; counts the
  // nonzero values so that a buffer left at zero cannot pass for the matrix.
  bool holds_part(const StripedMatrix& m, int64_t I, int64_t c0, const std::byte* buffer,
                  int64_t c1 = kThroughN) {
    const StripeGeometry& g = m.geometry();
    const PartLayout layout = m.part_layout(I, c0, c1);
    const int64_t h = g.rows(I);
    std::vector<double> v(layout.data_bytes / 8);
    if (!v.empty()) std::memcpy(v.data(), buffer + layout.data_offset, layout.data_bytes);
    for (int64_t c = c0; c < std::min(c1, g.n); ++c) {
      for (int64_t r = 0; r < h; ++r) {
        const double want = generated_value(spec_, g.n, g.row_begin(I) + r, c);
        if (v[(c - c0) * h + r] != want) return false;
        nonzero_ += want != 0;
      }
    }
    return true;
  }

  // Every stripe from columns 0, 1, n/2, n-1 and n.
  static std::vector<std::pair<int64_t, int64_t>> all_parts(const StripeGeometry& g) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (int64_t I = 0; I < g.stripes; ++I) {
      for (int64_t c0 : {int64_t{0}, int64_t{1}, g.n / 2, g.n - 1, g.n}) out.emplace_back(I, c0);
    }
    return out;
  }

  const GeneratorSpec spec_{"uniform", 11};
  int64_t nonzero_ = 0;
};

TEST_P(PartReadsTest, StreamEqualsTheGenerator) {
  // n < S (S = 64), odd n over several stripes of unequal heights, and n with 8 * h * n a
  // multiple of 4 KiB (parts from column n are then empty).
  for (int64_t n : {7, 131, 301, 128}) {
    auto m = make(n);
    ASSERT_NE(m, nullptr);
    const auto list = all_parts(m->geometry());
    std::vector<AlignedBuffer> buffers;
    std::vector<PartRead> parts;
    for (const auto& [I, c0] : list) {
      buffers.push_back(
          std::move(AlignedBuffer::allocate(m->part_layout(I, c0).buffer_bytes + 1)).value());
      parts.push_back({I, c0, buffers.back().data()});
    }
    std::vector<int> done(parts.size(), 0);
    ASSERT_TRUE(m->read_parts(parts, [&](size_t k) { ++done[k]; }).is_ok());
    EXPECT_EQ(done, std::vector<int>(parts.size(), 1)) << "n = " << n;
    for (size_t k = 0; k < parts.size(); ++k) {
      EXPECT_TRUE(holds_part(*m, parts[k].stripe, parts[k].col_begin, parts[k].buffer))
          << "n = " << n << " stripe " << parts[k].stripe << " from column " << parts[k].col_begin;
    }
  }
  EXPECT_GT(nonzero_, 0);
}

TEST_P(PartReadsTest, ColumnRangesEqualTheGenerator) {
  // The forward passes read columns [0, row_end(I)) only: ranges that end before n read fewer
  // bytes and hold the same values as the part through n.
  for (int64_t n : {7, 131, 301, 128}) {
    auto m = make(n);
    ASSERT_NE(m, nullptr);
    const StripeGeometry& g = m->geometry();
    for (int64_t I = 0; I < g.stripes; ++I) {
      const int64_t r1 = g.row_end(I);
      for (const auto& [c0, c1] : std::vector<std::pair<int64_t, int64_t>>{
               {0, r1}, {1, 5}, {g.n / 2, g.n}, {0, 1}, {3, 3}, {0, kThroughN}}) {
        const PartLayout layout = m->part_layout(I, c0, c1);
        EXPECT_EQ(layout.data_bytes, 8 * static_cast<uint64_t>(g.rows(I) * (std::min(c1, n) - c0)));
        EXPECT_LE(layout.buffer_bytes, m->part_layout(I, c0).buffer_bytes);
        EXPECT_EQ(layout.buffer_bytes % 4096, 0u);
        auto buffer = std::move(AlignedBuffer::allocate(layout.buffer_bytes + 1)).value();
        ASSERT_TRUE(m->read_part(I, c0, buffer.data(), c1).is_ok());
        EXPECT_TRUE(holds_part(*m, I, c0, buffer.data(), c1))
            << "n = " << n << " stripe " << I << " columns [" << c0 << ", " << c1 << ")";
      }
    }
    // A prefix of a long stripe is a fraction of its bytes.
    if (n == 301) {
      EXPECT_LT(m->part_layout(0, 0, g.row_end(0)).buffer_bytes * 3,
                m->part_layout(0, 0).buffer_bytes);
    }
  }
  EXPECT_GT(nonzero_, 0);
  auto m = std::move(store_->open_matrix("A131")).value();
  std::vector<std::byte> none(8);
  EXPECT_EQ(
      m->read_part(0, 5, none.data(), 4).message(),
      "matrix 'A131': stripe 0 from column 5 to column 4 is outside 3 stripes of 131 columns");
}

TEST_P(PartReadsTest, RingOfTwoBuffersIsNotOverwrittenBeforeItsPartIsDone) {
  auto m = make(301);
  ASSERT_NE(m, nullptr);
  uint64_t largest = 0;
  for (int64_t I = 0; I < m->geometry().stripes; ++I) {
    largest = std::max(largest, m->part_layout(I, 0).buffer_bytes);
  }
  std::vector<AlignedBuffer> ring;
  for (int k = 0; k < 2; ++k) ring.push_back(std::move(AlignedBuffer::allocate(largest)).value());
  std::vector<PartRead> parts;
  for (int rep = 0; rep < 3; ++rep) {
    for (const auto& [I, c0] : all_parts(m->geometry())) {
      parts.push_back({I, c0, ring[parts.size() % 2].data()});
    }
  }
  // Checked inside on_done: a later part that shares the buffer must not have started yet.
  std::vector<int> good(parts.size(), 0);
  ASSERT_TRUE(m->read_parts(parts, [&](size_t k) {
                 good[k] = holds_part(*m, parts[k].stripe, parts[k].col_begin, parts[k].buffer);
               }).is_ok());
  EXPECT_EQ(good, std::vector<int>(parts.size(), 1));
  EXPECT_GT(nonzero_, 0);
}

TEST_P(PartReadsTest, InvalidPartReadsNothing) {
  auto m = make(131);
  ASSERT_NE(m, nullptr);
  auto buffer = std::move(AlignedBuffer::allocate(m->part_layout(0, 0).buffer_bytes)).value();
  std::memset(buffer.data(), 0x7f, buffer.size());
  const std::vector<PartRead> parts{{0, 0, buffer.data()}, {3, 0, buffer.data()}};
  int calls = 0;
  const Status st = m->read_parts(parts, [&](size_t) { ++calls; });
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("stripe 3 from column 0 is outside 3 stripes"), std::string::npos)
      << st.message();
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(buffer.data()[0], std::byte{0x7f});  // checked before any I/O
  EXPECT_TRUE(m->read_parts({}, [&](size_t) { ++calls; }).is_ok());
  EXPECT_EQ(calls, 0);
}

TEST_P(PartReadsTest, ChecksumMismatchNamesTheSegmentAndSkipsThePart) {
  auto m = make(200);
  ASSERT_NE(m, nullptr);
  const std::string data = config_.paths[0] + "/objects/A200/data";
  ASSERT_TRUE(flip_bit(data, 100).is_ok());
  std::vector<AlignedBuffer> buffers;
  std::vector<PartRead> parts;
  for (int64_t I = 0; I < m->geometry().stripes; ++I) {
    buffers.push_back(
        std::move(AlignedBuffer::allocate(m->part_layout(I, 0).buffer_bytes)).value());
    parts.push_back({I, 0, buffers.back().data()});
  }
  std::map<size_t, int> done;
  const Status st = m->read_parts(parts, [&](size_t k) { ++done[k]; });
  ASSERT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("matrix 'A200': checksum mismatch in segment 0 (stripe 0, " + data +
                              " at offset 0, "),
            std::string::npos)
      << st.message();
  EXPECT_EQ(done.count(0), 0u);  // the damaged part is not reported as read
  for (const auto& [k, calls] : done) {
    EXPECT_EQ(calls, 1);
    EXPECT_TRUE(holds_part(*m, parts[k].stripe, 0, parts[k].buffer));
  }
}

INSTANTIATE_TEST_SUITE_P(EnginesAndPaths, PartReadsTest,
                         ::testing::Values(StoreCase{"pread", 1}, StoreCase{"pread", 3},
                                           StoreCase{"io_uring", 1}, StoreCase{"io_uring", 3}),
                         store_case_name);

}  // namespace
}  // namespace stripesolve::storage
