// Tridiagonal batches for the integration tests: random systems (tridiag/gallery.h) laid out as
// the daemon takes them (strided, interleaved, one system, ragged), written as .npy files, and
// gathered back system by system to compare with LAPACK.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/connection.h"
#include "client/tridiag_request.h"
#include "tests/integration/npy_files.h"
#include "tridiag/tridiag.h"

namespace stripesolve::testing {

enum class MatrixKind { kDiagonallyDominant, kGeneral };
// For test names and messages (GoogleTest finds it by ADL).
inline void PrintTo(MatrixKind kind, std::ostream* os) {
  *os << (kind == MatrixKind::kDiagonallyDominant ? "diagonally dominant" : "general");
}

struct TridiagBatch {
  tridiag::BatchLayout layout = tridiag::BatchLayout::kStrided;
  std::vector<int64_t> shape;          // .npy shape of every array
  std::vector<std::size_t> sizes;      // one per system
  std::vector<double> dl, d, du, rhs;  // C order of `shape`

  std::size_t systems() const { return sizes.size(); }
  // Flat index of element i of system j.
  std::size_t index(std::size_t j, std::size_t i) const;
  // Element i of system j of `values` (an array of `shape`), for every i.
  std::vector<double> gather(const std::vector<double>& values, std::size_t j) const;
};

// (m, n): m systems of n one after another.
TridiagBatch strided_batch(std::size_t m, std::size_t n, MatrixKind kind, uint64_t seed);
// (n,): one system.
TridiagBatch single_system(std::size_t n, MatrixKind kind, uint64_t seed);
// (n, m): element i of every system together.
TridiagBatch interleaved_batch(std::size_t n, std::size_t m, MatrixKind kind, uint64_t seed);
// (sum of sizes,): systems of different sizes one after another.
TridiagBatch ragged_batch(const std::vector<std::size_t>& sizes, MatrixKind kind, uint64_t seed);

struct BatchFiles {
  std::string dl, d, du, rhs;
};
// Writes dl.npy, d.npy, du.npy, rhs.npy under `dir` with `prefix` (float32 when asked).
BatchFiles write_batch(const std::string& dir, const std::string& prefix, const TridiagBatch& batch,
                       bool float32 = false);
// The same in any format write_npy_as takes.
BatchFiles write_batch_as(const std::string& dir, const std::string& prefix,
                          const TridiagBatch& batch, const NpyFormat& format);
client::TridiagRequest request_for(const BatchFiles& files);

// Rounds every value through float (what a float32 file holds).
void narrow_to_float(TridiagBatch& batch);

// Submits the request with `out` as its output (the daemon writes the solution through the
// descriptor of the client's temporary) and follows the job to its end; the final job, or {}
// after a test failure.
nlohmann::json solve(client::Connection& c, client::TridiagRequest request, const std::string& out);

}  // namespace stripesolve::testing
