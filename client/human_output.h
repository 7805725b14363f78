// What the CLI prints for people (without --json): aligned tables and "key: value" blocks made
// from the daemon's JSON replies, and the `jobs` filters. Pure functions of the JSON, so tests
// check them without a daemon; --json output never goes through here.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stripesolve::client {

// Columns padded to their widest cell, two spaces apart, no trailing blanks; one line per row.
std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows);

// Lines "  key: value" with the keys padded to one width, in the order given.
std::string format_fields(const std::vector<std::pair<std::string, std::string>>& fields);

// `matrix ls`: NAME ORDER STRIPE ROWS STRIPES SIZE KIND CREATED; under the table, a line for
// each corrupt entry naming its problem and how to remove it. "no matrices in the store" when
// the list is empty.
std::string matrices_table(const nlohmann::json& matrices);

// `matrix show`, and the result of `matrix create` / `matrix import`.
std::string matrix_details(const nlohmann::json& info);

// `daemon status`'s job counts: "2 running, 1 pending, 14 completed, 1 failed (18 submitted)";
// states with no job are left out.
std::string job_counts(const nlohmann::json& counts);

// `jobs`: ID TYPE STATE UID CREATED PROGRESS.
std::string jobs_table(const nlohmann::json& jobs);

// A job's result as fields, nested objects flattened with dots ("quality.rcond"); numbers with
// six significant digits.
std::string result_details(const nlohmann::json& result);

// `status`: "job 7 (dense_solve): COMPLETED", then its owner, times, progress, error or warning
// as fields, then "result:" and result_details.
std::string job_details(const nlohmann::json& job);

// `jobs --state S --type T`: empty means any; states compare without case, both accept a
// comma-separated list ("running,pending").
struct JobFilter {
  std::string states;
  std::string types;
};
bool job_matches(const nlohmann::json& job, const JobFilter& filter);

}  // namespace stripesolve::client
