#include "protocol/messages.h"

#include <fmt/format.h>

namespace stripesolve::protocol {

std::string_view message_type_name(uint16_t type) {
  switch (static_cast<MessageType>(type)) {
    case MessageType::kHello:
      return "hello";
    case MessageType::kPing:
      return "ping";
    case MessageType::kUpload:
      return "upload";
    case MessageType::kSubmit:
      return "submit";
    case MessageType::kJobs:
      return "jobs";
    case MessageType::kStatus:
      return "status";
    case MessageType::kWatch:
      return "watch";
    case MessageType::kCancel:
      return "cancel";
    case MessageType::kResult:
      return "result";
    case MessageType::kLogs:
      return "logs";
    case MessageType::kTrace:
      return "trace";
    case MessageType::kMetrics:
      return "metrics";
    case MessageType::kDaemonStatus:
      return "daemon_status";
    case MessageType::kDaemonStop:
      return "daemon_stop";
    case MessageType::kMatrices:
      return "matrices";
    case MessageType::kWelcome:
      return "welcome";
    case MessageType::kOk:
      return "ok";
    case MessageType::kError:
      return "error";
    case MessageType::kProgress:
      return "progress";
    case MessageType::kResultChunk:
      return "result_chunk";
  }
  return "unknown";
}

bool is_request_type(uint16_t type) {
  return (type >= 1 && type <= 3) || (type >= 10 && type <= 21);
}

Frame make_frame(MessageType type, uint64_t request_id, nlohmann::json header, uint32_t flags) {
  Frame f;
  f.type = static_cast<uint16_t>(type);
  f.request_id = request_id;
  f.header = std::move(header);
  f.flags = flags;
  return f;
}

Frame make_error_frame(uint64_t request_id, const Status& status, std::string_view hint) {
  nlohmann::json h = {{"code", std::string(status_code_name(status.code()))},
                      {"message", status.message()}};
  if (!hint.empty()) h["hint"] = std::string(hint);
  if (status.retryable()) h["retryable"] = true;
  return make_frame(MessageType::kError, request_id, std::move(h), kFlagFinal);
}

StatusCode status_code_from_name(std::string_view name) {
  for (int c = static_cast<int>(StatusCode::kOk); c <= static_cast<int>(StatusCode::kInternal);
       ++c) {
    if (status_code_name(static_cast<StatusCode>(c)) == name) return static_cast<StatusCode>(c);
  }
  return StatusCode::kInternal;
}

Status status_from_error_frame(const Frame& frame) {
  std::string code = frame.header.value("code", std::string("Internal"));
  std::string message = frame.header.value("message", std::string("(no message)"));
  StatusCode c = status_code_from_name(code);
  if (c == StatusCode::kOk) c = StatusCode::kInternal;
  Status st(c, std::move(message));
  if (frame.header.value("retryable", false)) st.set_retryable();
  return st;
}

Result<nlohmann::json> reply_body(const Frame& frame) {
  if (frame.header.value("body", std::string()) != "payload") return frame.header;
  nlohmann::json body = nlohmann::json::parse(frame.payload, nullptr, false);
  if (body.is_discarded()) {
    return Status::invalid_argument(
        fmt::format("reply payload of {} bytes is not valid JSON", frame.payload.size()));
  }
  return body;
}

Frame make_hello(std::string_view client_name) {
  return make_frame(MessageType::kHello, 0,
                    {{"client", std::string(client_name)},
                     {"min_version", kMinProtocolVersion},
                     {"max_version", kProtocolVersion}});
}

Result<uint16_t> negotiate_version(const Frame& hello) {
  if (hello.type != static_cast<uint16_t>(MessageType::kHello)) {
    return Status::invalid_argument(fmt::format("expected a hello frame first, got type {} ({})",
                                                hello.type, message_type_name(hello.type)));
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(int64_t lo, get_int(hello.header, "min_version", 0, 65535));
  STRIPESOLVE_ASSIGN_OR_RETURN(int64_t hi, get_int(hello.header, "max_version", 0, 65535));
  const int64_t best = std::min<int64_t>(hi, kProtocolVersion);
  if (best < lo || best < kMinProtocolVersion) {
    return Status::failed_precondition(
        fmt::format("no common protocol version: client speaks {}..{}, daemon speaks {}..{}", lo,
                    hi, kMinProtocolVersion, kProtocolVersion));
  }
  return static_cast<uint16_t>(best);
}

Result<std::string> get_string(const nlohmann::json& header, std::string_view key) {
  auto it = header.find(key);
  if (it == header.end()) return Status::invalid_argument(fmt::format("missing field '{}'", key));
  if (!it->is_string()) {
    return Status::invalid_argument(
        fmt::format("field '{}' must be a string, got {}", key, it->type_name()));
  }
  return it->get<std::string>();
}

Result<int64_t> get_int(const nlohmann::json& header, std::string_view key, int64_t min,
                        int64_t max) {
  auto it = header.find(key);
  if (it == header.end()) return Status::invalid_argument(fmt::format("missing field '{}'", key));
  if (!it->is_number_integer()) {
    return Status::invalid_argument(
        fmt::format("field '{}' must be an integer, got {}", key, it->type_name()));
  }
  const int64_t v =
      it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX ? INT64_MAX : it->get<int64_t>();
  if (v < min || v > max) {
    return Status::invalid_argument(
        fmt::format("field '{}' is {}, must be in [{}, {}]", key, v, min, max));
  }
  return v;
}

Result<bool> get_bool(const nlohmann::json& header, std::string_view key, bool fallback) {
  auto it = header.find(key);
  if (it == header.end()) return fallback;
  if (!it->is_boolean()) {
    return Status::invalid_argument(
        fmt::format("field '{}' must be a boolean, got {}", key, it->type_name()));
  }
  return it->get<bool>();
}

Result<uint64_t> get_job_id(const nlohmann::json& header) {
  STRIPESOLVE_ASSIGN_OR_RETURN(int64_t id, get_int(header, "job", 1, INT64_MAX));
  return static_cast<uint64_t>(id);
}

}  // namespace stripesolve::protocol
