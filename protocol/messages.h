// The message type catalogue and the version handshake (docs/protocol.md).
//
// Every connection starts with the client's kHello; the daemon answers kWelcome with the version
// both sides will speak, or kError and closes. Requests carry a client-chosen request id; every
// reply frame of that request echoes it. A request is answered by one kOk or kError frame, or by
// a stream of frames (kProgress, kResultChunk, ...) whose last frame has kFlagFinal set.
// Pure value code: no I/O, no threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "protocol/frame.h"

namespace stripesolve::protocol {

enum class MessageType : uint16_t {
  // client -> daemon
  kHello = 1,    // {"client": name, "min_version": v, "max_version": v}
  kPing = 2,     // {} -> kOk {"pong": true}
  kUpload = 3,   // one piece of an .npy upload: payload bytes; final frame -> kOk {"upload": id}
  kSubmit = 10,  // {"job": {"type": ..., ...}, "wait": bool} -> kOk {"job": id[, result]}
  kJobs = 11,    // {"all": bool} -> kOk {"jobs": [...]}
  kStatus = 12,  // {"job": id} -> kOk {job}
  kWatch = 13,   // {"job": id} -> kProgress frames, final kOk {job} when it ends
  kCancel = 14,  // {"job": id} -> kOk {job}
  kResult =
      15,  // {"job": id} -> kOk {"shape": [n, nrhs][, "array_shape"]}, kResultChunk..., final kOk
  kLogs = 16,          // {"job": id} -> kOk {"lines": [...]}
  kTrace = 17,         // {"job": id} -> kOk {"trace": <Chrome trace JSON>}
  kMetrics = 18,       // {} -> kOk {"text": <Prometheus text format>}
  kDaemonStatus = 19,  // {} -> kOk {...}
  kDaemonStop = 20,    // {"policy": "drain"|"cancel"} -> kOk, then the daemon drains and exits
  kMatrices = 21,      // {} -> kOk {"matrices": [info...]}; {"name": s} -> kOk {"matrix": info};
                       // {"name": s, "plan": true} -> kOk {"matrix", "plan", "plan_text", ...}
  // daemon -> client
  kWelcome = 100,   // {"version": v, "daemon": name, "uid": peer uid, "limits": {...}}
  kOk = 101,        // the reply (JSON header), or the last frame of a stream when final
  kError = 102,     // {"code": StatusCode name, "message": text, "hint": what to do}
  kProgress = 103,  // {"job": id, "state", "phase", "fraction", "gflops", "io_bytes_per_second",
                    // "eta_seconds", ...}
  kResultChunk =
      104,  // {"row_begin": r, "rows": k, "nrhs": m}; payload k*m float64, row-major (C order)
};

// "hello", "submit", ...; "unknown" for values outside the catalogue.
std::string_view message_type_name(uint16_t type);
bool is_request_type(uint16_t type);

// Replies whose JSON exceeds this travel in the payload: header {"body": "payload"}, payload =
// the JSON text (see reply_body()).
inline constexpr size_t kInlineReplyBytes = 16 * 1024;
// The reply JSON of a kOk frame, wherever it travels.
Result<nlohmann::json> reply_body(const Frame& frame);

// Builds frames.
Frame make_frame(MessageType type, uint64_t request_id,
                 nlohmann::json header = nlohmann::json::object(), uint32_t flags = 0);
Frame make_error_frame(uint64_t request_id, const Status& status, std::string_view hint = {});
// Reads a kError frame back into a Status (code by name; unknown names -> kInternal).
Status status_from_error_frame(const Frame& frame);
StatusCode status_code_from_name(std::string_view name);

// The handshake.
Frame make_hello(std::string_view client_name);
// Picks the highest version both sides speak, or an error naming both ranges.
Result<uint16_t> negotiate_version(const Frame& hello);

// Typed access to header fields, with errors naming the field (used at the socket edge).
Result<std::string> get_string(const nlohmann::json& header, std::string_view key);
Result<int64_t> get_int(const nlohmann::json& header, std::string_view key, int64_t min,
                        int64_t max);
// An optional boolean: `fallback` when absent, an error when present and not a boolean.
Result<bool> get_bool(const nlohmann::json& header, std::string_view key, bool fallback);
Result<uint64_t> get_job_id(const nlohmann::json& header);

}  // namespace stripesolve::protocol
