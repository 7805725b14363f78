// Integration (issue 15, points 3, 5 and 6): every request is bounded before it allocates, and no
// input ends the daemon. A real daemon on a temporary socket; each test also checks that the
// daemon still serves afterwards.
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "base/units.h"
#include "client/commands.h"
#include "protocol/npy.h"
#include "tests/integration/daemon_fixture.h"

namespace stripesolve::testing {
namespace {

using protocol::MessageType;

// The daemon still answers and still runs jobs.
void expect_alive(DaemonFixture& d) {
  auto c = d.connect();
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->call(MessageType::kPing).is_ok());
  auto echo = client::run_job(*c, {{"type", "echo"}, {"alive", true}});
  ASSERT_TRUE(echo.is_ok()) << echo.status().to_string();
  EXPECT_EQ((*echo)["state"], "COMPLETED");
}

TEST(RequestBounds, AJobThatThrowsFailsWithAMessage) {
  DaemonFixture d;
  auto c = d.connect();
  auto oom = client::run_job(*c, {{"type", "throw"}, {"what", "bad_alloc"}});
  ASSERT_TRUE(oom.is_ok()) << oom.status().to_string();
  EXPECT_EQ((*oom)["state"], "FAILED");
  EXPECT_EQ((*oom)["error"]["code"], "ResourceExhausted");
  EXPECT_EQ((*oom)["error"]["message"],
            "the daemon ran out of memory while running this job (std::bad_alloc); try a smaller "
            "request");
  auto other = client::run_job(*c, {{"type", "throw"}});
  ASSERT_TRUE(other.is_ok()) << other.status().to_string();
  EXPECT_EQ((*other)["state"], "FAILED");
  EXPECT_EQ((*other)["error"]["message"],
            "the job stopped on an unexpected error: thrown on purpose");
  expect_alive(d);
}

TEST(RequestBounds, FieldsOfAnUnexpectedTypeAreErrorsNotCrashes) {
  DaemonFixture d;
  auto c = d.connect();
  // A generator name that is a number: the runner reads it with json::value(), which throws.
  auto create =
      client::run_job(*c, {{"type", "matrix_create"}, {"name", "G"}, {"n", 8}, {"generator", 5}});
  ASSERT_TRUE(create.is_ok()) << create.status().to_string();
  EXPECT_EQ((*create)["state"], "FAILED");
  // Request fields read on the I/O thread.
  EXPECT_EQ(c->call(MessageType::kJobs, {{"all", "yes"}}).status().message(),
            "field 'all' must be a boolean, got string");
  EXPECT_EQ(
      c->call(MessageType::kSubmit, {{"job", {{"type", "echo"}}}, {"wait", 1}}).status().message(),
      "field 'wait' must be a boolean, got number");
  EXPECT_EQ(c->call(MessageType::kDaemonStop, {{"policy", 3}}).status().message(),
            "field 'policy' must be a string, got number");
  expect_alive(d);
}

void create_matrix(client::Connection& c, const std::string& name, int64_t n) {
  auto r = client::run_job(
      c, {{"type", "matrix_create"}, {"name", name}, {"n", n}, {"seed", 5}, {"stripe_rows", 32}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ((*r)["state"], "COMPLETED") << r->dump();
}

// Issue 15 point 3: `solve M --nrhs 1048576` on n = 8192 allocated 64 GiB and std::bad_alloc
// ended the daemon. Here n = 64 with 2^22 columns (2 GiB) against the default limit of 1 GiB.
TEST(RequestBounds, GeneratedRightHandSidesAreBoundedBeforeAllocation) {
  DaemonFixture d;
  auto c = d.connect();
  create_matrix(*c, "M", 64);
  auto huge = client::run_job(*c, {{"type", "dense_solve"},
                                   {"matrix", "M"},
                                   {"rhs", {{"generate", "ones"}, {"nrhs", int64_t{1} << 22}}}});
  ASSERT_TRUE(huge.is_ok()) << huge.status().to_string();
  EXPECT_EQ((*huge)["state"], "FAILED");
  EXPECT_EQ((*huge)["error"]["code"], "ResourceExhausted");
  EXPECT_EQ(
      (*huge)["error"]["message"],
      "right-hand sides of 64 x 4194304 float64 (2.00 GiB) exceed daemon.limits.max_rhs_bytes "
      "(1.00 GiB); solve fewer columns at a time");
  auto fine = client::run_job(
      *c, {{"type", "dense_solve"}, {"matrix", "M"}, {"rhs", {{"generate", "ones"}, {"nrhs", 3}}}});
  ASSERT_TRUE(fine.is_ok()) << fine.status().to_string();
  EXPECT_EQ((*fine)["state"], "COMPLETED") << fine->dump();
  expect_alive(d);
}

TEST(RequestBounds, UploadedRightHandSidesAreBoundedBeforeConversion) {
  DaemonFixture d([](daemon::DaemonConfig& c) { c.server.limits.max_rhs_bytes = 1 << 20; });
  auto c = d.connect();
  create_matrix(*c, "M", 64);
  const auto upload_ones = [&](int64_t cols) {
    std::string npy = protocol::make_npy_header({64, cols}, false);
    npy.append(static_cast<size_t>(64 * cols * 8), '\0');
    auto id = c->upload(npy);
    EXPECT_TRUE(id.is_ok()) << id.status().to_string();
    return id.is_ok() ? *id : 0;
  };
  auto wide = client::run_job(
      *c, {{"type", "dense_solve"}, {"matrix", "M"}, {"rhs", {{"upload", upload_ones(4096)}}}});
  ASSERT_TRUE(wide.is_ok()) << wide.status().to_string();
  EXPECT_EQ((*wide)["state"], "FAILED");
  EXPECT_EQ((*wide)["error"]["message"],
            "right-hand sides of 64 x 4096 float64 (2.00 MiB) exceed daemon.limits.max_rhs_bytes "
            "(1.00 MiB); solve fewer columns at a time");
  auto fine = client::run_job(
      *c, {{"type", "dense_solve"}, {"matrix", "M"}, {"rhs", {{"upload", upload_ones(2)}}}});
  ASSERT_TRUE(fine.is_ok()) << fine.status().to_string();
  EXPECT_EQ((*fine)["state"], "COMPLETED") << fine->dump();
  expect_alive(d);
}

// Peak resident memory of this process (the daemon runs in it), from /proc/self/status.
uint64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmHWM:") {
      uint64_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
    std::getline(in, key);
  }
  return 0;
}

// Issue 15 point 5: `matrix create huge -n 1000000` took 4.2 GB of daemon memory and 28 s in the
// planner before the free-space check refused it. Now the check comes first: a few statvfs().
TEST(RequestBounds, AHugeMatrixIsRefusedByTheFreeSpaceCheckFirst) {
  DaemonFixture d;
  auto c = d.connect();
  const uint64_t rss_before = peak_rss_bytes();
  const auto start = std::chrono::steady_clock::now();
  auto huge = client::run_job(*c, {{"type", "matrix_create"}, {"name", "huge"}, {"n", 1000000}});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(huge.is_ok()) << huge.status().to_string();
  EXPECT_EQ((*huge)["state"], "FAILED");
  EXPECT_EQ((*huge)["error"]["code"], "NoSpace");
  EXPECT_EQ((*huge)["error"]["message"].get<std::string>().rfind(
                "not enough free space for 'huge' (order 1000000): it needs 7.28 TiB, the 1 "
                "filesystem(s) of the store paths have ",
                0),
            0u)
      << huge->dump();
  // Generous bounds (sanitizers, a loaded machine); the old code needed gigabytes and tens of s.
  EXPECT_LT(seconds, 10.0);
  EXPECT_LT(peak_rss_bytes() - rss_before, 256 * kMiB);
  // The same through the CLI, as in the issue.
  const std::string cli = std::string(STRIPESOLVE_CLIENT_BINARY) + " --socket " + d.socket();
  const int st = std::system(  // NOLINT(concurrency-mt-unsafe): the test's only thread here
      (cli + " matrix create huge2 -n 1000000 > " + d.dir() + "/out.txt 2>&1").c_str());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1) << st;
  expect_alive(d);
}

