#include "scheduler/test_store.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "storage/generators.h"

namespace stripesolve::scheduler {

void TestStore::open_store(const std::string& prefix) {
  static std::atomic<int> counter{0};
  root_ = ::testing::TempDir() + "/" + prefix + "." + std::to_string(::getpid()) + "." +
          std::to_string(counter++);
  std::filesystem::remove_all(root_);
  storage::StoreConfig c;
  c.paths = {root_ + "/ssd0", root_ + "/ssd1"};
  c.stripe_rows = 64;
  c.round_robin_levels = 3;
  c.min_segment_bytes = 4096;
  c.free_space_reserve = 0;
  c.import_buffer = 1 << 20;
  c.io_engine = "pread";
  store_ = storage::MatrixStore::open(c).value();
}

void TestStore::close_store() {
  store_.reset();
  if (!root_.empty()) std::filesystem::remove_all(root_);
}

std::vector<double> TestStore::generated(const std::string& name, int64_t n, int64_t s,
                                         const std::string& generator, uint64_t seed) {
  storage::GeneratorSpec spec{generator, seed};
  EXPECT_TRUE(store_->create_generated(name, n, spec, s).is_ok());
  std::vector<double> a(static_cast<size_t>(n * n));
  for (int64_t c = 0; c < n; ++c)
    for (int64_t r = 0; r < n; ++r) a[r + c * n] = storage::generated_value(spec, n, r, c);
  return a;
}

void TestStore::store_values(const std::string& name, int64_t n, int64_t s,
                             const std::vector<double>& a) {
  ASSERT_TRUE(store_->create_generated(name, n, {"identity", 0}, s).is_ok());
  auto m = store_->open_for_in_place(name).value();
  const storage::StripeGeometry& g = m->geometry();
  for (int64_t i = 0; i < g.stripes; ++i) {
    const storage::PartLayout l = m->part_layout(i, 0);
    std::byte* buf = static_cast<std::byte*>(std::aligned_alloc(4096, l.buffer_bytes));
    std::memset(buf, 0, l.buffer_bytes);
    double* d = reinterpret_cast<double*>(buf + l.data_offset);
    for (int64_t c = 0; c < n; ++c)
      for (int64_t r = 0; r < g.rows(i); ++r)
        d[r + c * g.rows(i)] = a[(g.row_begin(i) + r) + c * n];
    ASSERT_TRUE(m->write_part(i, 0, buf).is_ok());
    std::free(buf);
  }
  ASSERT_TRUE(m->commit().is_ok());
}

}  // namespace stripesolve::scheduler
