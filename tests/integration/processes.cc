#include "tests/integration/processes.h"

#include <signal.h>
#include <sys/wait.h>

#include <thread>

#include <gtest/gtest.h>

#include "client/commands.h"

namespace stripesolve::testing {

namespace {
constexpr std::chrono::milliseconds kPoll{5};
}  // namespace

int wait_exit(pid_t pid, std::chrono::seconds limit) {
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(kPoll);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

std::unique_ptr<client::Connection> wait_connect(const std::string& socket,
                                                 std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    auto c = client::Connection::connect(socket);
    if (c.is_ok()) return std::move(c).value();
    std::this_thread::sleep_for(kPoll);
  }
  return nullptr;
}

nlohmann::json run_ok(client::Connection& c, const nlohmann::json& job) {
  auto r = client::run_job(c, job);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? *r : nlohmann::json::object();
}

}  // namespace stripesolve::testing
