// Ownership across real uids: the test (root) submits a job, then runs the real client binary as
// another uid (fork, setuid, exec) against the same daemon. Needs root to switch uids; the
// ownership rule itself is also tested directly in daemon/job_manager_test.cc.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <filesystem>

#include <gtest/gtest.h>

#include "client/commands.h"
#include "tests/integration/daemon_fixture.h"
#include "tests/integration/other_user.h"

namespace stripesolve::testing {
namespace {

TEST(OwnershipIntegration, AnotherUserCannotSeeOrCancelMyJob) {
  if (!can_switch_uid()) GTEST_SKIP() << kNeedsRoot;
  char tmpl[] = "/tmp/ss-own-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  ::chmod(dir.c_str(), 0755);
  DaemonFixture d([&](daemon::DaemonConfig& c) {
    c.server.socket = dir + "/shared.sock";
    c.server.socket_mode =
        "0666";  // a shared machine: everybody may connect, ownership still holds
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

  auto [rc_jobs, out_jobs] =
      run_client_as(kOtherUid, {"--socket", d.socket(), "--json", "jobs", "--all"});
  EXPECT_EQ(rc_jobs, 0) << out_jobs;
  EXPECT_NE(out_jobs.find("\"jobs\": []"), std::string::npos) << out_jobs;

  auto [rc_stop, out_stop] = run_client_as(kOtherUid, {"--socket", d.socket(), "daemon", "stop"});
  EXPECT_EQ(rc_stop, 1) << out_stop;
  EXPECT_NE(out_stop.find("uid 65534 may not stop a daemon run by uid 0"), std::string::npos)
      << out_stop;

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