// Sends one piece of an upload; no reply comes unless it is refused or final.
void send_piece(client::Connection& c, uint64_t request_id, const std::string& bytes, bool final) {
  protocol::Frame f = protocol::make_frame(
      MessageType::kUpload, request_id, nlohmann::json::object(), final ? protocol::kFlagFinal : 0);
  f.payload = bytes;
  ASSERT_TRUE(c.send(f).is_ok());
}

// The next frame must be the refusal of `request_id`; returns its message.
std::string refusal(client::Connection& c, uint64_t request_id) {
  auto f = c.receive();
  if (!f.is_ok()) return "no frame: " + f.status().to_string();
  EXPECT_EQ(f->request_id, request_id);
  EXPECT_EQ(f->type, static_cast<uint16_t>(MessageType::kError));
  return protocol::status_from_error_frame(*f).message();
}

// Waits (up to 10 s) until the daemon's uploads hold `bytes`; returns what they hold.
uint64_t await_held(DaemonFixture& d, uint64_t bytes) {
  for (int i = 0; i < 1000 && d.daemon().uploads().bytes_held() != bytes; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return d.daemon().uploads().bytes_held();
}

// Issue 15 point 6: unfinished upload pieces from a raw socket held 2.8 GB of daemon RAM, and
// 1.2 GB still after the client left, until the upload ttl (an hour).
TEST(RequestBounds, UploadsAreBoundedPerConnectionAndInTotalAndFreedWithTheirConnection) {
  DaemonFixture d([](daemon::DaemonConfig& c) {
    c.server.limits.max_upload_bytes = 3 * kMiB;
    c.server.limits.max_upload_total = 5 * kMiB + 4 * kKiB;
  });
  const std::string mib(kMiB, 'x');
  auto a = d.connect(), b = d.connect(), keeper = d.connect();
  // A finished upload that a submitted job names outlives its connection.
  const std::string kib(kKiB, 'k');
  auto kept = keeper->upload(kib);
  ASSERT_TRUE(kept.is_ok()) << kept.status().to_string();
  auto echo = client::run_job(*keeper, {{"type", "echo"}, {"rhs", {{"upload", *kept}}}});
  ASSERT_TRUE(echo.is_ok()) << echo.status().to_string();
  EXPECT_EQ((*echo)["state"], "COMPLETED");
  // Unfinished pieces of several uploads on one connection count together.
  for (uint64_t rid : {101, 102, 103}) send_piece(*a, rid, mib, false);
  send_piece(*a, 104, mib, false);
  EXPECT_EQ(refusal(*a, 104),
            "upload exceeds daemon.limits.max_upload_bytes (3145728 bytes, for the "
            "unfinished uploads of a connection together)");
  EXPECT_EQ(await_held(d, 3 * kMiB + kKiB), 3 * kMiB + kKiB);
  // A finished upload counts until a job takes it; the total bounds every connection together.
  auto finished = b->upload(mib);
  ASSERT_TRUE(finished.is_ok()) << finished.status().to_string();
  send_piece(*b, 201, mib, false);
  send_piece(*b, 202, mib, false);
  EXPECT_EQ(refusal(*b, 202),
            "uploads waiting in the daemon would exceed daemon.limits.max_upload_total "
            "(5.00 MiB held, 1.00 MiB more asked); submit or close what you uploaded, "
            "or retry later");
  // Leaving frees what a connection held: a's three pieces, then b's piece and its finished,
  // unclaimed upload; the claimed one stays.
  EXPECT_EQ(await_held(d, 5 * kMiB + kKiB), 5 * kMiB + kKiB);
  a.reset();
  EXPECT_EQ(await_held(d, 2 * kMiB + kKiB), 2 * kMiB + kKiB);
  b.reset();
  keeper.reset();
  EXPECT_EQ(await_held(d, kKiB), kKiB);
  expect_alive(d);
}

}  // namespace
}  // namespace stripesolve::testing
