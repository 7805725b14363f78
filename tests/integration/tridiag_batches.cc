#include "tests/integration/tridiag_batches.h"

#include <numeric>

#include <gtest/gtest.h>

#include "client/commands.h"
#include "tests/integration/npy_files.h"
#include "tridiag/gallery.h"

namespace stripesolve::testing {
namespace {

// Fills system j from the gallery: diagonally dominant, or U(-1, 1) entries on all three
// diagonals (nonsingular with probability one, not always well conditioned).
void fill(TridiagBatch& b, MatrixKind kind, uint64_t seed) {
  const std::size_t total = std::accumulate(b.sizes.begin(), b.sizes.end(), std::size_t{0});
  for (auto* a : {&b.dl, &b.d, &b.du, &b.rhs}) a->assign(total, 0.0);
  for (std::size_t j = 0; j < b.systems(); ++j) {
    const std::size_t n = b.sizes[j];
    const uint64_t s = seed * 1000003 + j;
    tridiag::TridiagonalMatrix m;
    if (kind == MatrixKind::kDiagonallyDominant) {
      m = tridiag::diagonally_dominant_matrix(n, s);
    } else {
      m = {tridiag::random_vector(n, 3 * s), tridiag::random_vector(n, 3 * s + 1),
           tridiag::random_vector(n, 3 * s + 2)};
    }
    const std::vector<double> f = tridiag::random_vector(n, s ^ 0x5eed);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t k = b.index(j, i);
      b.dl[k] = m.dl[i];
      b.d[k] = m.d[i];
      b.du[k] = m.du[i];
      b.rhs[k] = f[i];
    }
  }
}

}  // namespace

std::size_t TridiagBatch::index(std::size_t j, std::size_t i) const {
  switch (layout) {
    case tridiag::BatchLayout::kStrided:
      return j * sizes[0] + i;
    case tridiag::BatchLayout::kInterleaved:
      return i * systems() + j;
    case tridiag::BatchLayout::kRagged:
      break;
  }
  return std::accumulate(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(j),
                         std::size_t{0}) +
         i;
}

std::vector<double> TridiagBatch::gather(const std::vector<double>& values, std::size_t j) const {
  std::vector<double> out(sizes[j]);
  for (std::size_t i = 0; i < sizes[j]; ++i) out[i] = values[index(j, i)];
  return out;
}

TridiagBatch strided_batch(std::size_t m, std::size_t n, MatrixKind kind, uint64_t seed) {
  TridiagBatch b;
  b.shape = {static_cast<int64_t>(m), static_cast<int64_t>(n)};
  b.sizes.assign(m, n);
  fill(b, kind, seed);
  return b;
}

TridiagBatch single_system(std::size_t n, MatrixKind kind, uint64_t seed) {
  TridiagBatch b;
  b.shape = {static_cast<int64_t>(n)};
  b.sizes = {n};
  fill(b, kind, seed);
  return b;
}

TridiagBatch interleaved_batch(std::size_t n, std::size_t m, MatrixKind kind, uint64_t seed) {
  TridiagBatch b;
  b.layout = tridiag::BatchLayout::kInterleaved;
  b.shape = {static_cast<int64_t>(n), static_cast<int64_t>(m)};
  b.sizes.assign(m, n);
  fill(b, kind, seed);
  return b;
}

TridiagBatch ragged_batch(const std::vector<std::size_t>& sizes, MatrixKind kind, uint64_t seed) {
  TridiagBatch b;
  b.layout = tridiag::BatchLayout::kRagged;
  b.sizes = sizes;
  b.shape = {static_cast<int64_t>(std::accumulate(sizes.begin(), sizes.end(), std::size_t{0}))};
  fill(b, kind, seed);
  return b;
}

void narrow_to_float(TridiagBatch& b) {
  for (auto* a : {&b.dl, &b.d, &b.du, &b.rhs}) {
    for (double& v : *a) v = static_cast<double>(static_cast<float>(v));
  }
}

BatchFiles write_batch_as(const std::string& dir, const std::string& prefix, const TridiagBatch& b,
                          const NpyFormat& format) {
  BatchFiles f{dir + "/" + prefix + "dl.npy", dir + "/" + prefix + "d.npy",
               dir + "/" + prefix + "du.npy", dir + "/" + prefix + "rhs.npy"};
  write_npy_as(f.dl, b.shape, b.dl, format);
  write_npy_as(f.d, b.shape, b.d, format);
  write_npy_as(f.du, b.shape, b.du, format);
  write_npy_as(f.rhs, b.shape, b.rhs, format);
  return f;
}

BatchFiles write_batch(const std::string& dir, const std::string& prefix, const TridiagBatch& b,
                       bool float32) {
  return write_batch_as(
      dir, prefix, b,
      {.dtype = float32 ? protocol::NpyDtype::kFloat32 : protocol::NpyDtype::kFloat64});
}

client::TridiagRequest request_for(const BatchFiles& files) {
  client::TridiagRequest r;
  r.dl_path = files.dl;
  r.d_path = files.d;
  r.du_path = files.du;
  r.rhs_path = files.rhs;
  return r;
}

nlohmann::json solve(client::Connection& c, client::TridiagRequest request,
                     const std::string& out) {
  request.out_path = out;
  auto job = client::build_tridiag_job(request);
  EXPECT_TRUE(job.is_ok()) << job.status().to_string();
  if (!job.is_ok()) return {};
  auto done = client::run_request(c, *job, nullptr);
  EXPECT_TRUE(done.is_ok()) << done.status().to_string();
  return done.is_ok() ? *done : nlohmann::json{};
}

}  // namespace stripesolve::testing
