// Integration (issue 15, point 10): small things that used to be accepted and then failed later,
// or silently, now fail at once with a clear error: names too long to be solved, a store path
// listed twice, a duplicated YAML key, and objects with a corrupt manifest.
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "client/commands.h"
#include "tests/integration/daemon_fixture.h"
#include "tests/integration/npy_files.h"
#include "tests/integration/processes.h"

namespace stripesolve::testing {
namespace {

// Runs `stripesolved --config <yaml> --check-config`; returns its exit code and stderr + stdout.
std::pair<int, std::string> check_config(const std::string& dir, const std::string& yaml) {
  const std::string file = dir + "/check.yaml", out = dir + "/check.out";
  std::ofstream(file) << yaml;
  const int st = std::system((std::string(STRIPESOLVE_DAEMON_BINARY) + " --config " + file +
                              " --check-config > " + out + " 2>&1")
                                 .c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, read_file(out)};
}

// Names of 122-128 characters could be created but never solved: "NAME.lu.row" did not fit.
TEST(ConfigChecks, MatrixNamesLeaveRoomForTheirFactors) {
  DaemonFixture d;
  auto c = d.connect();
  const std::string longest(119, 'n');
  auto too_long = run_ok(*c, {{"type", "matrix_create"}, {"name", longest + "x"}, {"n", 10}});
  EXPECT_EQ(too_long["state"], "FAILED");
  EXPECT_EQ(too_long["error"]["message"],
            "matrix name '" + longest +
                "x' has 120 characters; matrix names have at most 119, so "
                "that the names of their factors (NAME.lu.<pivot>) fit in 128");
  ASSERT_EQ(
      run_ok(*c, {{"type", "matrix_create"}, {"name", longest}, {"n", 40}, {"seed", 3}})["state"],
      "COMPLETED");
  for (const char* pivot : {"row", "local", "none"}) {
    auto solved = run_ok(*c, {{"type", "dense_solve"},
                              {"matrix", longest},
                              {"pivot", pivot},
                              {"rhs", {{"generate", "ones"}, {"nrhs", 1}}}});
    EXPECT_EQ(solved["state"], "COMPLETED") << pivot << ": " << solved.dump();
  }
}

// Usage errors of either binary exit 2 (the client's documented code), and name what was wrong.
TEST(ConfigChecks, UsageErrorsExitTwoAndNameTheWord) {
  DaemonFixture d;
  const std::string out = d.dir() + "/usage.out";
  const int daemon_status =
      std::system((std::string(STRIPESOLVE_DAEMON_BINARY) + " --bogus > " + out + " 2>&1").c_str());
  EXPECT_EQ(WEXITSTATUS(daemon_status), 2);
  EXPECT_NE(read_file(out).find("--bogus"), std::string::npos) << read_file(out);
  Cli cli(d);
  EXPECT_EQ(cli.run("frobnicate"), 2);
  EXPECT_NE(cli.out().find("unknown command 'frobnicate' (one of: solve, submit, tridiag"),
            std::string::npos)
      << cli.out();
}

TEST(ConfigChecks, AStorePathListedTwiceFailsTheConfigCheck) {
  DaemonFixture d;
  auto [code, text] = check_config(d.dir(), "store:\n  paths:\n    - " + d.dir() + "/s0\n    - " +
                                                d.dir() + "/s1\n    - " + d.dir() + "/s0/\n");
  EXPECT_EQ(code, 2) << text;
  EXPECT_NE(text.find(d.dir() + "/check.yaml:2: store.paths: entries 0 and 2 ('" + d.dir() +
                      "/s0' and '" + d.dir() +
                      "/s0/') name the same directory; list each "
                      "directory once"),
            std::string::npos)
      << text;
  auto [fine, fine_text] =
      check_config(d.dir(), "store:\n  paths: [" + d.dir() + "/s0, " + d.dir() + "/s1]\n");
  EXPECT_EQ(fine, 0) << fine_text;
}

TEST(ConfigChecks, ADuplicatedYamlKeyFailsTheConfigCheck) {
  DaemonFixture d;
  auto [code, text] = check_config(d.dir(),
                                   "daemon:\n  socket_mode: \"0600\"\n  limits:\n"
                                   "    max_jobs: 10\n  socket_mode: \"0660\"\n");
  EXPECT_EQ(code, 2) << text;
  EXPECT_NE(text.find(d.dir() + "/check.yaml:5: daemon.socket_mode: duplicate key (also set at "
                                "line 2); set each key once"),
            std::string::npos)
      << text;
}

// An object whose manifest cannot be read was hidden from `ls` and could not be removed.
TEST(ConfigChecks, AnObjectWithACorruptManifestIsListedAndRemovable) {
  DaemonFixture d;
  auto c = d.connect();
  ASSERT_EQ(run_ok(*c, {{"type", "matrix_create"}, {"name", "M"}, {"n", 30}})["state"],
            "COMPLETED");
  const std::string manifest = d.dir() + "/store/objects/M/manifest.json";
  std::ofstream(manifest) << "{\"format\": \"stripesolve-object\", truncated";
  auto list = client::list_matrices(*c);
  ASSERT_TRUE(list.is_ok()) << list.status().to_string();
  ASSERT_EQ(list->size(), 1u) << list->dump();
  const auto& m = (*list)[0];
  EXPECT_EQ(m["name"], "M");
  EXPECT_EQ(m["state"], "corrupt");
  EXPECT_EQ(m["problem"], "manifest " + manifest + ": not valid JSON");
  EXPECT_EQ(client::show_matrix(*c, "M").status().code(), StatusCode::kCorruption);
  auto rm = run_ok(*c, {{"type", "matrix_delete"}, {"name", "M"}});
  EXPECT_EQ(rm["state"], "COMPLETED") << rm.dump();
  EXPECT_TRUE(client::list_matrices(*c)->empty());
  EXPECT_EQ(run_ok(*c, {{"type", "matrix_create"}, {"name", "M"}, {"n", 30}})["state"],
            "COMPLETED");
}

}  // namespace
}  // namespace stripesolve::testing
