// Integration: a real daemon on a temporary socket, real clients over the socket.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "client/commands.h"
#include "protocol/npy.h"
#include "tests/integration/daemon_fixture.h"

namespace stripesolve::testing {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;

// A raw socket to the daemon for sending arbitrary bytes.
int raw_connect(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads until EOF (the daemon closes after an error frame); returns what came.
std::string read_to_eof(int fd) {
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, n);
  }
  return out;
}

TEST(DaemonIntegration, HandshakePingAndSocketModes) {
  DaemonFixture d;
  auto c = d.connect();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->welcome()["version"], protocol::kProtocolVersion);
  EXPECT_EQ(c->welcome()["uid"], ::getuid());
  auto pong = c->call(MessageType::kPing);
  ASSERT_TRUE(pong.is_ok());
  EXPECT_EQ((*pong)["pong"], true);
  struct stat st {};
  ASSERT_EQ(::stat(d.socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((d.dir() + "/run").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto status = c->call(MessageType::kDaemonStatus);
  ASSERT_TRUE(status.is_ok());
  EXPECT_EQ((*status)["socket"], d.socket());
}

TEST(DaemonIntegration, ReadinessIsNotifiedToSystemd) {
  const std::string path = "/tmp/ss-notify-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  int fd = ::socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  {
    DaemonFixture d;
    char buf[512] = {};
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    EXPECT_EQ(std::string(buf, n).rfind("READY=1\n", 0), 0u) << buf;
    d.stop("drain");
    const ssize_t m = ::recv(fd, buf, sizeof buf, 0);
    EXPECT_EQ(std::string(buf, m), "STOPPING=1");
  }
  ::unsetenv("NOTIFY_SOCKET");
  ::close(fd);
  ::unlink(path.c_str());
}

TEST(DaemonIntegration, SecondDaemonOnTheSameSocketIsRefused) {
  DaemonFixture d;
  daemon::DaemonConfig config = daemon::parse_daemon_config("", "<test>");
  config.server.socket = d.socket();
  config.store.paths = {d.dir() + "/store2"};
  config.store.direct_io = false;
  daemon::Daemon second(config);
  EXPECT_EQ(second.start().message(), "another stripesolved is listening on " + d.socket() +
                                          "; stop it first (stripesolve daemon stop)");
}

TEST(DaemonIntegration, UnknownJobAndBadRequestsAreClearErrors) {
  DaemonFixture d;
  auto c = d.connect();
  EXPECT_EQ(c->call(MessageType::kStatus, {{"job", 99}}).status().message(),
            "job 99 not found (list your jobs with 'stripesolve jobs')");
  EXPECT_EQ(c->call(MessageType::kStatus, {{"job", "x"}}).status().message(),
            "field 'job' must be an integer, got string");
  EXPECT_EQ(
      c->call(MessageType::kSubmit, {{"job", {{"type", "nope"}}}}).status().message(),
      "unknown job type 'nope' (known: dense_solve, echo, gated, gated_tridiag, matrix_create, "
      "matrix_delete, matrix_export, matrix_import, rows, throw, tridiag_solve)");
  // The connection is still usable after request-level errors.
  EXPECT_TRUE(c->call(MessageType::kPing).is_ok());
}

TEST(DaemonIntegration, ConcurrentClientsWithManySmallJobs) {
  DaemonFixture d;
  constexpr int kClients = 32, kJobsEach = 25;
  std::atomic<int> completed{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      auto c = client::Connection::connect(d.socket(), "t");
      if (!c.is_ok()) {
        failures++;
        return;
      }
      for (int k = 0; k < kJobsEach; ++k) {
        auto r = client::run_job(**c, {{"type", "echo"}, {"client", t}, {"k", k}});
        if (r.is_ok() && (*r)["state"] == "COMPLETED" && (*r)["result"]["k"] == k &&
            (*r)["result"]["client"] == t) {
          completed++;
        } else {
          failures++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(completed.load(), kClients * kJobsEach);
  auto c = d.connect();
  auto jobs = c->call(MessageType::kJobs);
  ASSERT_TRUE(jobs.is_ok());
  EXPECT_EQ((*jobs)["jobs"].size(), static_cast<size_t>(kClients * kJobsEach));
}

TEST(DaemonIntegration, SmallJobsRunWhileADenseJobHoldsItsLane) {
  DaemonFixture d;
  auto c = d.connect();
  auto gated = client::submit_job(*c, {{"type", "gated"}});
  ASSERT_TRUE(gated.is_ok());
  for (int i = 0; i < 10; ++i) {
    auto r = client::run_job(*c, {{"type", "echo"}, {"i", i}});
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ((*r)["state"], "COMPLETED");
  }
  d.jobs().release = true;
  auto done = client::follow_job(*c, *gated, "", nullptr);
  ASSERT_TRUE(done.is_ok());
  EXPECT_EQ((*done)["state"], "COMPLETED");
}

TEST(DaemonIntegration, ResultStreamsIntoAValidNpyWhileTheJobRuns) {
  DaemonFixture d;
  auto c = d.connect();
  // 3 right-hand sides, 20000 rows: 480 KB, stripes of 1500 rows (last stripe first).
  auto id = client::submit_job(
      *c, {{"type", "rows"}, {"n", 20000}, {"nrhs", 3}, {"stripe", 1500}, {"delay_ms", 2}});
  ASSERT_TRUE(id.is_ok());
  const std::string out = d.dir() + "/x.npy";
  auto job = client::follow_job(*c, *id, out, nullptr);
  ASSERT_TRUE(job.is_ok()) << job.status().to_string();
  EXPECT_EQ((*job)["state"], "COMPLETED");
  std::ifstream in(out, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  int64_t r = 0, cols = 0;
  auto x = protocol::npy_to_column_major(ss.str(), &r, &cols);
  ASSERT_TRUE(x.is_ok()) << x.status().to_string();
  ASSERT_EQ(r, 20000);
  ASSERT_EQ(cols, 3);
  for (int64_t j = 0; j < 3; ++j) {
    for (int64_t i = 0; i < r; ++i)
      ASSERT_EQ((*x)[j * r + i], expected_row_value(i, j)) << i << "," << j;
  }
  // Streamed once: a second fetch is a clear error.
  EXPECT_EQ(client::fetch_result(*c, *id, out).status().message(),
            "the result of job " + std::to_string(*id) +
                " was already fetched (results are streamed once)");
}

TEST(DaemonIntegration, CancelMidJobLeavesTheDaemonHealthy) {
  DaemonFixture d;
  auto c = d.connect();
  auto id = client::submit_job(*c, {{"type", "gated"}});
  ASSERT_TRUE(id.is_ok());
  while (d.jobs().gated_running.load() == 0) std::this_thread::sleep_for(1ms);
  auto cancel = c->call(MessageType::kCancel, {{"job", *id}});
  ASSERT_TRUE(cancel.is_ok());
  auto done = client::follow_job(*c, *id, "", nullptr);
  ASSERT_TRUE(done.is_ok());
  EXPECT_EQ((*done)["state"], "CANCELLED");
  EXPECT_EQ((*done)["error"]["message"], "cancelled while waiting at the gate");
  auto logs = c->call(MessageType::kLogs, {{"job", *id}});
  ASSERT_TRUE(logs.is_ok());
  EXPECT_GE((*logs)["lines"].size(), 3u);
  auto trace = c->call(MessageType::kTrace, {{"job", *id}});
  ASSERT_TRUE(trace.is_ok());
  EXPECT_FALSE((*trace)["trace"]["traceEvents"].empty());
  // Healthy: new jobs run.
  auto r = client::run_job(*c, {{"type", "echo"}});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)["state"], "COMPLETED");
}

TEST(DaemonIntegration, MalformedInputGetsAnErrorFrameAndOthersAreUnaffected) {
  DaemonFixture d;
  auto good = d.connect();
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) {
    int fd = raw_connect(d.socket());
    ASSERT_GE(fd, 0);
    std::string junk;
    if (i % 3 == 0) {
      junk = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
    } else {
      // A valid hello followed by corrupted frames.
      junk = *protocol::encode_frame(protocol::make_hello("fuzz"));
      std::string f = *protocol::encode_frame(
          protocol::make_frame(MessageType::kSubmit, 1, {{"job", {{"type", "echo"}}}}));
      for (int k = 0; k < 3; ++k) f[rng() % f.size()] ^= static_cast<char>(1u << (rng() % 8));
      junk += f;
      junk.resize(junk.size() + rng() % 64, static_cast<char>(rng()));
    }
    ::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
    const std::string reply = read_to_eof(fd);
    ::close(fd);
    if (i % 3 == 0) {
      protocol::FrameParser p;
      ASSERT_TRUE(p.feed(reply).is_ok());
      auto f = p.next();
      ASSERT_TRUE(f.has_value());
      EXPECT_EQ(f->type, static_cast<uint16_t>(MessageType::kError));
      EXPECT_EQ(f->header["message"].get<std::string>().substr(0, 29),
                "frame 0: bad magic 0x20544547");
    }
    if (i % 20 == 0) {
      ASSERT_TRUE(good->call(MessageType::kPing).is_ok());
    }
  }
  ASSERT_TRUE(good->call(MessageType::kPing).is_ok());
  auto m = good->call(MessageType::kMetrics);
  ASSERT_TRUE(m.is_ok());
  EXPECT_NE((*m)["text"].get<std::string>().find("stripesolve_protocol_errors_total"),
            std::string::npos);
  EXPECT_GE(d.daemon().metrics().protocol_errors.load(), 67u);
}

TEST(DaemonIntegration, ConnectionLimitRefusesWithAClearError) {
  DaemonFixture d([](daemon::DaemonConfig& c) { c.server.limits.max_connections = 2; });
  auto a = d.connect();
  auto b = d.connect();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto third = client::Connection::connect(d.socket());
  ASSERT_FALSE(third.is_ok());
  EXPECT_EQ(
      third.status().message(),
      "too many connections (2, limit daemon.limits.max_connections) (wait for other clients to "
      "finish, or raise daemon.limits.max_connections)");
  b.reset();
  bool ok = false;  // the slot frees once the daemon sees b's close
  for (int i = 0; i < 500 && !ok; ++i) {
    ok = client::Connection::connect(d.socket()).is_ok();
    if (!ok) std::this_thread::sleep_for(2ms);
  }
  EXPECT_TRUE(ok);
}

TEST(DaemonIntegration, DaemonStopDrainsAndRemovesTheSocket) {
  DaemonFixture d;
  auto c = d.connect();
  auto id = client::submit_job(*c, {{"type", "gated"}});
  auto stop = c->call(MessageType::kDaemonStop, {{"policy", "cancel"}});
  ASSERT_TRUE(stop.is_ok());
  auto done = client::follow_job(*c, *id, "", nullptr);
  // Either we saw the job end, or the daemon closed the connection after draining.
  if (done.is_ok()) {
    EXPECT_EQ((*done)["state"], "CANCELLED");
  }
  d.stop();
  EXPECT_FALSE(std::filesystem::exists(d.socket()));
  EXPECT_EQ(client::Connection::connect(d.socket()).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace stripesolve::testing
