// Issue 15, point 7: silent connections cannot lock other users out. A connection must say hello
// within daemon.limits.handshake_timeout_seconds, one that follows no job is closed after
// idle_timeout_seconds, and one uid holds at most max_connections_per_uid connections.
#include <grp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "client/commands.h"
#include "tests/integration/daemon_fixture.h"
#include "tests/integration/other_user.h"

namespace stripesolve::testing {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;

constexpr uid_t kThirdUid = 1;  // daemon

// A child process that opens `count` connections as `uid` and sends nothing. Returns its pid;
// it holds them until killed.
pid_t open_silent_connections(const std::string& socket, uid_t uid, int count) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket.c_str(), std::min(socket.size(), sizeof(addr.sun_path) - 1));
  return fork_ready_as(
      uid,
      [&] {
        for (int i = 0; i < count; ++i) {
          const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
          if (fd >= 0) (void)::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
        }
        return true;
      },
      [] {
        while (true) ::pause();
      });
}

TEST(Lockout, SilentConnectionsOfOneUserLockNobodyOut) {
  if (!can_switch_uid()) GTEST_SKIP() << kNeedsRoot;
  const std::string dir = make_shared_dir("lockout");
  ::mkdir((dir + "/sock").c_str(), 0755);
  DaemonFixture d([&](daemon::DaemonConfig& c) {
    c.server.socket = dir + "/sock/d.sock";
    c.server.socket_mode = "0666";
    c.server.limits.handshake_timeout_seconds = 3.0;
  });
  const pid_t attacker = open_silent_connections(d.socket(), kOtherUid, 300);
  ASSERT_GT(attacker, 0);
  // Its own client is refused while it holds its share, with a message saying why. First, and with
  // a handshake timeout of seconds: under a sanitizer on two cores the clients below take long
  // enough that a 1 s timeout could free the share before this check.
  auto [rc_own, out_own] = run_client_as(kOtherUid, {"--socket", d.socket(), "daemon", "status"});
  EXPECT_EQ(rc_own, 1) << out_own;
  EXPECT_NE(out_own.find("too many connections from uid 65534 (32, limit "
                         "daemon.limits.max_connections_per_uid)"),
            std::string::npos)
      << out_own;
  // Another user, and root, are served at once.
  auto [rc, out] = run_client_as(kThirdUid, {"--socket", d.socket(), "--json", "daemon", "status"});
  EXPECT_EQ(rc, 0) << out;
  auto c = client::Connection::connect(d.socket());
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_TRUE((*c)->call(MessageType::kPing).is_ok());
  // The attacker got its share (32) and was refused beyond it.
  EXPECT_GE(d.daemon().metrics().connections_refused.load(), 300u - 32u);
  // After the handshake timeout its silent connections are gone, and it may connect again. A
  // timed-out connection holds its uid's slot until its error frame is written and it closes, so
  // wait for the close (only root's connection `c` stays open), not for the timeout's count.
  const daemon::Metrics& m = d.daemon().metrics();
  bool closed = false;
  for (int i = 0; i < 1000 && !closed; ++i) {
    closed = m.connections_timed_out.load() >= 32 && m.connections_open.load() <= 1;
    if (!closed) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(closed) << m.connections_timed_out.load() << " timed out, "
                      << m.connections_open.load() << " open";
  auto [rc_again, out_again] =
      run_client_as(kOtherUid, {"--socket", d.socket(), "daemon", "status"});
  EXPECT_EQ(rc_again, 0) << out_again;
  ::kill(attacker, SIGKILL);
  ::waitpid(attacker, nullptr, 0);
  d.stop();
  std::filesystem::remove_all(dir);
}

TEST(Lockout, AHelloMustComeInTimeAndIdleConnectionsAreClosed) {
  DaemonFixture d([](daemon::DaemonConfig& c) {
    c.server.limits.handshake_timeout_seconds = 0.3;
    c.server.limits.idle_timeout_seconds = 0.5;
  });
  // Silent: one error frame, then the daemon closes.
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, d.socket().c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(fd);
  protocol::FrameParser parser;
  ASSERT_TRUE(parser.feed(got).is_ok());
  auto frame = parser.next();
  ASSERT_TRUE(frame.has_value());
  EXPECT_EQ(protocol::status_from_error_frame(*frame).message(),
            "no hello within 0.3 s (daemon.limits.handshake_timeout_seconds)");

  // Idle after the handshake: closed. Following a job: kept however quiet.
  auto idle = d.connect();
  auto following = d.connect();
  auto id = client::submit_job(*following, {{"type", "gated"}});
  ASSERT_TRUE(id.is_ok());
  const uint64_t watch = following->next_request_id();
  ASSERT_TRUE(
      following->send(protocol::make_frame(MessageType::kWatch, watch, {{"job", *id}})).is_ok());
  std::this_thread::sleep_for(1200ms);
  EXPECT_EQ(idle->call(MessageType::kPing).status().message(),
            "closed after 0.5 s without a request (daemon.limits.idle_timeout_seconds)");
  d.jobs().release = true;
  Status end;
  while (true) {
    auto f = following->receive();
    if (!f.is_ok()) {
      end = f.status();
      break;
    }
    if (f->request_id == watch && (f->flags & protocol::kFlagFinal)) break;
  }
  EXPECT_TRUE(end.is_ok()) << end.to_string();
  EXPECT_TRUE(following->call(MessageType::kPing).is_ok());
}

}  // namespace
}  // namespace stripesolve::testing
