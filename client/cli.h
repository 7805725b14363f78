// The command-line client's toolkit, shared by main.cc and the verbs (solve_verbs.cc,
// job_verbs.cc, matrix_verbs.cc, daemon_verbs.cc): the global options, the exit codes, the
// connection, and how a reply or a finished job is printed and turned into an exit code.
// CLI11 stays in the binary: the client library (commands.h, human_output.h, ...) has no
// command line in it.
//
// Exit codes (also in `stripesolve --help`):
//   0 success; 1 the daemon reported an error or the job FAILED; 2 usage error;
//   3 the daemon is not reachable; 4 the job was CANCELLED; 5 the connection was lost mid-reply;
//   6 the job COMPLETED_WITH_WARNING; 130 Ctrl-C while waiting (the job keeps running).
//
// Threading: one thread (the process's).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "base/status.h"
#include "client/commands.h"
#include "client/connection.h"
#include "protocol/messages.h"

namespace stripesolve::client {

inline constexpr int kExitOk = 0, kExitError = 1, kExitUsage = 2, kExitUnreachable = 3,
                     kExitCancelled = 4, kExitLost = 5, kExitWarning = 6, kExitInterrupted = 130;

struct Globals {
  std::string socket;
  int64_t daemon_uid = -1;  // --daemon-uid; -1: $STRIPESOLVE_DAEMON_UID or none
  bool json = false;
  bool quiet = false;
  // How long `solve` and `watch` wait for a daemon that went away (a restart) before giving up.
  double reconnect_seconds = 600;
};

// Prints "stripesolve: <message>" and returns the exit code of the status (3 unreachable, 5 lost
// once connected, 4 cancelled, else 1).
int fail(const Status& st);
Result<std::unique_ptr<Connection>> connect_to_daemon(const Globals& g);
ReconnectPolicy reconnect_policy(const Globals& g);
void print_json(const nlohmann::json& j);
// A finished job: prints what a user wants to see and returns its exit code.
int report_job(const Globals& g, const nlohmann::json& job);
// The exit code a job's state gives `status` and `logs -f`: the job's own outcome.
int exit_code_of_state(const std::string& state);
// One request, one reply: JSON with --json, else `human`. `state` (optional) receives the reply's
// "state" field; `adjust` (optional) edits the reply before either output sees it.
int simple_call(const Globals& g, protocol::MessageType type, nlohmann::json header,
                const std::function<void(const nlohmann::json&)>& human,
                std::string* state = nullptr,
                const std::function<void(nlohmann::json&)>& adjust = {});
// Runs a job to its end with progress (Ctrl-C: see interrupt.h), puts its output in place and
// reports it.
int run_and_report(const Globals& g, std::unique_ptr<Connection>& c, JobRequest& request);

// The verbs, registered on `app`. Each keeps its options' values alive in its callbacks; `g`
// and `code` (the exit code a callback sets) must outlive app.parse().
void add_solve_verbs(CLI::App& app, const Globals& g, int& code);   // solve, submit, tridiag
void add_job_verbs(CLI::App& app, const Globals& g, int& code);     // jobs, status, watch, cancel,
                                                                    // result, logs, trace, metrics
void add_matrix_verbs(CLI::App& app, const Globals& g, int& code);  // matrix create ... rm
void add_daemon_verbs(CLI::App& app, const Globals& g, int& code);  // daemon status, stop

}  // namespace stripesolve::client
