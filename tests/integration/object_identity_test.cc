// Integration (issue 15, point 4): stored objects have identities. A factor is reused only for
// the matrix it was made from.
#include <gtest/gtest.h>

#include <string>

#include "client/commands.h"
#include "tests/integration/daemon_fixture.h"

namespace stripesolve::testing {
namespace {

nlohmann::json run(client::Connection& c, const nlohmann::json& job) {
  auto r = client::run_job(c, job);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? *r : nlohmann::json::object();
}

nlohmann::json create(client::Connection& c, const std::string& name, int64_t n) {
  return run(c, {{"type", "matrix_create"}, {"name", name}, {"n", n}, {"seed", 7}, {"stripe_rows", 48}});
}

nlohmann::json solve(client::Connection& c, const std::string& name) {
  return run(c, {{"type", "dense_solve"}, {"matrix", name}, {"rhs", {{"generate", "uniform"}, {"nrhs", 2}}}});
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
  const auto show = run(*c, {{"type", "matrix_show"}, {"name", "S.lu.row"}});
  const auto matrix = run(*c, {{"type", "matrix_show"}, {"name", "S"}});
  EXPECT_EQ(show["result"]["factor_of"]["id"], matrix["result"]["id"]);
}

}  // namespace
}  // namespace stripesolve::testing
