// Client operations shared by the CLI, the integration tests and the benchmarks: building job
// specs, following a job (progress and result streaming on one connection), fetching results.
//
// Files a command names never reach the daemon as paths: the client opens them (and creates the
// output's temporary) with the user's own rights and passes the descriptors with the submit
// (JobRequest, client/local_files.h, docs/protocol.md "Descriptor passing").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "base/unique_fd.h"
#include "client/connection.h"
#include "client/local_files.h"
#include "client/progress.h"

namespace stripesolve::client {

// A job spec with the files it names: a field {"fd": i} of `job` is files[i]. `output`, when
// set, is the temporary the daemon writes the result into; finish_output() renames it over its
// target once the job COMPLETED and removes it otherwise.
struct JobRequest {
  JobRequest() = default;
  explicit JobRequest(nlohmann::json spec) : job(std::move(spec)) {}

  nlohmann::json job;
  std::vector<UniqueFd> files;
  std::optional<OutputFile> output;
  // Adds `fd` to the files; returns the field value that names it.
  nlohmann::json pass(UniqueFd fd);
  // Creates the output's temporary next to `path` and returns the field value that names it.
  Result<nlohmann::json> pass_output(const std::string& path, std::string_view option);
};

struct SolveRequest {
  std::string matrix;
  std::string rhs_path;           // an .npy file to pass; empty: generate
  std::string out_path;           // the solution's .npy, written by the daemon; empty: none
  std::string generate = "ones";  // "ones" or "uniform" (with seed)
  int64_t nrhs = 1;
  int64_t seed = 1;
  std::string pivot = "row";  // row, local, none
  std::string strategy = "meta_zigzag";
  std::string refinement = "auto";  // "auto" or a number of steps (checked by the CLI)
  bool in_place = false;
  bool reuse = true;
  bool store = true;  // false: the factors live for this solve only (nothing left to reuse)
};

// The dense_solve job: opens the right-hand sides and creates the output (when given) before
// anything is sent, so a missing input or an unwritable --out costs nothing.
Result<JobRequest> build_solve_job(const SolveRequest& request);
// matrix_import of the .npy at `path`; matrix_export into `path`.
Result<JobRequest> build_import_job(const std::string& name, const std::string& path,
                                    int64_t stripe_rows);
Result<JobRequest> build_export_job(const std::string& name, const std::string& path);

// Submits `job` and returns its id.
Result<uint64_t> submit_job(Connection& conn, const nlohmann::json& job);
Result<uint64_t> submit_request(Connection& conn, const JobRequest& request);
// Submits `job` with wait and returns the finished job (any terminal state).
Result<nlohmann::json> run_job(Connection& conn, const nlohmann::json& job);
Result<nlohmann::json> wait_request(Connection& conn, const JobRequest& request);
// The store's matrices (the `matrices` query, no job): the array of matrix infos, and one info
// (NotFound naming a missing matrix; Corruption for one whose manifest is unreadable).
Result<nlohmann::json> list_matrices(Connection& conn);
Result<nlohmann::json> show_matrix(Connection& conn, const std::string& name);
// Renames the request's output over its target when `final_job` COMPLETED, removes it otherwise.
Status finish_output(JobRequest& request, const nlohmann::json& final_job);
// submit_request + follow_job (progress only) + finish_output; `id` receives the job id.
Result<nlohmann::json> run_request(Connection& conn, JobRequest& request, ProgressDisplay* display,
                                   uint64_t* id = nullptr);

// Follows job `id` until it ends: progress goes to `display` (may be null); when `out_path` is
// not empty the solution is streamed into that .npy as it is produced. Returns the final job.
// The result must exist when the job COMPLETED; a failed or cancelled job is returned as is.
Result<nlohmann::json> follow_job(Connection& conn, uint64_t id, const std::string& out_path,
                                  ProgressDisplay* display);

// How follow_job_reconnecting() finds the daemon again after losing it (a restart, a crash).
struct ReconnectPolicy {
  std::function<Result<std::unique_ptr<Connection>>()> connect;
  double seconds = 0;                  // give up after this long without a daemon; 0: no retry
  double first_backoff_seconds = 0.1;  // doubled after each failed attempt, up to max
  double max_backoff_seconds = 5;
};

// Connects through `policy.connect`, retrying a refused or missing daemon with backoff for up
// to `policy.seconds`.
Result<std::unique_ptr<Connection>> connect_retrying(const ReconnectPolicy& policy);

// follow_job (progress only) that survives the daemon going away: when the connection is lost
// it tells `display` "daemon restarting, job N will resume", reconnects with backoff for up to
// `policy.seconds` and follows the job again (the restarted daemon knows it from its journal).
// `conn` is replaced by the new connection. Errors: the last connection error once the time is
// spent; the daemon's own errors (e.g. the job expired) as they are.
Result<nlohmann::json> follow_job_reconnecting(std::unique_ptr<Connection>& conn, uint64_t id,
                                               ProgressDisplay* display,
                                               const ReconnectPolicy& policy);

// Streams the result of a job into `out_path`; returns the number of rows (of the stream's
// [rows, cols] framing) and, when `file_shape` is given, the shape of the .npy written.
Result<int64_t> fetch_result(Connection& conn, uint64_t id, const std::string& out_path,
                             std::vector<int64_t>* file_shape = nullptr);

}  // namespace stripesolve::client
