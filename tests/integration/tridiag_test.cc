// Integration: tridiagonal batches through the daemon (dl, d, du, rhs passed as .npy file
// descriptors, x written into the client's .npy of the rhs's shape, or streamed by `result`),
// every system checked against LAPACK dgtsv.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "client/commands.h"
#include "tests/integration/daemon_fixture.h"
#include "tests/integration/npy_files.h"
#include "tests/integration/tridiag_batches.h"
#include "tridiag/gallery.h"
#include "tridiag/gpu.h"
#include "tridiag/lapack_reference.h"

namespace stripesolve::testing {
namespace {

// Normwise backward error ||A x - f||_inf / (||A||_inf ||x||_inf + ||f||_inf) of one system.
double backward_error(const std::vector<double>& dl, const std::vector<double>& d,
                      const std::vector<double>& du, const std::vector<double>& x,
                      const std::vector<double>& f) {
  const std::size_t n = d.size();
  double r_max = 0, a_max = 0, x_max = 0, f_max = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double lo = i > 0 ? dl[i] : 0.0, up = i + 1 < n ? du[i] : 0.0;
    const double ax =
        (i > 0 ? lo * x[i - 1] : 0.0) + d[i] * x[i] + (i + 1 < n ? up * x[i + 1] : 0.0);
    r_max = std::max(r_max, std::abs(ax - f[i]));
    a_max = std::max(a_max, std::abs(lo) + std::abs(d[i]) + std::abs(up));
    x_max = std::max(x_max, std::abs(x[i]));
    f_max = std::max(f_max, std::abs(f[i]));
  }
  return r_max / (a_max * x_max + f_max);
}

// Checks every system of x (the daemon's solution, laid out like rhs) against LAPACK dgtsv:
// a normwise backward error within 10 n eps (and a relative residual below 1e-9), and for
// well-conditioned batches the same solution to 1e-12. Returns the largest relative residual as
// the daemon computes it.
double expect_matches_lapack(const TridiagBatch& b, const std::vector<double>& x,
                             bool well_conditioned) {
  EXPECT_EQ(x.size(), b.rhs.size());
  if (x.size() != b.rhs.size()) return INFINITY;
  double worst = 0;
  for (std::size_t j = 0; j < b.systems(); ++j) {
    const std::size_t n = b.sizes[j];
    const auto dl = b.gather(b.dl, j), d = b.gather(b.d, j), du = b.gather(b.du, j),
               f = b.gather(b.rhs, j);
    const auto xj = b.gather(x, j);
    std::vector<double> ref;
    EXPECT_EQ(tridiag::lapack_dgtsv(dl.data(), d.data(), du.data(), f.data(), n, ref), 0)
        << "system " << j;
    const double r =
        tridiag::relative_residual(dl.data(), d.data(), du.data(), xj.data(), f.data(), n);
    const double r_ref =
        tridiag::relative_residual(dl.data(), d.data(), du.data(), ref.data(), f.data(), n);
    // Beside dgtsv (GEPP) the bound is what a backward-stable solver guarantees: a normwise
    // backward error within a small multiple of n eps. The daemon's default on a GPU machine is
    // SPIKE with diagonal pivoting (000 §III), whose residual on random systems was seen at
    // 133x dgtsv's (8.1e-14 vs 6.1e-16, n = 257: about 1.4 n eps as a relative residual), so
    // "within 100x of dgtsv" would be a bound on GEPP, not on stability.
    const double eta = backward_error(dl, d, du, xj, f);
    EXPECT_LE(eta, 10.0 * static_cast<double>(n) * 2.220446049250313e-16)
        << "system " << j << ": backward error " << eta << ", relative residual " << r << " (dgtsv "
        << r_ref << ")";
    EXPECT_LT(r, 1e-9) << "system " << j;
    double x_max = 0, diff = 0, ref_max = 0;
    for (std::size_t i = 0; i < n; ++i) {
      x_max = std::max(x_max, std::abs(xj[i]));
      ref_max = std::max(ref_max, std::abs(ref[i]));
      diff = std::max(diff, std::abs(xj[i] - ref[i]));
    }
    EXPECT_GT(x_max, 0.0) << "system " << j << " is trivially zero";
    if (well_conditioned) {
      EXPECT_LT(diff / ref_max, 1e-12) << "system " << j;
    }
    // The figure the daemon reports: in double (tridiag::solution_quality), not r's long double.
    worst = std::max(
        worst, tridiag::solution_quality(dl.data(), d.data(), du.data(), xj.data(), f.data(), n)
                   .relative_residual);
  }
  return worst;
}

// The solution the daemon wrote to `out`: float64 of `shape`, every system checked against LAPACK
// (expect_matches_lapack). Returns the largest relative residual (infinity for a wrong shape).
double expect_solution_matches_lapack(const std::string& out, const std::vector<int64_t>& shape,
                                      const TridiagBatch& b, bool well_conditioned) {
  const NpyArray x = read_npy(out);
  EXPECT_EQ(x.shape, shape);
  EXPECT_EQ(x.dtype, protocol::NpyDtype::kFloat64);  // solutions are always float64
  if (x.shape != shape) return INFINITY;
  return expect_matches_lapack(b, x.values, well_conditioned);
}

// Expects the job's result to hold each of `fields` with its value.
void expect_result_fields(const nlohmann::json& job, const nlohmann::json& fields) {
  for (const auto& [key, value] : fields.items()) {
    EXPECT_EQ(job["result"][key], value) << key << " in " << job["result"].dump();
  }
}

// Device auto's choice for a job: the CPU without a GPU, else the path this host measured
// quicker (daemon/tridiag_auto_device.h), said in a note; and the algorithm auto (stable) runs
// there.
void expect_auto_device(const nlohmann::json& job) {
  const auto& r = job["result"];
  const std::string device = r["device"];
  if (!tridiag::gpu_available()) {
    EXPECT_EQ(device, "cpu");
  }
  EXPECT_EQ(r["algorithm"], device == "gpu" ? "spike" : "gepp") << r.dump();
  const std::string note =
      device == "gpu" ? "device auto chose the GPU" : "device auto chose the CPU";
  EXPECT_TRUE(std::ranges::any_of(r["notes"], [&](const nlohmann::json& n) {
    return n.get<std::string>().starts_with(note);
  })) << r.dump();
}

// Each test with a daemon of its own and a connection to it.
class TridiagIntegration : public ::testing::Test {
 protected:
  DaemonFixture d_;
  std::unique_ptr<client::Connection> c_ = d_.connect();
};

class TridiagRoundTrip : public TridiagIntegration,
                         public ::testing::WithParamInterface<MatrixKind> {};

TEST_P(TridiagRoundTrip, StridedBatchMatchesLapack) {
  const MatrixKind kind = GetParam();
  const bool dominant = kind == MatrixKind::kDiagonallyDominant;
  const TridiagBatch b = strided_batch(50, 257, kind, dominant ? 1 : 2);
  const std::string out = d_.dir() + "/x.npy";
  nlohmann::json job = solve(*c_, request_for(write_batch(d_.dir(), "", b)), out);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump();
  EXPECT_EQ(job["lane"], "tridiag");
  const double worst = expect_solution_matches_lapack(out, {50, 257}, b, dominant);
  const auto& r = job["result"];
  expect_result_fields(job, {{"shape", {50, 257}},
                             {"systems", 50},
                             {"unknowns", 50 * 257},
                             {"layout", "strided"},
                             {"dtype", "float64"},
                             {"requested_algorithm", "auto"}});
  expect_auto_device(job);
  EXPECT_GE(r["seconds"].get<double>(), 0.0);
  // The daemon's residual is computed on the same arrays with the same formula.
  EXPECT_DOUBLE_EQ(r["max_relative_residual"].get<double>(), worst);
  ASSERT_TRUE(r["notes"].is_array());
  EXPECT_NE(r["notes"].dump().find("auto chose"), std::string::npos) << r["notes"].dump();

  // The unpivoted choice on the same batch: thomas on the CPU, spike-thomas on the GPU; general
  // matrices may break down on some systems and fall back to gepp (said in the notes).
  client::TridiagRequest unstable = request_for(write_batch(d_.dir(), "u", b));
  unstable.unstable_ok = true;
  unstable.device = "cpu";
  const std::string out2 = d_.dir() + "/x2.npy";
  nlohmann::json job2 = solve(*c_, unstable, out2);
  ASSERT_EQ(job2["state"], "COMPLETED") << job2.dump();
  expect_result_fields(job2, {{"algorithm", "thomas"}, {"device", "cpu"}});
  // Without pivoting a general matrix may lose digits without breaking down: only the
  // diagonally dominant batch is held to LAPACK's accuracy.
  if (dominant) expect_matches_lapack(b, read_npy(out2).values, true);
}

// The GPU path through the daemon, asked for by name (device auto may take the CPU on a host
// whose cores are quicker than the copies).
TEST_P(TridiagRoundTrip, GpuDeviceMatchesLapack) {
  if (!tridiag::gpu_available()) GTEST_SKIP() << "no CUDA device: the GPU path is not tested here";
  const MatrixKind kind = GetParam();
  const bool dominant = kind == MatrixKind::kDiagonallyDominant;
  const TridiagBatch b = strided_batch(64, 1000, kind, dominant ? 6 : 7);
  client::TridiagRequest req = request_for(write_batch(d_.dir(), "", b));
  req.device = "gpu";
  const std::string out = d_.dir() + "/x.npy";
  nlohmann::json job = solve(*c_, req, out);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump();
  expect_result_fields(job, {{"device", "gpu"}, {"algorithm", "spike"}, {"systems", 64}});
  const double worst = expect_solution_matches_lapack(out, {64, 1000}, b, dominant);
  EXPECT_DOUBLE_EQ(job["result"]["max_relative_residual"].get<double>(), worst);
}

std::string matrix_kind_name(const ::testing::TestParamInfo<MatrixKind>& param) {
  return param.param == MatrixKind::kDiagonallyDominant ? "DiagonallyDominant" : "General";
}

INSTANTIATE_TEST_SUITE_P(Matrices, TridiagRoundTrip,
                         ::testing::Values(MatrixKind::kDiagonallyDominant, MatrixKind::kGeneral),
                         matrix_kind_name);

TEST_F(TridiagIntegration, SingleSystemFromFloat32Arrays) {
  TridiagBatch b = single_system(1000, MatrixKind::kGeneral, 3);
  narrow_to_float(b);  // the reference sees exactly what the float32 files hold
  const std::string out = d_.dir() + "/x.npy";
  nlohmann::json job = solve(*c_, request_for(write_batch(d_.dir(), "", b, /*float32=*/true)), out);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump();
  expect_result_fields(job, {{"dtype", "float32"}, {"systems", 1}});
  expect_solution_matches_lapack(out, {1000}, b, false);
}

// Big-endian float64 arrays (which the daemon must not map and use as they lie) and big-endian
// float32 in Fortran order: the same solution as the little-endian files give.
TEST_F(TridiagIntegration, BigEndianArraysAreReadAsTheirValues) {
  const TridiagBatch b = strided_batch(3, 300, MatrixKind::kGeneral, 7);
  for (const NpyFormat& format :
       {NpyFormat{.big_endian = true}, NpyFormat{protocol::NpyDtype::kFloat32, true, true}}) {
    TridiagBatch expected = b;
    if (format.dtype == protocol::NpyDtype::kFloat32) narrow_to_float(expected);
    const std::string out = d_.dir() + "/x.npy";
    nlohmann::json job = solve(*c_, request_for(write_batch_as(d_.dir(), "", b, format)), out);
    ASSERT_EQ(job["state"], "COMPLETED") << job.dump();
    expect_solution_matches_lapack(out, {3, 300}, expected, false);
  }
}

TEST_F(TridiagIntegration, RaggedBatchFromAListAndFromAnNpy) {
  const TridiagBatch small = ragged_batch({3, 5, 2}, MatrixKind::kGeneral, 4);
  client::TridiagRequest req = request_for(write_batch(d_.dir(), "s", small));
  req.sizes = "3,5,2";
  const std::string out = d_.dir() + "/xs.npy";
  nlohmann::json job = solve(*c_, req, out);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump();
  EXPECT_EQ(job["params"]["sizes"], nlohmann::json({3, 5, 2}));  // small lists travel inline
  expect_result_fields(job, {{"layout", "ragged"}, {"systems", 3}});
  expect_solution_matches_lapack(out, {10}, small, false);

  // Sizes from 1 to 3000, n = 1 and n = 2 included, given as an int64 .npy.
  const std::vector<std::size_t> sizes = {1, 2, 3000, 17, 256, 1, 999};
  const TridiagBatch big = ragged_batch(sizes, MatrixKind::kDiagonallyDominant, 5);
  client::TridiagRequest req2 = request_for(write_batch(d_.dir(), "b", big));
  req2.sizes = d_.dir() + "/sizes.npy";
  write_npy_i64(req2.sizes, std::vector<int64_t>(sizes.begin(), sizes.end()));
  const std::string out2 = d_.dir() + "/xb.npy";
  nlohmann::json job2 = solve(*c_, req2, out2);
  ASSERT_EQ(job2["state"], "COMPLETED") << job2.dump();
  EXPECT_TRUE(job2["params"]["sizes"].contains("fd"));
  expect_solution_matches_lapack(out2, {4276}, big, true);
}

TEST_F(TridiagIntegration, InterleavedLayout) {
  const TridiagBatch b = interleaved_batch(257, 50, MatrixKind::kDiagonallyDominant, 6);
  client::TridiagRequest req = request_for(write_batch(d_.dir(), "", b));
  req.layout = "interleaved";
  req.algorithm = "thomas";
  const std::string out = d_.dir() + "/x.npy";
  nlohmann::json job = solve(*c_, req, out);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump();
  expect_result_fields(job, {{"layout", "interleaved"}, {"algorithm", "thomas"}, {"systems", 50}});
  expect_solution_matches_lapack(out, {257, 50}, b, true);
}

TEST_F(TridiagIntegration, ResultIsFetchedLaterAndWideRowsStream) {
  // Two systems of 600000 unknowns: one row of the (2, 600000) solution is 4.8 MB, more than a
  // frame's payload, so the stream must not be framed by the array's rows.
  const TridiagBatch b = strided_batch(2, 600000, MatrixKind::kDiagonallyDominant, 7);
  client::TridiagRequest req = request_for(write_batch(d_.dir(), "", b));
  req.device = "cpu";
  auto job = client::build_tridiag_job(req);
  ASSERT_TRUE(job.is_ok()) << job.status().to_string();
  auto id = client::submit_request(*c_, *job);
  ASSERT_TRUE(id.is_ok());
  auto done = client::follow_job(*c_, *id, "", nullptr);
  ASSERT_TRUE(done.is_ok());
  ASSERT_EQ((*done)["state"], "COMPLETED") << done->dump();
  EXPECT_EQ((*done)["solution"]["array_shape"], nlohmann::json({2, 600000}));
  const std::string out = d_.dir() + "/x.npy";
  std::vector<int64_t> shape;
  auto rows = client::fetch_result(*c_, *id, out, &shape);
  ASSERT_TRUE(rows.is_ok()) << rows.status().to_string();
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 600000}));
  expect_solution_matches_lapack(out, {2, 600000}, b, true);
}

}  // namespace
}  // namespace stripesolve::testing
