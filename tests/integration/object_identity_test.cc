// Integration (issue 15, point 4): stored objects have identities. A factor is reused only for
// the matrix it was made from, `matrix rm` takes the matrix's factors with it, and concurrent
// first solves of one matrix share one factorization.
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/commands.h"
#include "tests/integration/daemon_fixture.h"
#include "tests/integration/processes.h"

namespace stripesolve::testing {
namespace {

nlohmann::json create(client::Connection& c, const std::string& name, int64_t n) {
  return run_ok(
      c, {{"type", "matrix_create"}, {"name", name}, {"n", n}, {"seed", 7}, {"stripe_rows", 48}});
}

nlohmann::json solve(client::Connection& c, const std::string& name) {
  return run_ok(
      c,
      {{"type", "dense_solve"}, {"matrix", name}, {"rhs", {{"generate", "uniform"}, {"nrhs", 2}}}});
}

std::vector<std::string> names(client::Connection& c) {
  std::vector<std::string> out;
  const auto list = client::list_matrices(c);
  EXPECT_TRUE(list.is_ok()) << list.status().to_string();
  for (const auto& m : list.is_ok() ? *list : nlohmann::json::array()) out.push_back(m["name"]);
  return out;
}

// Issue 15 point 4: `matrix rm S` left S.lu.* behind, and a matrix created again under the same
// name from the same source within the same second reused the old factors (wrong answers, or
// a pivots-size mismatch when the order changed).
TEST(ObjectIdentity, RemovingAMatrixRemovesItsFactorsAndANewOneIsFactoredAgain) {
  DaemonFixture d;
  auto c = d.connect();
  ASSERT_EQ(create(*c, "S", 100)["state"], "COMPLETED");
  const auto first = solve(*c, "S");
  ASSERT_EQ(first["state"], "COMPLETED") << first.dump();
  EXPECT_EQ(first["result"]["factor"], "S.lu.row");
  EXPECT_EQ(names(*c), (std::vector<std::string>{"S", "S.lu.row"}));

  const auto rm = run_ok(*c, {{"type", "matrix_delete"}, {"name", "S"}});
  ASSERT_EQ(rm["state"], "COMPLETED") << rm.dump();
  EXPECT_EQ(rm["result"]["factors_deleted"], nlohmann::json::array({"S.lu.row"}));
  EXPECT_TRUE(names(*c).empty());

  // The same generator and seed, another order, at once.
  ASSERT_EQ(create(*c, "S", 120)["state"], "COMPLETED");
  const auto second = solve(*c, "S");
  ASSERT_EQ(second["state"], "COMPLETED") << second.dump();
  EXPECT_EQ(second["result"]["reused_factors"], false);
  EXPECT_LT(second["result"]["residual"].get<double>(), 1e-12);
  const auto third = solve(*c, "S");
  EXPECT_EQ(third["result"]["reused_factors"], true);  // its own factor is reused
}

// `solve --no-store` ("store": false): the factors live for the solve only, so nothing is left
// to list or reuse; the field must be a boolean, and in_place (which makes the matrix its own
// factors) refuses it.
TEST(ObjectIdentity, ASolveThatDoesNotStoreItsFactorsLeavesNone) {
  DaemonFixture d;
  auto c = d.connect();
  ASSERT_EQ(create(*c, "S", 100)["state"], "COMPLETED");
  client::SolveRequest r;
  r.matrix = "S";
  r.generate = "uniform";
  r.store = false;
  auto job = client::build_solve_job(r);
  ASSERT_TRUE(job.is_ok()) << job.status().to_string();
  const auto first = run_ok(*c, job->job);
  ASSERT_EQ(first["state"], "COMPLETED") << first.dump();
  EXPECT_LT(first["result"]["residual"].get<double>(), 1e-12);
  EXPECT_EQ(names(*c), (std::vector<std::string>{"S"}));
  const auto second = run_ok(*c, job->job);
  ASSERT_EQ(second["state"], "COMPLETED") << second.dump();
  EXPECT_EQ(second["result"]["reused_factors"], false);
  EXPECT_EQ(names(*c), (std::vector<std::string>{"S"}));

  auto bad = client::run_job(
      *c,
      {{"type", "dense_solve"}, {"matrix", "S"}, {"rhs", {{"generate", "ones"}}}, {"store", "no"}});
  ASSERT_FALSE(bad.is_ok() && (*bad)["state"] == "COMPLETED");
  const std::string why = bad.is_ok() ? bad->dump() : bad.status().message();
  EXPECT_NE(why.find("field 'store' must be a boolean"), std::string::npos) << why;
  const auto in_place = client::run_job(*c, {{"type", "dense_solve"},
                                             {"matrix", "S"},
                                             {"rhs", {{"generate", "ones"}}},
                                             {"in_place", true},
                                             {"store", false}});
  const std::string refused = in_place.is_ok() ? in_place->dump() : in_place.status().message();
  EXPECT_NE(refused.find("in_place turns the matrix into its factors"), std::string::npos)
      << refused;
  EXPECT_EQ(names(*c), (std::vector<std::string>{"S"}));
}

TEST(ObjectIdentity, AStaleFactorOfTheSameNameIsNotReused) {
  DaemonFixture d;
  auto c = d.connect();
  ASSERT_EQ(create(*c, "S", 100)["state"], "COMPLETED");
  ASSERT_EQ(solve(*c, "S")["state"], "COMPLETED");
  // Remove the matrix alone, then make S again from the same source, at once.
  ASSERT_TRUE(d.daemon().store().remove("S").is_ok());
  ASSERT_EQ(create(*c, "S", 120)["state"], "COMPLETED");
  const auto again = solve(*c, "S");
  ASSERT_EQ(again["state"], "COMPLETED") << again.dump();
  EXPECT_EQ(again["result"]["reused_factors"], false);
  EXPECT_LT(again["result"]["residual"].get<double>(), 1e-12);
  const auto show = client::show_matrix(*c, "S.lu.row");
  const auto matrix = client::show_matrix(*c, "S");
  ASSERT_TRUE(show.is_ok() && matrix.is_ok());
  EXPECT_EQ((*show)["factor_of"]["id"], (*matrix)["id"]);
}

TEST(ObjectIdentity, TheCliSaysWhichFactorsWentWithTheMatrix) {
  DaemonFixture d;
  auto c = d.connect();
  ASSERT_EQ(create(*c, "M", 60)["state"], "COMPLETED");
  ASSERT_EQ(solve(*c, "M")["state"], "COMPLETED");
  const std::string out = d.dir() + "/rm.txt";
  const int status = wait_exit(spawn_client({"--socket", d.socket(), "matrix", "rm", "M"}, out),
                               std::chrono::seconds(60));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "deleted M\ndeleted its factor M.lu.row\n");
}

// Issue 15 point 10: with concurrency.dense 2, two first solves of one matrix both tried to make
// M.lu.row and the second failed on "'M.lu.row' already exists". Now the second waits for the
// first one's factor and reuses it.
TEST(ObjectIdentity, ConcurrentFirstSolvesShareOneFactorization) {
  DaemonFixture d([](daemon::DaemonConfig& c) { c.server.dense_concurrency = 2; });
  auto c = d.connect();
  ASSERT_EQ(create(*c, "M", 480)["state"], "COMPLETED");
  const nlohmann::json job = {
      {"type", "dense_solve"}, {"matrix", "M"}, {"rhs", {{"generate", "uniform"}, {"nrhs", 1}}}};
  auto a = client::submit_job(*c, job);
  auto b = client::submit_job(*c, job);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  auto ja = client::follow_job(*c, *a, "", nullptr);
  auto jb = client::follow_job(*c, *b, "", nullptr);
  ASSERT_TRUE(ja.is_ok() && jb.is_ok());
  ASSERT_EQ((*ja)["state"], "COMPLETED") << ja->dump();
  ASSERT_EQ((*jb)["state"], "COMPLETED") << jb->dump();
  const bool reused_a = (*ja)["result"]["reused_factors"],
             reused_b = (*jb)["result"]["reused_factors"];
  EXPECT_NE(reused_a, reused_b) << "exactly one of them factors";
  EXPECT_LT((*ja)["result"]["residual"].get<double>(), 1e-12);
  EXPECT_LT((*jb)["result"]["residual"].get<double>(), 1e-12);
  EXPECT_EQ(names(*c), (std::vector<std::string>{"M", "M.lu.row"}));
}

}  // namespace
}  // namespace stripesolve::testing
