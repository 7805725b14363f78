// Ownership across real uids: the test (root) submits a job, then runs the real client binary as
// another uid (fork, setuid, exec) against the same daemon. Needs root to switch uids; the
// ownership rule itself is also tested directly in daemon/job_manager_test.cc.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <filesystem>

#include "client/commands.h"
#include "tests/integration/daemon_fixture.h"

namespace stripesolve::testing {
namespace {

constexpr uid_t kOtherUid = 65534;  // nobody

// Runs the client as `uid`; returns exit code and stdout+stderr.
std::pair<int, std::string> run_client_as(uid_t uid, const std::vector<std::string>& args) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return {-1, "pipe failed"};
  std::vector<std::string> argv_s = {STRIPESOLVE_CLIENT_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    ::dup2(pipefd[1], 1);
    ::dup2(pipefd[1], 2);
    ::close(pipefd[0]);
    if (::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(99);
    ::execv(argv[0], argv.data());
    ::_exit(98);
  }
  ::close(pipefd[1]);
  std::string out;
  std::array<char, 4096> buf{};
  ssize_t n;
  while ((n = ::read(pipefd[0], buf.data(), buf.size())) > 0) out.append(buf.data(), n);
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(OwnershipIntegration, AnotherUserCannotSeeOrCancelMyJob) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a client as a second uid";
  char tmpl[] = "/tmp/ss-own-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  ::chmod(dir.c_str(), 0755);
  DaemonFixture d([&](daemon::DaemonConfig& c) {
    c.server.socket = dir + "/shared.sock";
    c.server.socket_mode = "0666";  // a shared machine: everybody may connect, ownership still holds
  });
  auto c = d.connect();
  auto id = client::submit_job(*c, {{"type", "gated"}});
  ASSERT_TRUE(id.is_ok());
  const std::string job = std::to_string(*id);

  auto [rc_status, out_status] = run_client_as(kOtherUid, {"--socket", d.socket(), "status", job});
  EXPECT_EQ(rc_status, 1) << out_status;
  EXPECT_NE(out_status.find("job " + job + " not found"), std::string::npos) << out_status;

  auto [rc_cancel, out_cancel] = run_client_as(kOtherUid, {"--socket", d.socket(), "cancel", job});
  EXPECT_EQ(rc_cancel, 1) << out_cancel;
  EXPECT_NE(out_cancel.find("job " + job + " not found"), std::string::npos) << out_cancel;

  auto [rc_jobs, out_jobs] = run_client_as(kOtherUid, {"--socket", d.socket(), "--json", "jobs", "--all"});
  EXPECT_EQ(rc_jobs, 0) << out_jobs;
  EXPECT_NE(out_jobs.find("\"jobs\": []"), std::string::npos) << out_jobs;

  auto [rc_stop, out_stop] = run_client_as(kOtherUid, {"--socket", d.socket(), "daemon", "stop"});
  EXPECT_EQ(rc_stop, 1) << out_stop;
  EXPECT_NE(out_stop.find("uid 65534 may not stop a daemon run by uid 0"), std::string::npos) << out_stop;

  // Still mine, still running.
  auto st = c->call(protocol::MessageType::kStatus, {{"job", *id}});
  ASSERT_TRUE(st.is_ok());
  EXPECT_EQ((*st)["state"], "RUNNING");
  EXPECT_EQ((*st)["owner_uid"], 0);
  d.stop("cancel");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stripesolve::testing
