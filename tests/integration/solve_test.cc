// Integration: dense solves through the daemon (B passed as an .npy file descriptor, X written into
// the client's .npy) checked against LAPACK dgesv; cancel in the middle of a solve.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "client/commands.h"
#include "protocol/npy.h"
#include "storage/generators.h"
#include "stripe/dense_reference.h"
#include "tests/integration/daemon_fixture.h"
#include "tests/integration/npy_files.h"

namespace stripesolve::testing {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;

std::vector<double> regenerate(int64_t n, uint64_t seed) {
  std::vector<double> a(static_cast<size_t>(n * n));
  const storage::GeneratorSpec spec{"uniform", seed};
  for (int64_t c = 0; c < n; ++c) {
    for (int64_t r = 0; r < n; ++r) a[c * n + r] = storage::generated_value(spec, n, r, c);
  }
  return a;
}

void create_matrix(client::Connection& c, const std::string& name, int64_t n, int64_t seed,
                   int64_t stripe_rows) {
  auto r = client::run_job(c, {{"type", "matrix_create"},
                               {"name", name},
                               {"n", n},
                               {"generator", "uniform"},
                               {"seed", seed},
                               {"stripe_rows", stripe_rows}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ((*r)["state"], "COMPLETED") << r->dump();
}

class SolveIntegration : public ::testing::TestWithParam<std::string> {};

TEST_P(SolveIntegration, RoundTripAgainstLapack) {
  const std::string pivot = GetParam();
  DaemonFixture d;
  auto c = d.connect();
  const int64_t n = 360, nrhs = 2;
  create_matrix(*c, "A", n, 11, 48);
  // B as a C-ordered (n, 2) .npy, passed as a descriptor.
  const std::vector<double> b = stripe::uniform_matrix(n, nrhs, 99);  // column-major
  std::string npy = protocol::make_npy_header({n, nrhs}, false);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < nrhs; ++j) npy.append(reinterpret_cast<const char*>(&b[j * n + i]), 8);
  }
  const std::string rhs_path = d.dir() + "/b.npy";
  std::ofstream(rhs_path, std::ios::binary) << npy;
  client::SolveRequest req;
  req.matrix = "A";
  req.rhs_path = rhs_path;
  req.pivot = pivot;
  req.refinement = pivot == "local" ? "1" : "0";
  // The solution goes into the .npy through the descriptor of the client's temporary.
  const std::string out = d.dir() + "/x.npy";
  req.out_path = out;
  auto job = client::build_solve_job(req);
  ASSERT_TRUE(job.is_ok()) << job.status().to_string();
  uint64_t job_id = 0;
  auto done = client::run_request(*c, *job, nullptr, &job_id);
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  auto id = std::optional<uint64_t>(job_id);
  ASSERT_EQ((*done)["state"], "COMPLETED") << done->dump();

  int64_t rows = 0, cols = 0;
  auto x = protocol::npy_to_column_major(read_file(out), &rows, &cols);
  ASSERT_TRUE(x.is_ok()) << x.status().to_string();
  ASSERT_EQ(rows, n);
  ASSERT_EQ(cols, nrhs);
  const std::vector<double> a = regenerate(n, 11);
  const double residual = stripe::scaled_residual(a.data(), n, x->data(), b.data(), nrhs);
  EXPECT_LT(residual, 1e-13) << pivot;
  EXPECT_GT(stripe::max_abs(*x), 0.0);
  const std::vector<double> ref = stripe::lapack_solve(a, n, b, nrhs);
  ASSERT_FALSE(ref.empty());
  const double ref_residual = stripe::scaled_residual(a.data(), n, ref.data(), b.data(), nrhs);
  EXPECT_LT(residual, 100 * std::max(ref_residual, 1e-16))
      << "daemon " << residual << " vs dgesv " << ref_residual;
  double diff = 0;
  for (size_t k = 0; k < ref.size(); ++k) diff = std::max(diff, std::abs((*x)[k] - ref[k]));
  EXPECT_LT(diff / stripe::max_abs(ref), 1e-8);
  // The daemon's own residual matches. The budget (16 MiB) holds A twice: it read a copy of A
  // kept in RAM (on a GPU machine, the copy the device keeps, of A^T for gepp), not A from the
  // store again (gepp on the CPU, which factors A^T, reads the store).
  EXPECT_LT((*done)["result"]["residual"].get<double>(), 1e-13);
  const bool on_gpu = (*done)["result"].value("backend", std::string()) == "cuda";
  EXPECT_EQ((*done)["result"].value("residual_from", std::string()), on_gpu            ? "device"
                                                                     : pivot == "gepp" ? "store"
                                                                                       : "ram")
      << done->dump();
  // The trace holds the engine's roles.
  auto trace = c->call(MessageType::kTrace, {{"job", *id}});
  ASSERT_TRUE(trace.is_ok());
  EXPECT_GT((*trace)["trace"]["traceEvents"].size(), 3u);
}

INSTANTIATE_TEST_SUITE_P(Pivots, SolveIntegration, ::testing::Values("row", "gepp", "local"));

// Solves `rhs_shape` right-hand sides (C-order `values`) of matrix A through the CLI's request
// into x.npy; the finished job.
nlohmann::json solve_file(DaemonFixture& d, client::Connection& c,
                          const std::vector<int64_t>& rhs_shape,
                          const std::vector<double>& values) {
  const std::string rhs_path = d.dir() + "/b.npy";
  write_npy(rhs_path, rhs_shape, values);
  client::SolveRequest req;
  req.matrix = "A";
  req.rhs_path = rhs_path;
  req.out_path = d.dir() + "/x.npy";
  auto job = client::build_solve_job(req);
  EXPECT_TRUE(job.is_ok()) << job.status().to_string();
  if (!job.is_ok()) return {};
  auto done = client::run_request(c, *job, nullptr, nullptr);
  EXPECT_TRUE(done.is_ok()) << done.status().to_string();
  return done.is_ok() ? *done : nlohmann::json{};
}

// Issue 17, right-hand sides: NaN or Inf is refused naming its row and column (a solve would
// spread it through the solution), and the solution has the right-hand sides' shape.
TEST(SolveRightHandSides, NonFiniteValuesAreRefusedNamingRowAndColumn) {
  DaemonFixture d;
  auto c = d.connect();
  const int64_t n = 64;
  create_matrix(*c, "A", n, 5, 16);
  std::vector<double> b(static_cast<size_t>(n * 2), 1.0);  // C order (n, 2)
  b[7 * 2 + 1] = std::numeric_limits<double>::quiet_NaN();
  nlohmann::json done = solve_file(d, *c, {n, 2}, b);
  EXPECT_EQ(done["state"], "FAILED") << done.dump();
  EXPECT_EQ(done["error"]["message"],
            "the right-hand sides hold a non-finite value (NaN) at row 7, column 1");
  std::vector<double> v(static_cast<size_t>(n), 2.0);
  v[63] = -std::numeric_limits<double>::infinity();
  done = solve_file(d, *c, {n}, v);
  EXPECT_EQ(done["state"], "FAILED") << done.dump();
  EXPECT_EQ(done["error"]["message"],
            "the right-hand sides hold a non-finite value (-Inf) at row 63, column 0");
}

TEST(SolveRightHandSides, TheSolutionHasTheRightHandSidesShape) {
  DaemonFixture d;
  auto c = d.connect();
  const int64_t n = 64;
  create_matrix(*c, "A", n, 5, 16);
  const std::vector<double> b(static_cast<size_t>(n), 1.0);
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{n, 1}, std::vector<int64_t>{n}}) {
    nlohmann::json done = solve_file(d, *c, shape, b);
    ASSERT_EQ(done["state"], "COMPLETED") << done.dump();
    const NpyArray x = read_npy(d.dir() + "/x.npy");
    EXPECT_EQ(x.shape, shape);
    EXPECT_GT(stripe::max_abs(x.values), 0.0);
  }
}

