// The temporary store the scheduler's end-to-end tests run on (test-only): a fresh directory per
// test with two "SSD" paths below it, pread, S = 64, small segments and no free-space reserve, so
// that small matrices go through every part of a solve in milliseconds on any filesystem.
// A fixture derives from TestStore beside its ::testing::Test base, calls open_store() in SetUp()
// and close_store() in TearDown(); store_ may be reset and reopened (store_->config()) between.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "storage/matrix_store.h"

namespace stripesolve::scheduler {

// The device budget of a test's solve on a GPU machine (EngineConfig::gpu_memory): the default,
// 90% of the free memory, would let only one test at a time have the card (ctest -j).
inline constexpr uint64_t kTestGpuMemory = 1ull << 30;

class TestStore {
 protected:
  // Opens store_ in a new directory root_ = TempDir/<prefix>.<pid>.<k>, unique per process and
  // call; anything left there by an earlier run is removed first.
  void open_store(const std::string& prefix);
  // Closes store_ and removes root_ (nothing when open_store() was never reached).
  void close_store();

  // Creates `name`, n x n in stripes of s rows, from `generator` with `seed`, and returns its
  // values in RAM (column-major). A failed create is a test failure.
  std::vector<double> generated(const std::string& name, int64_t n, int64_t s,
                                const std::string& generator, uint64_t seed = 7);
  // Stores arbitrary values (n x n, column-major) as `name`: made as identity, overwritten in
  // place and committed.
  void store_values(const std::string& name, int64_t n, int64_t s, const std::vector<double>& a);

  std::string root_;
  std::unique_ptr<storage::MatrixStore> store_;
};

}  // namespace stripesolve::scheduler
