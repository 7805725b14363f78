// Spawned daemons and clients, for the integration tests: waiting for a process to exit, for a
// daemon's socket to answer, and running a job that must succeed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/connection.h"

namespace stripesolve::testing {

// Waits up to `limit` for `pid` to exit; returns its wait status, or -1 after killing it
// (SIGKILL) once the limit has passed.
int wait_exit(pid_t pid, std::chrono::seconds limit);

// Connects to `socket`, retrying for up to `limit` while the daemon starts; null if it never
// answers.
std::unique_ptr<client::Connection> wait_connect(const std::string& socket,
                                                 std::chrono::seconds limit);

// Runs `job` to its end through client::run_job; a failure fails the test and gives {}.
nlohmann::json run_ok(client::Connection& c, const nlohmann::json& job);

// Starts the client binary with `args`, its stdout and stderr into the file `out`; its pid.
// Safe beside the in-process daemon's threads (the child only calls async-signal-safe
// functions).
pid_t spawn_client(const std::vector<std::string>& args, const std::string& out);

}  // namespace stripesolve::testing
