#include "client/commands.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "client/npy_writer.h"

namespace stripesolve::client {

using protocol::Frame;
using protocol::MessageType;

namespace {

// Opens `writer` from a result stream's opening frame: "shape" [rows, cols] frames the chunks,
// "array_shape" (when present) is the .npy file's shape (docs/protocol.md).
Status open_result_writer(NpyWriter& writer, const std::string& path,
                          const nlohmann::json& header) {
  auto is_int_list = [](const nlohmann::json& j) {
    return j.is_array() &&
           std::all_of(j.begin(), j.end(), [](const auto& v) { return v.is_number_integer(); });
  };
  const nlohmann::json shape = header.value("shape", nlohmann::json::array());
  if (!is_int_list(shape) || shape.size() != 2)
    return Status::failed_precondition("result without a shape");
  std::vector<int64_t> array_shape;
  if (header.contains("array_shape")) {
    if (!is_int_list(header["array_shape"])) {
      return Status::failed_precondition("result array_shape is not a list of integers");
    }
    array_shape = header["array_shape"].get<std::vector<int64_t>>();
  }
  return writer.open(path, shape[0].get<int64_t>(), shape[1].get<int64_t>(), array_shape);
}

}  // namespace

nlohmann::json JobRequest::pass(UniqueFd fd) {
  files.push_back(std::move(fd));
  return {{"fd", files.size() - 1}};
}

Result<nlohmann::json> JobRequest::pass_output(const std::string& path, std::string_view option) {
  STRIPESOLVE_ASSIGN_OR_RETURN(OutputFile out, OutputFile::create(path, option));
  // The daemon gets a descriptor of its own (the client keeps the one it commits through).
  UniqueFd dup(::fcntl(out.fd(), F_DUPFD_CLOEXEC, 0));
  if (!dup.valid()) return Status::from_errno(errno, "dup " + out.temporary());
  output = std::move(out);
  return pass(std::move(dup));
}

Result<JobRequest> build_solve_job(const SolveRequest& r) {
  JobRequest req;
  req.job = {{"type", "dense_solve"},
             {"matrix", r.matrix},
             {"pivot", r.pivot},
             {"strategy", r.strategy},
             {"refinement", r.refinement == "auto" ? nlohmann::json("auto")
                                                   : nlohmann::json(std::stoll(r.refinement))},
             {"in_place", r.in_place},
             {"reuse", r.reuse},
             {"store", r.store}};
  if (!r.rhs_path.empty()) {
    STRIPESOLVE_ASSIGN_OR_RETURN(UniqueFd fd, open_input(r.rhs_path, "--rhs"));
    req.job["rhs"] = req.pass(std::move(fd));
  } else {
    req.job["rhs"] = {{"generate", r.generate}, {"nrhs", r.nrhs}, {"seed", r.seed}};
  }
  if (!r.out_path.empty()) {
    STRIPESOLVE_ASSIGN_OR_RETURN(req.job["out"], req.pass_output(r.out_path, "--out"));
  }
  return req;
}

Result<JobRequest> build_import_job(const std::string& name, const std::string& path,
                                    int64_t stripe_rows) {
  JobRequest req;
  STRIPESOLVE_ASSIGN_OR_RETURN(UniqueFd fd, open_input(path, "matrix"));
  req.job = {{"type", "matrix_import"}, {"name", name}, {"label", path}};
  if (stripe_rows > 0) req.job["stripe_rows"] = stripe_rows;
  req.job["file"] = req.pass(std::move(fd));
  return req;
}

Result<JobRequest> build_export_job(const std::string& name, const std::string& path) {
  JobRequest req;
  req.job = {{"type", "matrix_export"}, {"name", name}, {"label", path}};
  STRIPESOLVE_ASSIGN_OR_RETURN(req.job["file"], req.pass_output(path, "output"));
  return req;
}

namespace {

std::vector<int> raw_fds(const JobRequest& request) {
  std::vector<int> fds;
  for (const UniqueFd& f : request.files) fds.push_back(f.get());
  return fds;
}

}  // namespace

Result<uint64_t> submit_job(Connection& conn, const nlohmann::json& job) {
  STRIPESOLVE_ASSIGN_OR_RETURN(nlohmann::json reply,
                               conn.call(MessageType::kSubmit, {{"job", job}}));
  return reply.value("job", uint64_t{0});
}

Result<uint64_t> submit_request(Connection& conn, const JobRequest& request) {
  const std::vector<int> fds = raw_fds(request);
  STRIPESOLVE_ASSIGN_OR_RETURN(nlohmann::json reply,
                               conn.call(MessageType::kSubmit, {{"job", request.job}}, fds));
  return reply.value("job", uint64_t{0});
}

Result<nlohmann::json> list_matrices(Connection& conn) {
  STRIPESOLVE_ASSIGN_OR_RETURN(
      nlohmann::json reply, conn.call(protocol::MessageType::kMatrices, nlohmann::json::object()));
  return reply.value("matrices", nlohmann::json::array());
}

Result<nlohmann::json> show_matrix(Connection& conn, const std::string& name) {
  STRIPESOLVE_ASSIGN_OR_RETURN(nlohmann::json reply,
                               conn.call(protocol::MessageType::kMatrices, {{"name", name}}));
  return reply.value("matrix", nlohmann::json::object());
}

Result<nlohmann::json> run_job(Connection& conn, const nlohmann::json& job) {
  return conn.call(MessageType::kSubmit, {{"job", job}, {"wait", true}});
}

Result<nlohmann::json> wait_request(Connection& conn, const JobRequest& request) {
  const std::vector<int> fds = raw_fds(request);
  return conn.call(MessageType::kSubmit, {{"job", request.job}, {"wait", true}}, fds);
}

Status finish_output(JobRequest& request, const nlohmann::json& final_job) {
  if (!request.output) return Status::ok();
  const std::string state = final_job.value("state", std::string());
  // A solution with a warning is still the solution (as LAPACK's x with info = n + 1): kept.
  if (state != "COMPLETED" && state != "COMPLETED_WITH_WARNING") {
    request.output->discard();
    return Status::ok();
  }
  return request.output->commit();
}

Result<nlohmann::json> run_request(Connection& conn, JobRequest& request, ProgressDisplay* display,
                                   uint64_t* id) {
  STRIPESOLVE_ASSIGN_OR_RETURN(uint64_t job_id, submit_request(conn, request));
  if (id != nullptr) *id = job_id;
  // The daemon holds its own descriptors now; ours close with the request.
  request.files.clear();
  STRIPESOLVE_ASSIGN_OR_RETURN(nlohmann::json done, follow_job(conn, job_id, "", display));
  STRIPESOLVE_RETURN_IF_ERROR(finish_output(request, done));
  return done;
}

Result<nlohmann::json> follow_job(Connection& conn, uint64_t id, const std::string& out_path,
                                  ProgressDisplay* display) {
  const uint64_t watch_id = conn.next_request_id();
  STRIPESOLVE_RETURN_IF_ERROR(
      conn.send(protocol::make_frame(MessageType::kWatch, watch_id, {{"job", id}})));
  uint64_t result_id = 0;
  std::unique_ptr<NpyWriter> writer;
  bool result_done = out_path.empty();
  Status result_error;
  if (!out_path.empty()) {
    result_id = conn.next_request_id();
    STRIPESOLVE_RETURN_IF_ERROR(
        conn.send(protocol::make_frame(MessageType::kResult, result_id, {{"job", id}})));
  }
  nlohmann::json final_job;
  bool watch_done = false;
  while (!watch_done || !result_done) {
    STRIPESOLVE_ASSIGN_OR_RETURN(Frame f, conn.receive());
    const bool final = (f.flags & protocol::kFlagFinal) != 0;
    if (f.request_id == watch_id) {
      if (f.type == static_cast<uint16_t>(MessageType::kError))
        return protocol::status_from_error_frame(f);
      if (f.type == static_cast<uint16_t>(MessageType::kProgress) && display != nullptr)
        display->update(f.header);
      if (final) {
        STRIPESOLVE_ASSIGN_OR_RETURN(final_job, protocol::reply_body(f));
        watch_done = true;
      }
    } else if (result_id != 0 && f.request_id == result_id) {
      if (f.type == static_cast<uint16_t>(MessageType::kError)) {
        result_error = protocol::status_from_error_frame(f);
        result_done = true;
      } else if (f.type == static_cast<uint16_t>(MessageType::kResultChunk)) {
        if (!writer) return Status::failed_precondition("result chunk before the result header");
        const int64_t rows = f.header.value("rows", int64_t{0});
        const int64_t nrhs = f.header.value("nrhs", int64_t{0});
        if (static_cast<int64_t>(f.payload.size()) != 8 * rows * nrhs) {
          return Status::failed_precondition(fmt::format("result chunk has {} bytes, expected {}",
                                                         f.payload.size(), 8 * rows * nrhs));
        }
        STRIPESOLVE_RETURN_IF_ERROR(
            writer->write_rows(f.header.value("row_begin", int64_t{0}), rows, f.payload.data()));
      } else if (!final) {  // the stream's opening frame with the final shape
        writer = std::make_unique<NpyWriter>();
        STRIPESOLVE_RETURN_IF_ERROR(open_result_writer(*writer, out_path, f.header));
      } else {
        if (!writer) return Status::failed_precondition("result ended before its header");
        STRIPESOLVE_RETURN_IF_ERROR(writer->finish());
        result_done = true;
      }
    }
  }
  if (display != nullptr) display->finish();
  const std::string state = final_job.value("state", std::string());
  if ((state == "COMPLETED" || state == "COMPLETED_WITH_WARNING") && !result_error.is_ok()) {
    return result_error;
  }
  return final_job;
}

namespace {
// A lost or refused connection (not an answer of the daemon's): worth trying again.
bool connection_lost(const Status& st) {
  return st.code() == StatusCode::kUnavailable || st.code() == StatusCode::kIoError;
}
}  // namespace

Result<std::unique_ptr<Connection>> connect_retrying(const ReconnectPolicy& policy) {
  using SteadyClock = std::chrono::steady_clock;
  const auto deadline = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                                 std::chrono::duration<double>(policy.seconds));
  double backoff = policy.first_backoff_seconds;
  while (true) {
    auto c = policy.connect();
    if (c.is_ok() || !connection_lost(c.status()) || SteadyClock::now() >= deadline) return c;
    std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
    backoff = std::min(backoff * 2, policy.max_backoff_seconds);
  }
}

