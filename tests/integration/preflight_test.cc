// Integration: the client finds the mistakes it can see before it submits (no job is made, the
// option is named), through the real binary against a real daemon.
#include <sys/wait.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "client/connection.h"
#include "tests/integration/daemon_fixture.h"
#include "tests/integration/npy_files.h"

namespace stripesolve::testing {
namespace {

TEST(Preflight, MistakesAreFoundBeforeAJobIsMade) {
  DaemonFixture d;
  Cli cli(d);
  const auto run = [&cli](const std::string& args) { return cli.run(args); };
  const std::string& out = cli.out();
  auto c = d.connect();
  auto job_count = [&] {
    auto r = c->call(protocol::MessageType::kJobs, {{"all", false}});
    return r.is_ok() ? (*r)["jobs"].size() : size_t{999};
  };
  ASSERT_EQ(run("matrix create A -n 40 --seed 1"), 0) << out;
  const size_t jobs = job_count();

  const std::string dir = d.dir();
  write_npy(dir + "/b39.npy", {39}, std::vector<double>(39, 1.0));
  EXPECT_EQ(run("solve A --rhs " + dir + "/b39.npy"), 1) << out;
  EXPECT_NE(out.find("--rhs '" + dir + "/b39.npy' has shape (39,) but matrix 'A' has order 40"),
            std::string::npos)
      << out;
  EXPECT_EQ(run("submit nope"), 1) << out;
  EXPECT_NE(out.find("no object named 'nope'"), std::string::npos) << out;

  std::vector<double> ones(2 * 5, 1.0);
  for (const char* name : {"dl", "rhs"}) write_npy(dir + "/" + name + ".npy", {2, 5}, ones);
  write_npy(dir + "/d.npy", {2, 5}, std::vector<double>(2 * 5, 4.0));  // diagonally dominant
  write_npy(dir + "/du.npy", {2, 4}, std::vector<double>(8, 1.0));
  const std::string arrays = " --dl " + dir + "/dl.npy --d " + dir + "/d.npy --du " + dir +
                             "/du.npy --rhs " + dir + "/rhs.npy";
  EXPECT_EQ(run("tridiag" + arrays), 1) << out;
  EXPECT_NE(
      out.find("--du has shape (2, 4) but --dl has (2, 5): the four arrays must have one shape"),
      std::string::npos)
      << out;
  write_npy(dir + "/du.npy", {2, 5}, ones);
  EXPECT_EQ(run("tridiag --algorithm foo" + arrays), 2) << out;  // usage
  EXPECT_NE(out.find("foo"), std::string::npos) << out;
  EXPECT_EQ(run("tridiag --sizes 3,3" + arrays), 1) << out;
  EXPECT_NE(out.find("--sizes adds up to 6 rows, but the arrays have shape (2, 5)"),
            std::string::npos)
      << out;
  if (d.daemon().status_json()["devices"].empty()) {
    EXPECT_EQ(run("tridiag --device gpu" + arrays), 1) << out;
    EXPECT_NE(out.find("--device gpu: the daemon has no GPU"), std::string::npos) << out;
  }
  write_npy(dir + "/rect.npy", {4, 5}, std::vector<double>(20, 1.0));
  EXPECT_EQ(run("matrix import R " + dir + "/rect.npy"), 1) << out;
  EXPECT_NE(out.find("matrix file '" + dir +
                     "/rect.npy' has shape (4, 5): a matrix is a square array (n, n)"),
            std::string::npos)
      << out;
  write_npy_i64(dir + "/ints.npy", {1, 2, 3, 4});
  EXPECT_EQ(run("matrix import R " + dir + "/ints.npy"), 1) << out;
  EXPECT_NE(out.find("matrix file '" + dir +
                     "/ints.npy' holds int64: a matrix is float64 or "
                     "float32"),
            std::string::npos)
      << out;
  EXPECT_EQ(job_count(), jobs) << "a refused request made a job";
  write_npy(dir + "/square.npy", {5, 5}, std::vector<double>(25, 1.0));
  EXPECT_EQ(run("matrix import R " + dir + "/square.npy"), 0) << out;  // a square one goes in
  EXPECT_EQ(job_count(), jobs + 1);
  EXPECT_EQ(run("tridiag" + arrays), 0) << out;  // the same files, right: it runs
}

}  // namespace
}  // namespace stripesolve::testing
