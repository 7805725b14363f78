#include "client/commands.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "client/npy_writer.h"

namespace stripesolve::client {

using protocol::Frame;
using protocol::MessageType;

namespace {

// Opens `writer` from a result stream's opening frame: "shape" [rows, cols] frames the chunks,
// "array_shape" (when present) is the .npy file's shape (docs/protocol.md).
Status open_result_writer(NpyWriter& writer, const std::string& path, const nlohmann::json& header) {
  auto is_int_list = [](const nlohmann::json& j) {
    return j.is_array() && std::all_of(j.begin(), j.end(), [](const auto& v) { return v.is_number_integer(); });
  };
  const nlohmann::json shape = header.value("shape", nlohmann::json::array());
  if (!is_int_list(shape) || shape.size() != 2) return Status::failed_precondition("result without a shape");
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

Result<nlohmann::json> build_solve_job(Connection& conn, const SolveRequest& r) {
  nlohmann::json job = {{"type", "dense_solve"},   {"matrix", r.matrix},
                        {"pivot", r.pivot},        {"strategy", r.strategy},
                        {"refinement", r.refinement}, {"in_place", r.in_place},
                        {"reuse", r.reuse}};
  if (!r.rhs_path.empty()) {
    std::ifstream in(r.rhs_path, std::ios::binary);
    if (!in) return Status::not_found("cannot read right-hand sides " + r.rhs_path);
    std::ostringstream ss;
    ss << in.rdbuf();
    STRIPESOLVE_ASSIGN_OR_RETURN(uint64_t upload, conn.upload(ss.str()));
    job["rhs"] = {{"upload", upload}};
  } else {
    job["rhs"] = {{"generate", r.generate}, {"nrhs", r.nrhs}, {"seed", r.seed}};
  }
  return job;
}

Result<uint64_t> submit_job(Connection& conn, const nlohmann::json& job) {
  STRIPESOLVE_ASSIGN_OR_RETURN(nlohmann::json reply, conn.call(MessageType::kSubmit, {{"job", job}}));
  return reply.value("job", uint64_t{0});
}

Result<nlohmann::json> run_job(Connection& conn, const nlohmann::json& job) {
  return conn.call(MessageType::kSubmit, {{"job", job}, {"wait", true}});
}

Result<nlohmann::json> follow_job(Connection& conn, uint64_t id, const std::string& out_path,
                                  ProgressDisplay* display) {
  const uint64_t watch_id = conn.next_request_id();
  STRIPESOLVE_RETURN_IF_ERROR(conn.send(protocol::make_frame(MessageType::kWatch, watch_id, {{"job", id}})));
  uint64_t result_id = 0;
  std::unique_ptr<NpyWriter> writer;
  bool result_done = out_path.empty();
  Status result_error;
  if (!out_path.empty()) {
    result_id = conn.next_request_id();
    STRIPESOLVE_RETURN_IF_ERROR(conn.send(protocol::make_frame(MessageType::kResult, result_id, {{"job", id}})));
  }
  nlohmann::json final_job;
  bool watch_done = false;
  while (!watch_done || !result_done) {
    STRIPESOLVE_ASSIGN_OR_RETURN(Frame f, conn.receive());
    const bool final = (f.flags & protocol::kFlagFinal) != 0;
    if (f.request_id == watch_id) {
      if (f.type == static_cast<uint16_t>(MessageType::kError)) return protocol::status_from_error_frame(f);
      if (f.type == static_cast<uint16_t>(MessageType::kProgress) && display != nullptr) display->update(f.header);
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
        STRIPESOLVE_RETURN_IF_ERROR(writer->write_rows(f.header.value("row_begin", int64_t{0}), rows, f.payload.data()));
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
  if (final_job.value("state", std::string()) == "COMPLETED" && !result_error.is_ok()) return result_error;
  return final_job;
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
