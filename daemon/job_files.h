// The files a client passes with a job (docs/protocol.md "Descriptor passing").
//
// The daemon never opens a path a client names. The client opens its inputs and creates its
// output (a temporary next to the target, renamed by the client once the job COMPLETED) with its
// own rights, and passes the descriptors with the submit frame; a job field {"fd": i} names the
// i-th of them. check_passed_files() runs at the socket edge, before the job is queued: every
// descriptor is named by exactly one field, and each is an open regular file (not a directory,
// pipe, device or O_PATH handle). job_input_file() / job_output_file() give a runner the
// descriptor of a field after checking it was opened for reading / for writing (not O_APPEND,
// which would move every pwrite to the end).
//
// Pure functions over descriptors; no threads.
#pragma once

#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "base/unique_fd.h"

namespace stripesolve::daemon {

class JobContext;

// Whether `job[field]` is {"fd": ...}.
bool names_file(const nlohmann::json& job, std::string_view field);

// The edge check of a submit: the {"fd": i} fields of `job` against the descriptors passed.
Status check_passed_files(const nlohmann::json& job, const std::vector<UniqueFd>& files);

// The descriptor `ctx.params()[field]` names, checked for reading or writing. Errors name the
// field ("field 'rhs': the file was not opened for reading").
Result<int> job_input_file(const JobContext& ctx, std::string_view field);
Result<int> job_output_file(const JobContext& ctx, std::string_view field);

}  // namespace stripesolve::daemon