// Issue 17: the right-hand sides take what `matrix import` takes (float32, big-endian, Fortran
// order), and each gives the solution of the same values.
TEST(SolveRightHandSides, EveryLayoutMatrixImportTakesGivesTheSameSolution) {
  DaemonFixture d;
  auto c = d.connect();
  const int64_t n = 64;
  create_matrix(*c, "A", n, 5, 16);
  std::vector<double> b(static_cast<size_t>(n * 3));  // C order (n, 3), exact in float32
  for (size_t k = 0; k < b.size(); ++k)
    b[k] = static_cast<double>(static_cast<int>(k % 13) - 6) / 4;
  nlohmann::json done = solve_file(d, *c, {n, 3}, b);
  ASSERT_EQ(done["state"], "COMPLETED") << done.dump();
  const NpyArray reference = read_npy(d.dir() + "/x.npy");
  ASSERT_EQ(reference.shape, (std::vector<int64_t>{n, 3}));
  ASSERT_GT(stripe::max_abs(reference.values), 0.0);
  using protocol::NpyDtype;
  for (const NpyFormat& format :
       {NpyFormat{NpyDtype::kFloat64, true, false}, NpyFormat{NpyDtype::kFloat64, false, true},
        NpyFormat{NpyDtype::kFloat64, true, true}, NpyFormat{NpyDtype::kFloat32, false, true},
        NpyFormat{NpyDtype::kFloat32, true, false}}) {
    const std::string what = fmt::format("{}, {}, {} order", protocol::npy_dtype_name(format.dtype),
                                         format.big_endian ? "big-endian" : "little-endian",
                                         format.fortran_order ? "Fortran" : "C");
    write_npy_as(d.dir() + "/b.npy", {n, 3}, b, format);
    client::SolveRequest req;
    req.matrix = "A";
    req.rhs_path = d.dir() + "/b.npy";
    req.out_path = d.dir() + "/x_layout.npy";
    auto job = client::build_solve_job(req);
    ASSERT_TRUE(job.is_ok()) << what << ": " << job.status().to_string();
    auto finished = client::run_request(*c, *job, nullptr, nullptr);
    ASSERT_TRUE(finished.is_ok()) << what << ": " << finished.status().to_string();
    ASSERT_EQ((*finished)["state"], "COMPLETED") << what << ": " << finished->dump();
    const NpyArray x = read_npy(req.out_path);
    ASSERT_EQ(x.shape, reference.shape) << what;
    double most = 0;  // the same values; reused factors may round the substitution differently
    for (size_t k = 0; k < x.values.size(); ++k)
      most = std::max(most, std::abs(x.values[k] - reference.values[k]));
    EXPECT_LE(most, 1e-12 * stripe::max_abs(reference.values)) << what;
  }
}

