// Test support for storage tests: temporary stores and reading back stripe values.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "storage/matrix_store.h"

namespace stripesolve::storage {

// A fresh directory under ::testing::TempDir(), unique per call.
std::string make_temp_dir(const std::string& tag);

// A config with `paths` directories under a fresh temp dir, the given engine, small segments.
StoreConfig temp_store_config(const std::string& tag, int paths, const std::string& engine);

// One case of the parameterised store tests: the engine ("pread" or "io_uring") and the number
// of store paths; store_case_name gives "pread1", "uring3", ...
struct StoreCase {
  std::string engine;
  int paths;
};
std::string store_case_name(const ::testing::TestParamInfo<StoreCase>& info);

// A fixture whose open_store(tag) opens a fresh store for its case (temp_store_config), or
// skips the test, saying why, when the case asks for io_uring and it is unusable here.
class StoreCaseTest : public ::testing::TestWithParam<StoreCase> {
 protected:
  void open_store(const std::string& tag);

  StoreConfig config_;
  std::unique_ptr<MatrixStore> store_;
};

// Flips one bit of the byte at `offset` of file `path` (a corrupted segment for the checksums).
Status flip_bit(const std::string& path, uint64_t offset);

// Reads stripe I from column c0 and returns its (h x (n - c0)) values, column-major.
Result<std::vector<double>> read_part_values(StripedMatrix& m, int64_t I, int64_t c0);

// Writes the values (h x (n - c0), column-major) as stripe I from column c0, preserving the
// columns before c0 (read first).
Status write_part_values(StripedMatrix& m, int64_t I, int64_t c0, const std::vector<double>& v);

}  // namespace stripesolve::storage
