// A real stripesolved (daemon::Daemon) in this process, on a temporary socket, plus job types
// the tests control. The daemon runs on its own thread; stop() drains it like SIGTERM.
#pragma once

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "client/connection.h"
#include "daemon/daemon.h"

namespace stripesolve::testing {

// Job types for the infrastructure tests (the matrix and solve types are the daemon's own):
//   echo   (small): returns its params
//   gated  (dense): waits until cancelled (or `release` is set), reports progress while waiting
//   gated_tridiag (tridiag): the same in the tridiagonal-batch lane
//   rows   (dense): produces an n x nrhs solution x[i][j] = i + 1000 j, published stripe by
//                   stripe from the last stripe to the first (like back substitution)
//   throw  (small): throws std::bad_alloc ({"what": "bad_alloc"}) or std::runtime_error
struct TestJobs {
  std::atomic<bool> release{false};
  std::atomic<int> gated_running{0};
  void register_into(daemon::JobRegistry& r);
};

class DaemonFixture {
 public:
  // `tweak` edits the config before start (limits, modes).
  explicit DaemonFixture(const std::function<void(daemon::DaemonConfig&)>& tweak = {});
  ~DaemonFixture();
  const std::string& socket() const { return socket_; }
  const std::string& dir() const { return dir_; }
  daemon::Daemon& daemon() { return *daemon_; }
  TestJobs& jobs() { return jobs_; }
  std::unique_ptr<client::Connection> connect();
  void stop(const std::string& policy = "cancel");
  // The daemon's run() result, once it has stopped (stop() waits for that).
  int exit_code() const { return exit_code_; }

 private:
  std::string dir_, socket_;
  TestJobs jobs_;
  std::unique_ptr<daemon::Daemon> daemon_;
  std::thread thread_;
  bool stopped_ = false;
  std::atomic<int> exit_code_{-1};
};

// The stripesolve binary against a fixture's daemon: run("matrix ls") returns the exit code
// (-1 when it did not exit) and keeps what it printed, stdout and stderr together, in out().
class Cli {
 public:
  explicit Cli(const DaemonFixture& d);
  int run(const std::string& args);
  const std::string& out() const { return out_; }

 private:
  std::string prefix_, file_, out_;
};

double expected_row_value(int64_t row, int64_t col);

}  // namespace stripesolve::testing
