#include "tests/integration/processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>
#include <vector>

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

// Everything the child needs is made before fork(): the daemon's threads run in this
// process, so the child only calls async-signal-safe functions.
pid_t spawn_client(const std::vector<std::string>& args, const std::string& out) {
  std::string bin = STRIPESOLVE_CLIENT_BINARY;
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  argv.push_back(bin.data());
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int fd = ::open(out.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(fd);
  return pid;
}

}  // namespace stripesolve::testing