// Imports `a` (C order n x n) as `name` and solves it with `pivot` (generated right-hand side);
// the finished job.
nlohmann::json import_and_solve(DaemonFixture& d, client::Connection& c, const std::string& name,
                                int64_t n, const std::vector<double>& a, const std::string& pivot) {
  write_npy(d.dir() + "/" + name + ".npy", {n, n}, a);
  auto import = client::build_import_job(name, d.dir() + "/" + name + ".npy", 0);
  EXPECT_TRUE(import.is_ok());
  if (!import.is_ok()) return {};
  (void)client::run_request(c, *import, nullptr);
  client::SolveRequest req;
  req.matrix = name;
  req.pivot = pivot;
  auto job = client::build_solve_job(req);
  EXPECT_TRUE(job.is_ok());
  if (!job.is_ok()) return {};
  auto done = client::run_request(c, *job, nullptr);
  EXPECT_TRUE(done.is_ok()) << done.status().to_string();
  return done.is_ok() ? *done : nlohmann::json{};
}

// Issue 17: a singular matrix says so, whichever engine solves it; a zero pivot that a mode
// without a full search met says the matrix may still be regular and what to try.
TEST(SolveSingular, AZeroPivotIsSaidInTheUsersTerms) {
  DaemonFixture d;
  auto c = d.connect();
  // A zero row stays exactly zero through every update, so partial pivoting meets an exact zero
  // pivot on any engine.
  const std::vector<double> zero_row = {1, 2, 3, 0, 0, 0, 4, 5, 7};
  // Row 1 = 2 x row 0: exact arithmetic meets a zero pivot; the GPU's order of operations may
  // leave one of rounding size instead, and the solve then ends with the warning.
  const std::vector<double> dependent = {1, 2, 3, 2, 4, 6, 0, 1, 5};
  for (const std::string pivot : {"row", "gepp"}) {
    const std::string name = "Z" + pivot;
    nlohmann::json done = import_and_solve(d, *c, name, 3, zero_row, pivot);
    ASSERT_EQ(done["state"], "FAILED") << done.dump();
    EXPECT_EQ(done["error"]["code"], "Numerical");
    const std::string message = done["error"]["message"];
    EXPECT_EQ(message.rfind("matrix '" + name + "' is singular: zero pivot at row", 0), 0u)
        << message;
    done = import_and_solve(d, *c, "D" + pivot, 3, dependent, pivot);
    if (done["state"] == "FAILED") {
      EXPECT_NE(done["error"]["message"].get<std::string>().find("is singular"), std::string::npos)
          << done.dump();
    } else {
      ASSERT_EQ(done["state"], "COMPLETED_WITH_WARNING") << done.dump();
      EXPECT_NE(done["warning"].get<std::string>().find("singular to working precision"),
                std::string::npos)
          << done.dump();
    }
  }
  const std::vector<double> exchange = {0, 1, 1, 0};  // regular, but a zero first pivot
  const nlohmann::json none = import_and_solve(d, *c, "P", 2, exchange, "none");
  EXPECT_EQ(none["state"], "FAILED") << none.dump();
  EXPECT_EQ(none["error"]["message"],
            "zero pivot at row 0 with pivot none, which does not search the whole row for a "
            "nonzero pivot: the matrix may still be regular; try pivot row (the default) or gepp");
  client::SolveRequest req;
  req.matrix = "P";
  auto row = client::build_solve_job(req);
  ASSERT_TRUE(row.is_ok());
  auto solved = client::run_request(*c, *row, nullptr);
  ASSERT_TRUE(solved.is_ok());
  EXPECT_EQ((*solved)["state"], "COMPLETED") << solved->dump();
}

