// Integration: what goes wrong with tridiagonal batches gets a clear, exact message (bad shapes,
// dtypes, sizes, NaN, singular systems, unknown algorithm, no GPU, the memory cap), and the jobs
// live like every other job (listed, cancelled, fetched later) through the API and the CLI.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "client/commands.h"
#include "gpu/devices.h"
#include "tests/integration/daemon_fixture.h"
#include "tests/integration/npy_files.h"
#include "tests/integration/tridiag_batches.h"
#include "tridiag/gpu.h"

namespace stripesolve::testing {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;

// Runs a request to its end; returns the final job.
nlohmann::json run_request(client::Connection& c, const client::TridiagRequest& request) {
  auto job = client::build_tridiag_job(request);
  EXPECT_TRUE(job.is_ok()) << job.status().to_string();
  if (!job.is_ok()) return {};
  auto done = client::wait_request(c, *job);
  EXPECT_TRUE(done.is_ok()) << done.status().to_string();
  return done.is_ok() ? *done : nlohmann::json{};
}

// The failure of a request: "<code>: <message>".
std::string failure(client::Connection& c, const client::TridiagRequest& request) {
  nlohmann::json job = run_request(c, request);
  EXPECT_EQ(job.value("state", std::string()), "FAILED") << job.dump();
  return job["error"].value("code", std::string()) + ": " +
         job["error"].value("message", std::string());
}

// The failure of the request for `files` after `change(request)`.
template <typename Change>
std::string failure(client::Connection& c, const BatchFiles& files, Change change) {
  client::TridiagRequest request = request_for(files);
  change(request);
  return failure(c, request);
}

TEST(TridiagErrors, NonFiniteInputsNameTheArrayAndIndex) {
  DaemonFixture d;
  auto c = d.connect();
  TridiagBatch one = single_system(40, MatrixKind::kDiagonallyDominant, 1);
  one.d[17] = std::nan("");
  EXPECT_EQ(failure(*c, request_for(write_batch(d.dir(), "a", one))),
            "InvalidArgument: d[17] is not finite (nan)");
  TridiagBatch batch = strided_batch(4, 20, MatrixKind::kDiagonallyDominant, 2);
  batch.rhs[57] = -INFINITY;
  EXPECT_EQ(failure(*c, request_for(write_batch(d.dir(), "b", batch))),
            "InvalidArgument: rhs[57] is not finite (-inf): system 2, row 17");
}

// The CPU solver tests the values as it reads them (no scan before the solve) and the daemon
// then names the batch's first: every array, every layout (strided and interleaved batches go
// through the vector lanes), the entries no solver reads (dl[0], du[n - 1]) too, and the first
// array in the order dl, d, du, rhs where several hold one.
TEST(TridiagErrors, EveryArraysNonFiniteValueIsRefusedNamingSystemAndRow) {
  DaemonFixture d;
  auto c = d.connect();
  const TridiagBatch batches[] = {
      strided_batch(40, 30, MatrixKind::kDiagonallyDominant, 12),
      interleaved_batch(30, 40, MatrixKind::kDiagonallyDominant, 13),
      ragged_batch({30, 7, 1, 50, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30},
                   MatrixKind::kDiagonallyDominant, 14)};
  struct Bad {
    int array;  // dl, d, du, rhs
    std::size_t system, row;
    double value;
  };
  const char* names[] = {"dl", "d", "du", "rhs"};
  int file = 0;
  // The request for a batch in its layout (ragged: its sizes inline).
  auto request = [&](const TridiagBatch& t, const std::string& prefix) {
    client::TridiagRequest r = request_for(write_batch(d.dir(), prefix, t));
    if (t.layout == tridiag::BatchLayout::kInterleaved) r.layout = "interleaved";
    if (t.layout == tridiag::BatchLayout::kRagged)
      r.sizes = fmt::format("{}", fmt::join(t.sizes, ","));
    return r;
  };
  for (const TridiagBatch& b : batches) {
    for (const Bad bad : {Bad{0, 0, 0, NAN}, Bad{0, 17, 5, INFINITY}, Bad{1, 9, 29, -INFINITY},
                          Bad{2, 16, 29, NAN}, Bad{3, 3, 12, INFINITY}}) {
      TridiagBatch t = b;
      std::vector<double>* arrays[] = {&t.dl, &t.d, &t.du, &t.rhs};
      const std::size_t row = std::min(bad.row, t.sizes[bad.system] - 1);
      const std::size_t flat = t.index(bad.system, row);
      (*arrays[bad.array])[flat] = bad.value;
      const std::string value = std::isnan(bad.value) ? "nan" : bad.value > 0 ? "inf" : "-inf";
      EXPECT_EQ(failure(*c, request(t, std::to_string(file++))),
                fmt::format("InvalidArgument: {}[{}] is not finite ({}): system {}, row {}",
                            names[bad.array], flat, value, bad.system, row));
    }
    // rhs in system 2 comes first in the batch, du in system 15 first in the order of arrays.
    TridiagBatch t = b;
    t.rhs[t.index(2, 0)] = NAN;
    t.du[t.index(15, 0)] = NAN;
    EXPECT_EQ(failure(*c, request(t, std::to_string(file++))),
              fmt::format("InvalidArgument: du[{}] is not finite (nan): system 15, row 0",
                          t.index(15, 0)));
  }
}

TEST(TridiagErrors, ShapesDtypesAndSizesAreChecked) {
  DaemonFixture d;
  auto c = d.connect();
  const TridiagBatch b = strided_batch(50, 257, MatrixKind::kDiagonallyDominant, 3);
  const BatchFiles good = write_batch(d.dir(), "", b);
  // du of the wrong shape.
  const std::string du_short = d.dir() + "/du_short.npy";
  write_npy(du_short, {50, 256}, std::vector<double>(50 * 256, 1.0));
  EXPECT_EQ(failure(*c, good, [&](auto& req) { req.du_path = du_short; }),
            "InvalidArgument: du has shape (50, 256) but rhs has shape (50, 257); dl, d, du and "
            "rhs must all have the same shape");
  // d as float32 beside float64 arrays.
  const std::string d32 = d.dir() + "/d32.npy";
  write_npy_f32(d32, b.shape, b.d);
  EXPECT_EQ(failure(*c, good, [&](auto& req) { req.d_path = d32; }),
            "InvalidArgument: d is float32 but rhs is float64; dl, d, du and rhs must all have the "
            "same dtype");
  // Not an .npy at all.
  const std::string text = d.dir() + "/rhs.txt";
  std::ofstream(text) << "1 2 3\n";
  EXPECT_EQ(failure(*c, good, [&](auto& req) { req.rhs_path = text; }),
            "InvalidArgument: rhs: npy: bad magic (not a .npy file)");
  // Ragged sizes that do not add up, and sizes with 2-D arrays.
  const BatchFiles ragged =
      write_batch(d.dir(), "r", ragged_batch({3, 5, 2}, MatrixKind::kDiagonallyDominant, 4));
  EXPECT_EQ(failure(*c, ragged, [](auto& req) { req.sizes = "3,5,3"; }),
            "InvalidArgument: the sizes add up to 11 unknowns but rhs has 10 elements");
  EXPECT_EQ(failure(*c, good, [](auto& req) { req.sizes = "12850"; }),
            "InvalidArgument: with sizes the arrays must be 1-D (the systems one after another), "
            "rhs has shape (50, 257)");
  // A sizes file of floats.
  const std::string sizes_f = d.dir() + "/sizes_f.npy";
  write_npy(sizes_f, {3}, {3, 5, 2});
  EXPECT_EQ(failure(*c, ragged, [&](auto& req) { req.sizes = sizes_f; }),
            "InvalidArgument: sizes: npy: dtype float64 where an integer array (int64 or int32) is "
            "needed");
  // An empty system.
  EXPECT_EQ(failure(*c, request_for(write_batch(
                            d.dir(), "e", single_system(0, MatrixKind::kDiagonallyDominant, 5)))),
            "InvalidArgument: rhs has shape (0,): a system needs at least one unknown (n >= 1)");
}

TEST(TridiagErrors, MissingFileUploadsNothing) {
  DaemonFixture d;
  auto c = d.connect();
  client::TridiagRequest req =
      request_for(write_batch(d.dir(), "", single_system(10, MatrixKind::kGeneral, 1)));
  req.du_path = d.dir() + "/none.npy";
  auto job = client::build_tridiag_job(req);
  EXPECT_EQ(job.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(job.status().message(), "cannot read --du file '" + d.dir() +
                                        "/none.npy': No such file or directory (errno 2)");
  auto metrics = c->call(MessageType::kMetrics);
  ASSERT_TRUE(metrics.is_ok());
  EXPECT_NE((*metrics)["text"].get<std::string>().find("stripesolve_upload_bytes 0\n"),
            std::string::npos);
}

TEST(TridiagErrors, SingularSystemFailsWithTheSolversMessage) {
  DaemonFixture d;
  auto c = d.connect();
  TridiagBatch b = strided_batch(3, 6, MatrixKind::kDiagonallyDominant, 6);
  for (std::size_t i = 0; i < 6; ++i)
    b.dl[6 + i] = b.d[6 + i] = b.du[6 + i] = 0.0;  // system 1 is zero
  client::TridiagRequest req = request_for(write_batch(d.dir(), "", b));
  req.device = "cpu";
  EXPECT_EQ(failure(*c, req), "Numerical: system 1: gepp: matrix is singular: zero pivot at row 0");
  req.algorithm = "thomas";
  EXPECT_EQ(failure(*c, req), "Numerical: system 1: thomas: zero or tiny pivot 0 at row 0");
}

TEST(TridiagErrors, AutoFallbackIsNotedInTheResultAndTheLog) {
  DaemonFixture d;
  auto c = d.connect();
  // d[0] = 0 with |dl|, |du| > 0: nonsingular, but Thomas breaks down at its first pivot.
  TridiagBatch b = single_system(8, MatrixKind::kDiagonallyDominant, 7);
  b.d[0] = 0.0;
  client::TridiagRequest req = request_for(write_batch(d.dir(), "", b));
  req.unstable_ok = true;
  req.device = "cpu";
  nlohmann::json job = run_request(*c, req);
  ASSERT_EQ(job["state"], "COMPLETED") << job.dump();
  EXPECT_EQ(job["result"]["notes"],
            nlohmann::json({"auto chose thomas (unpivoted requested, 1 systems, 8 unknowns, CPU)",
                            "system 0: thomas broke down (thomas: zero or tiny pivot 0 at row 0); "
                            "solved again with gepp"}));
  auto logs = c->call(MessageType::kLogs, {{"job", job["id"]}});
  ASSERT_TRUE(logs.is_ok());
  EXPECT_NE((*logs)["lines"].dump().find("note: system 0: thomas broke down"), std::string::npos)
      << logs->dump();
  EXPECT_LT(job["result"]["max_relative_residual"].get<double>(), 1e-14);
}

TEST(TridiagErrors, UnknownAlgorithmAndMissingGpu) {
  DaemonFixture d;
  auto c = d.connect();
  const BatchFiles files =
      write_batch(d.dir(), "", single_system(10, MatrixKind::kDiagonallyDominant, 8));
  EXPECT_EQ(failure(*c, files, [](auto& req) { req.algorithm = "lu"; }),
            "InvalidArgument: unknown tridiagonal algorithm 'lu' (expected auto, thomas, cr, pcr, "
            "cr_pcr, pcr_thomas, cr_pcr_thomas, bondeli, spike or gepp)");
  if (tridiag::gpu_available()) GTEST_SKIP() << "a GPU is present: device gpu is not an error here";
  EXPECT_EQ(failure(*c, files, [](auto& req) { req.device = "gpu"; }),
            "FailedPrecondition: device 'gpu' was requested but the daemon has no usable GPU (no "
            "CUDA device, or built without CUDA); use device 'cpu' or 'auto'");
}

// Every GPU out of use after a sticky CUDA error (gpu/devices.h): device gpu is refused naming
// the error, device auto solves on the CPU, and the daemon's status names the failure.
TEST(TridiagErrors, FailedGpusAreLeftOutUntilARestart) {
  if (!tridiag::gpu_available()) GTEST_SKIP() << "no GPU: none can fail";
  const gpu::ScopedDeviceFailuresForTesting clean;
  DaemonFixture d;
  auto c = d.connect();
  for (int k = 0; k < gpu::device_count(); ++k) {
    gpu::note_device_failure(k, "kernel: cudaErrorIllegalAddress: an illegal memory access");
  }
  const BatchFiles files =
      write_batch(d.dir(), "", single_system(10, MatrixKind::kDiagonallyDominant, 8));
  const std::string refused = failure(*c, files, [](auto& req) { req.device = "gpu"; });
  EXPECT_NE(refused.find("every GPU the daemon's jobs use has failed (device 0: kernel: "
                         "cudaErrorIllegalAddress"),
            std::string::npos)
      << refused;
  nlohmann::json solved = run_request(*c, request_for(files));
  EXPECT_EQ(solved["state"], "COMPLETED") << solved.dump();
  EXPECT_EQ(solved["result"]["device"], "cpu") << solved.dump();
  EXPECT_NE(solved.dump().find("device auto chose the CPU (every GPU the daemon's jobs use has "
                               "failed"),
            std::string::npos)
      << solved.dump();
  auto status = c->call(protocol::MessageType::kDaemonStatus, {});
  ASSERT_TRUE(status.is_ok()) << status.status().to_string();
  EXPECT_NE((*status)["devices"][0].value("failed", std::string()).find("cudaErrorIllegalAddress"),
            std::string::npos)
      << status->dump();
  EXPECT_EQ((*status)["backend"], "cpu (every GPU failed)") << status->dump();
}

TEST(TridiagErrors, BatchesOverTheMemoryCapAreRefused) {
  DaemonFixture d([](daemon::DaemonConfig& c) { c.tridiag.max_bytes = 64 * kKiB; });
  auto c = d.connect();
  // 4 x 600 unknowns x 32 bytes = 75 KiB.
  EXPECT_EQ(
      failure(*c, request_for(
                      write_batch(d.dir(), "", strided_batch(4, 600, MatrixKind::kGeneral, 9)))),
      "ResourceExhausted: the batch has 2400 unknowns, 75.00 KiB as four float64 arrays, over "
      "tridiag.max_bytes (64.00 KiB); split it into smaller batches or raise tridiag.max_bytes");
  nlohmann::json fits = run_request(
      *c, request_for(write_batch(d.dir(), "f", strided_batch(4, 500, MatrixKind::kGeneral, 9))));
  EXPECT_EQ(fits["state"], "COMPLETED") << fits.dump();
}

TEST(TridiagErrors, JobsAreListedCancelledAndRunBesideADenseSolve) {
  DaemonFixture d([](daemon::DaemonConfig& c) { c.server.tridiag_concurrency = 1; });
  auto c = d.connect();
  // A dense-lane job holds its lane: a batch still runs at once.
  auto dense = client::submit_job(*c, {{"type", "gated"}});
  ASSERT_TRUE(dense.is_ok());
  const BatchFiles files =
      write_batch(d.dir(), "", strided_batch(5, 30, MatrixKind::kDiagonallyDominant, 10));
  nlohmann::json beside = run_request(*c, request_for(files));
  EXPECT_EQ(beside["state"], "COMPLETED") << beside.dump();
  // With the tridiag lane held, a batch waits PENDING and can be cancelled there.
  auto holder = client::submit_job(*c, {{"type", "gated_tridiag"}});
  ASSERT_TRUE(holder.is_ok());
  while (d.jobs().gated_running.load() < 2) std::this_thread::sleep_for(1ms);
  auto spec = client::build_tridiag_job(request_for(files));
  ASSERT_TRUE(spec.is_ok());
  auto id = client::submit_request(*c, *spec);
  ASSERT_TRUE(id.is_ok());
  auto list = c->call(MessageType::kJobs);
  ASSERT_TRUE(list.is_ok());
  bool listed = false;
  for (const auto& j : (*list)["jobs"]) {
    if (j["id"] == *id) {
      listed = true;
      EXPECT_EQ(j["type"], "tridiag_solve");
      EXPECT_EQ(j["lane"], "tridiag");
      EXPECT_EQ(j["state"], "PENDING");
    }
  }
  EXPECT_TRUE(listed) << list->dump();
  auto cancelled = c->call(MessageType::kCancel, {{"job", *id}});
  ASSERT_TRUE(cancelled.is_ok());
  EXPECT_EQ((*cancelled)["state"], "CANCELLED");
  EXPECT_EQ((*cancelled)["error"]["message"],
            "cancelled by uid " + std::to_string(::getuid()) + " while pending");
  EXPECT_EQ(client::fetch_result(*c, *id, d.dir() + "/never.npy").status().message(),
            "job " + std::to_string(*id) + " ended CANCELLED without a result: cancelled by uid " +
                std::to_string(::getuid()) + " while pending");
  d.jobs().release = true;
}

// The CLI verb end to end: exit codes, --json, --detach then `result`, and usage errors.
TEST(TridiagErrors, CliVerbWithExitCodes) {
  DaemonFixture d;
  const TridiagBatch b = strided_batch(6, 40, MatrixKind::kDiagonallyDominant, 11);
  const BatchFiles f = write_batch(d.dir(), "", b);
  const std::string log = d.dir() + "/out.txt";
  auto cli = [&](const std::string& args) {
    const std::string cmd = std::string(STRIPESOLVE_CLIENT_BINARY) + " --socket " + d.socket() +
                            " " + args + " > " + log + " 2>&1";
    const int st = std::system(cmd.c_str());  // NOLINT(concurrency-mt-unsafe): one thread runs it
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  const std::string arrays = "--dl " + f.dl + " --d " + f.d + " --du " + f.du + " --rhs " + f.rhs;
  ASSERT_EQ(cli("tridiag " + arrays + " --out " + d.dir() + "/x.npy"), 0) << read_file(log);
  EXPECT_NE(read_file(log).find("COMPLETED: 6 systems, 240 unknowns (strided)"), std::string::npos)
      << read_file(log);
  EXPECT_EQ(read_npy(d.dir() + "/x.npy").shape, (std::vector<int64_t>{6, 40}));

  ASSERT_EQ(cli("--json tridiag " + arrays + " --device cpu --algorithm spike"), 0)
      << read_file(log);
  const nlohmann::json job = nlohmann::json::parse(read_file(log), nullptr, false);
  ASSERT_TRUE(job.is_object()) << read_file(log);
  EXPECT_EQ(job["result"]["algorithm"], "spike");

  ASSERT_EQ(cli("tridiag --detach " + arrays), 0) << read_file(log);
  const std::string id = read_file(log).substr(0, read_file(log).find('\n'));
  ASSERT_EQ(cli("watch " + id), 0) << read_file(log);
  ASSERT_EQ(cli("result " + id + " -o " + d.dir() + "/y.npy"), 0) << read_file(log);
  EXPECT_EQ(read_file(log), "wrote " + d.dir() + "/y.npy, shape (6, 40)\n");
  EXPECT_EQ(read_npy(d.dir() + "/y.npy").values, read_npy(d.dir() + "/x.npy").values);

  TridiagBatch bad = b;
  bad.d[17] = std::nan("");
  const BatchFiles g = write_batch(d.dir(), "bad", bad);
  EXPECT_EQ(cli("tridiag --dl " + g.dl + " --d " + g.d + " --du " + g.du + " --rhs " + g.rhs), 1);
  EXPECT_NE(read_file(log).find("FAILED: d[17] is not finite (nan): system 0, row 17"),
            std::string::npos)
      << read_file(log);
  EXPECT_EQ(cli("tridiag " + arrays + " --device tpu"), 2);  // usage
  EXPECT_EQ(cli("tridiag --dl " + f.dl), 2);                 // usage: --d, --du, --rhs missing
  EXPECT_EQ(cli("tridiag " + arrays + " --sizes " + d.dir() + "/none.npy"), 1);
  EXPECT_NE(read_file(log).find("cannot read --sizes file"), std::string::npos) << read_file(log);
}

}  // namespace
}  // namespace stripesolve::testing