Result<nlohmann::json> follow_job_reconnecting(std::unique_ptr<Connection>& conn, uint64_t id,
                                               ProgressDisplay* display,
                                               const ReconnectPolicy& policy) {
  bool announced = false;
  while (true) {
    auto done = follow_job(*conn, id, "", display);
    // A job the daemon's shutdown stopped is kept by its journal: it goes on after the restart.
    const bool kept_for_restart =
        done.is_ok() && done->value("state", std::string()) == "CANCELLED" &&
        done->value("error", nlohmann::json::object()).value("code", std::string()) ==
            status_code_name(StatusCode::kUnavailable);
    if (!kept_for_restart && (done.is_ok() || !connection_lost(done.status()))) return done;
    if (policy.seconds <= 0 || !policy.connect) return done;
    if (display != nullptr && !(announced && kept_for_restart)) {
      display->notice(fmt::format("daemon restarting, job {} will resume", id));
    }
    announced = true;
    conn.reset();
    if (kept_for_restart) {
      // The stopping daemon still answers until it exits: wait for its socket to go first.
      std::this_thread::sleep_for(std::chrono::duration<double>(policy.max_backoff_seconds / 5));
    }
    auto c = connect_retrying(policy);
    if (!c.is_ok()) {
      return Status::unavailable(
          fmt::format("the daemon did not come back within {:.0f} s ({}); job {} may still "
                      "resume: 'stripesolve watch {}' once it is up",
                      policy.seconds, c.status().message(), id, id));
    }
    conn = std::move(c).value();
  }
}

Result<int64_t> fetch_result(Connection& conn, uint64_t id, const std::string& out_path,
                             std::vector<int64_t>* file_shape) {
  NpyWriter writer;
  bool opened = false;
  Status st = conn.stream(MessageType::kResult, {{"job", id}}, [&](const Frame& f) -> Status {
    if (f.type == static_cast<uint16_t>(MessageType::kResultChunk)) {
      if (!opened) return Status::failed_precondition("result chunk before the result header");
      const int64_t rows = f.header.value("rows", int64_t{0});
      if (static_cast<int64_t>(f.payload.size()) != 8 * rows * f.header.value("nrhs", int64_t{0})) {
        return Status::failed_precondition("result chunk size does not match its header");
      }
      return writer.write_rows(f.header.value("row_begin", int64_t{0}), rows, f.payload.data());
    }
    if (f.flags & protocol::kFlagFinal) return writer.finish();
    opened = true;
    return open_result_writer(writer, out_path, f.header);
  });
  if (!st.is_ok()) return st;
  if (file_shape != nullptr) *file_shape = writer.file_shape();
  return writer.rows_written();
}

}  // namespace stripesolve::client
