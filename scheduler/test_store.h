// The temporary store the scheduler's end-to-end tests run on (test-only): a fresh directory per
// test with two "SSD" paths below it, pread, S = 64, small segments and no free-space reserve, so
// that small matrices go through every part of a solve in milliseconds on any filesystem.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "storage/matrix_store.h"
#include "storage/store_config.h"

namespace stripesolve::scheduler {

// A path TempDir/<prefix>.<pid>.<k>, unique per process and call; anything left there by an
// earlier run is removed.
std::string temp_store_root(const std::string& prefix);

// The tests' store configuration over root/ssd0 and root/ssd1.
storage::StoreConfig test_store_config(const std::string& root);

// Creates `name`, n x n in stripes of s rows, from `generator` with `seed` in `store`, and returns
// its values in RAM (column-major). A failed create is a test failure.
std::vector<double> create_generated_values(storage::MatrixStore& store, const std::string& name,
                                            int64_t n, int64_t s, const std::string& generator,
                                            uint64_t seed);

}  // namespace stripesolve::scheduler
