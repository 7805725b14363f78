// Ctrl-C on `stripesolve solve` (client/interrupt.h, issue 20): the first press leaves the job
// running and the client exits 130 with a sentence that says so and no partial output behind;
// a second press within 2 s cancels the job (exit 4). The client runs as a child process and
// gets real SIGINTs; the daemon is in-process.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/daemon_fixture.h"
#include "tests/integration/processes.h"

namespace stripesolve::testing {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int exit_code(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string job_state(DaemonFixture& d, uint64_t id) {
  auto c = d.connect();
  auto r = c->call(protocol::MessageType::kStatus, {{"job", id}});
  return r.is_ok() ? r->value("state", std::string()) : r.status().to_string();
}

TEST(ClientInterrupt, OneCtrlCLeavesTheJobRunningTwoCancelIt) {
  // A solve of several seconds: n = 3000 through a cache of eight 32-row stripes.
  DaemonFixture d(
      [](daemon::DaemonConfig& c) { c.engine.ram_budget = 8 * 32 * 3000 * 8 + (1 << 20); });
  ASSERT_EQ(exit_code(spawn_client({"--socket", d.socket(), "matrix", "create", "M", "-n", "3000",
                                    "--generator", "uniform", "--stripe-rows", "32"},
                                   d.dir() + "/create.txt")),
            0)
      << read_file(d.dir() + "/create.txt");
  for (int presses : {1, 2}) {
    const std::string tag = std::to_string(presses);
    const std::string out = d.dir() + "/client" + tag + ".txt";
    const std::string x = d.dir() + "/x" + tag + ".npy";
    // --no-reuse: a factor stored by the first round would make the second one too quick to stop.
    const pid_t pid =
        spawn_client({"--socket", d.socket(), "solve", "M", "--no-reuse", "--out", x}, out);
    // Interrupt once the job runs.
    uint64_t id = 0;
    for (int i = 0; i < 1000 && id == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const std::string text = read_file(out);
      const size_t at = text.find("submitted job ");
      if (at != std::string::npos) id = std::stoull(text.substr(at + 14));
    }
    ASSERT_NE(id, 0u) << read_file(out);
    for (int i = 0; i < 500 && job_state(d, id) != "RUNNING"; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_EQ(job_state(d, id), "RUNNING");
    ::kill(pid, SIGINT);
    if (presses == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ::kill(pid, SIGINT);
    }
    const int code = exit_code(pid);
    const std::string text = read_file(out);
    EXPECT_NE(text.find("job " + std::to_string(id) +
                        " keeps running; Ctrl-C again within 2 s cancels it"),
              std::string::npos)
        << text;
    for (const auto& e : std::filesystem::directory_iterator(d.dir())) {
      EXPECT_NE(e.path().filename().string().rfind("x" + tag, 0), 0u)
          << "left behind: " << e.path();
    }
    if (presses == 1) {
      EXPECT_EQ(code, 130) << text;
      const std::string state = job_state(d, id);
      EXPECT_TRUE(state == "RUNNING" || state == "COMPLETED") << state;
      auto c = d.connect();
      (void)c->call(protocol::MessageType::kCancel, {{"job", id}});
    } else {
      EXPECT_EQ(code, 4) << text;
      EXPECT_NE(text.find("cancelled"), std::string::npos) << text;
    }
    std::string state;
    for (int i = 0; i < 1000; ++i) {
      state = job_state(d, id);
      if (state == "CANCELLED" || state == "COMPLETED") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (presses == 2) {
      EXPECT_EQ(state, "CANCELLED");
    }
  }
}

}  // namespace
}  // namespace stripesolve::testing
