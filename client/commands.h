// Client operations shared by the CLI, the integration tests and the benchmarks: building job
// specs, following a job (progress and result streaming on one connection), fetching results.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "client/connection.h"
#include "client/progress.h"

namespace stripesolve::client {

struct SolveRequest {
  std::string matrix;
  std::string rhs_path;             // an .npy file to upload; empty: generate
  std::string generate = "ones";    // "ones" or "uniform" (with seed)
  int64_t nrhs = 1;
  int64_t seed = 1;
  std::string pivot = "row";        // row, local, none
  std::string strategy = "meta_zigzag";
  int64_t refinement = 0;
  bool in_place = false;
  bool reuse = true;
};

// Uploads the right-hand sides if a file is given and returns the dense_solve job spec.
Result<nlohmann::json> build_solve_job(Connection& conn, const SolveRequest& request);

// Submits `job` and returns its id.
Result<uint64_t> submit_job(Connection& conn, const nlohmann::json& job);
// Submits `job` with wait and returns the finished job (any terminal state).
Result<nlohmann::json> run_job(Connection& conn, const nlohmann::json& job);

// Follows job `id` until it ends: progress goes to `display` (may be null); when `out_path` is
// not empty the solution is streamed into that .npy as it is produced. Returns the final job.
// The result must exist when the job COMPLETED; a failed or cancelled job is returned as is.
Result<nlohmann::json> follow_job(Connection& conn, uint64_t id, const std::string& out_path,
                                  ProgressDisplay* display);

// Streams the result of a job into `out_path`; returns the number of rows (of the stream's
// [rows, cols] framing) and, when `file_shape` is given, the shape of the .npy written.
Result<int64_t> fetch_result(Connection& conn, uint64_t id, const std::string& out_path,
                             std::vector<int64_t>* file_shape = nullptr);

}  // namespace stripesolve::client
