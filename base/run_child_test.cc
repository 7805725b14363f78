#include "base/run_child.h"

#include <gtest/gtest.h>

namespace stripesolve {
namespace {

TEST(RunChild, CollectsTheOutputAndTheExitCode) {
  const ChildRun plain = run_child({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(plain.exit_code, 3);
  EXPECT_EQ(plain.output, "out\n");
  ChildOptions options;
  options.with_stderr = true;
  options.extra_env = {"RUN_CHILD_TEST=seen"};
  const ChildRun both = run_child({"/bin/sh", "-c", "echo $RUN_CHILD_TEST; echo err >&2"}, options);
  EXPECT_EQ(both.exit_code, 0);
  EXPECT_EQ(both.output, "seen\nerr\n");
}

TEST(RunChild, AFailedSetupOrExecIsAnExitCode) {
  ChildOptions options;
  options.before_exec = [] { return false; };
  EXPECT_EQ(run_child({"/bin/true"}, options).exit_code, 99);
  EXPECT_EQ(run_child({"/nonexistent/program"}).exit_code, 98);
  EXPECT_EQ(run_child({"/bin/sh", "-c", "kill -9 $$"}).exit_code, -1);
}

}  // namespace
}  // namespace stripesolve
