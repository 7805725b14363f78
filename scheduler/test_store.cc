#include "scheduler/test_store.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>

#include <gtest/gtest.h>

#include "storage/generators.h"

namespace stripesolve::scheduler {

std::string temp_store_root(const std::string& prefix) {
  static std::atomic<int> counter{0};
  std::string root = ::testing::TempDir() + "/" + prefix + "." + std::to_string(::getpid()) + "." +
                     std::to_string(counter++);
  std::filesystem::remove_all(root);
  return root;
}

storage::StoreConfig test_store_config(const std::string& root) {
  storage::StoreConfig c;
  c.paths = {root + "/ssd0", root + "/ssd1"};
  c.stripe_rows = 64;
  c.round_robin_levels = 3;
  c.min_segment_bytes = 4096;
  c.free_space_reserve = 0;
  c.import_buffer = 1 << 20;
  c.io_engine = "pread";
  return c;
}

std::vector<double> create_generated_values(storage::MatrixStore& store, const std::string& name,
                                            int64_t n, int64_t s, const std::string& generator,
                                            uint64_t seed) {
  storage::GeneratorSpec spec{generator, seed};
  EXPECT_TRUE(store.create_generated(name, n, spec, s).is_ok());
  std::vector<double> a(static_cast<size_t>(n * n));
  for (int64_t c = 0; c < n; ++c)
    for (int64_t r = 0; r < n; ++r) a[r + c * n] = storage::generated_value(spec, n, r, c);
  return a;
}

}  // namespace stripesolve::scheduler
