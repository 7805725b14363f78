// Issue 15, point 9: the daemon refuses a socket folder another user owns or may write (that
// user could replace the socket and receive the next client's hello), and the client refuses a
// socket served by anyone but root, itself, or the uid it was told to expect.
#include <grp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "client/connection.h"
#include "daemon/daemon.h"
#include "tests/integration/other_user.h"

namespace stripesolve::testing {
namespace {

daemon::DaemonConfig config_in(const std::string& dir, const std::string& socket) {
  daemon::DaemonConfig config = daemon::parse_daemon_config("", "<test>");
  config.server.socket = socket;
  config.store.paths = {dir + "/store"};
  config.store.direct_io = false;
  config.store.free_space_reserve = 0;
  return config;
}

TEST(SocketChecks, TheDaemonRefusesAFolderOthersMayWriteOrOwn) {
  char tmpl[] = "/tmp/ss-sockdir-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string open_dir = dir + "/open";
  ::mkdir(open_dir.c_str(), 0777);
  ::chmod(open_dir.c_str(), 0777);  // pre-created by someone, writable by all
  {
    daemon::Daemon d(config_in(dir, open_dir + "/d.sock"));
    EXPECT_EQ(d.start().message(),
              "socket directory " + open_dir +
                  " has mode 0777: other users may write in it and "
                  "replace the socket; make it writable by its owner only (chmod go-w) or choose "
                  "another daemon.socket");
  }
  ::chmod(open_dir.c_str(), 01777);  // sticky does not help: the name can be taken before us
  {
    daemon::Daemon d(config_in(dir, open_dir + "/d.sock"));
    EXPECT_FALSE(d.start().is_ok());
  }
  const std::string link = dir + "/link";
  ASSERT_EQ(::symlink(open_dir.c_str(), link.c_str()), 0);
  {
    daemon::Daemon d(config_in(dir, link + "/d.sock"));
    EXPECT_EQ(d.start().message(), "socket directory " + link +
                                       " is a symbolic link; give daemon.socket a path in a real "
                                       "directory");
  }
  if (can_switch_uid()) {  // a folder another uid owns, mode 0755
    const std::string theirs = dir + "/theirs";
    ::mkdir(theirs.c_str(), 0755);
    ASSERT_EQ(::chown(theirs.c_str(), kOtherUid, kOtherUid), 0);
    daemon::Daemon d(config_in(dir, theirs + "/d.sock"));
    EXPECT_EQ(d.start().message(), "socket directory " + theirs +
                                       " belongs to uid 65534, not to this daemon (uid " +
                                       std::to_string(::geteuid()) +
                                       ") or root, so that user could replace the socket; "
                                       "remove the directory or choose another daemon.socket");
    EXPECT_FALSE(std::filesystem::exists(theirs + "/d.sock"));
  }
  // A folder of its own that only it may write is fine (created 0700 when missing).
  {
    daemon::Daemon d(config_in(dir, dir + "/mine/d.sock"));
    EXPECT_TRUE(d.start().is_ok());
  }
  std::filesystem::remove_all(dir);
}

// A fake daemon run by `uid`: answers each connection's hello with a welcome and its first
// request with an error naming itself, then waits for EOF.
pid_t fake_daemon_as(uid_t uid, const std::string& path) {
  const std::string welcome = *protocol::encode_frame(protocol::make_frame(
      protocol::MessageType::kWelcome, 0, {{"version", 1}}, protocol::kFlagFinal));
  const std::string answer = *protocol::encode_frame(
      protocol::make_error_frame(0, Status::unavailable("the fake daemon answered")));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), std::min(path.size(), sizeof(addr.sun_path) - 1));
  int l = -1;
  return fork_ready_as(
      uid,
      [&] {
        ::umask(0);  // a socket everybody may connect to
        l = ::socket(AF_UNIX, SOCK_STREAM, 0);
        return ::bind(l, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
               ::listen(l, 8) == 0;
      },
      [&] {
        while (true) {
          const int c = ::accept(l, nullptr, nullptr);
          if (c < 0) continue;
          // Clients that refuse us close at once: MSG_NOSIGNAL, or SIGPIPE would end the fake.
          (void)::send(c, welcome.data(), welcome.size(), MSG_NOSIGNAL);
          char buf[256];
          bool answered = false;
          while (::read(c, buf, sizeof buf) > 0) {
            if (!answered) (void)::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
            answered = true;
          }
          ::close(c);
        }
      });
}

TEST(SocketChecks, TheClientRefusesADaemonOfAnotherUser) {
  if (!can_switch_uid()) GTEST_SKIP() << kNeedsRoot;
  const std::string dir = make_shared_dir("peer");
  const std::string theirs = make_user_dir(dir, "run", kOtherUid);
  const std::string socket = theirs + "/d.sock";
  const pid_t fake = fake_daemon_as(kOtherUid, socket);
  ASSERT_GT(fake, 0);
  // As root: neither root nor ourselves serve it.
  auto refused = client::Connection::connect(socket);
  EXPECT_EQ(refused.status().message(),
            "refusing the daemon at " + socket +
                ": the socket is served by uid 65534, which is "
                "neither root nor you (uid 0); if uid 65534 runs your daemon, set "
                "STRIPESOLVE_DAEMON_UID=65534 or pass --daemon-uid 65534");
  // As a third user, through the CLI.
  auto [rc, out] = run_client_as(1, {"--socket", socket, "jobs"});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("the socket is served by uid 65534, which is neither root nor you (uid 1)"),
            std::string::npos)
      << out;
  // Told to expect that uid (option or environment), the client goes ahead.
  EXPECT_TRUE(client::Connection::connect(socket, "test", kOtherUid).is_ok());
  ::setenv("STRIPESOLVE_DAEMON_UID", "65534", 1);
  EXPECT_TRUE(client::Connection::connect(socket).is_ok());
  ::setenv("STRIPESOLVE_DAEMON_UID", "nobody", 1);
  EXPECT_EQ(client::Connection::connect(socket).status().message(),
            "STRIPESOLVE_DAEMON_UID must be a uid (a number), got 'nobody'");
  ::unsetenv("STRIPESOLVE_DAEMON_UID");
  auto [rc_told, out_told] =
      run_client_as(1, {"--socket", socket, "--daemon-uid", "65534", "jobs"});
  EXPECT_NE(out_told.find("the fake daemon answered"), std::string::npos) << out_told;
  // The user's own daemon is always accepted.
  auto [rc_own, out_own] = run_client_as(kOtherUid, {"--socket", socket, "jobs"});
  EXPECT_NE(out_own.find("the fake daemon answered"), std::string::npos) << out_own;
  ::kill(fake, SIGKILL);
  ::waitpid(fake, nullptr, 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stripesolve::testing
