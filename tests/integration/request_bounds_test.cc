// Integration (issue 15, points 3, 5 and 6): every request is bounded before it allocates, and no
// input ends the daemon. A real daemon on a temporary socket; each test also checks that the
// daemon still serves afterwards.
#include <gtest/gtest.h>

#include <string>

#include "client/commands.h"
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
  EXPECT_EQ((*other)["error"]["message"], "the job stopped on an unexpected error: thrown on purpose");
  expect_alive(d);
}

TEST(RequestBounds, FieldsOfAnUnexpectedTypeAreErrorsNotCrashes) {
  DaemonFixture d;
  auto c = d.connect();
  // A generator name that is a number: the runner reads it with json::value(), which throws.
  auto create = client::run_job(*c, {{"type", "matrix_create"}, {"name", "G"}, {"n", 8}, {"generator", 5}});
  ASSERT_TRUE(create.is_ok()) << create.status().to_string();
  EXPECT_EQ((*create)["state"], "FAILED");
  // Request fields read on the I/O thread.
  EXPECT_EQ(c->call(MessageType::kJobs, {{"all", "yes"}}).status().message(),
            "field 'all' must be a boolean, got string");
  EXPECT_EQ(c->call(MessageType::kSubmit, {{"job", {{"type", "echo"}}}, {"wait", 1}}).status().message(),
            "field 'wait' must be a boolean, got number");
  EXPECT_EQ(c->call(MessageType::kDaemonStop, {{"policy", 3}}).status().message(),
            "field 'policy' must be a string, got number");
  expect_alive(d);
}

}  // namespace
}  // namespace stripesolve::testing