TEST(SolveCancelIntegration, CancelMidSolveLeavesStoreConsistentAndDaemonHealthy) {
  DaemonFixture d([](daemon::DaemonConfig& c) { c.engine.progress_interval_seconds = 0.01; });
  auto c = d.connect();
  const int64_t n = 1600;
  create_matrix(*c, "big", n, 3, 40);
  client::SolveRequest req;
  req.matrix = "big";
  auto job = client::build_solve_job(req);
  auto id = client::submit_request(*c, *job);
  ASSERT_TRUE(id.is_ok());
  // Cancel as soon as the factorization has made progress.
  bool cancelled = false;
  for (int i = 0; i < 20000 && !cancelled; ++i) {
    auto st = c->call(MessageType::kStatus, {{"job", *id}});
    ASSERT_TRUE(st.is_ok());
    const auto& p = (*st)["progress"];
    if ((*st)["state"] != "RUNNING" && (*st)["state"] != "PENDING") break;
    if (p.value("stripes_done", 0) >= 2) {
      ASSERT_TRUE(c->call(MessageType::kCancel, {{"job", *id}}).is_ok());
      cancelled = true;
    } else {
      std::this_thread::sleep_for(1ms);
    }
  }
  ASSERT_TRUE(cancelled) << "the solve ended before it could be cancelled";
  auto done = client::follow_job(*c, *id, "", nullptr);
  ASSERT_TRUE(done.is_ok());
  EXPECT_EQ((*done)["state"], "CANCELLED") << done->dump();
  // Consistent store: the matrix is intact and no half-made factor is visible.
  auto list = client::list_matrices(*c);
  ASSERT_TRUE(list.is_ok());
  ASSERT_EQ(list->size(), 1u) << list->dump();
  EXPECT_EQ((*list)[0]["name"], "big");
  EXPECT_EQ((*list)[0]["state"], "complete");
  // Healthy: a smaller solve on a new matrix completes with a good residual.
  create_matrix(*c, "small", 200, 4, 50);
  req.matrix = "small";
  auto job2 = client::build_solve_job(req);
  auto id2 = client::submit_request(*c, *job2);
  auto done2 = client::follow_job(*c, *id2, "", nullptr);
  ASSERT_TRUE(done2.is_ok());
  EXPECT_EQ((*done2)["state"], "COMPLETED") << done2->dump();
  EXPECT_LT((*done2)["result"]["residual"].get<double>(), 1e-13);
}

}  // namespace
}  // namespace stripesolve::testing
