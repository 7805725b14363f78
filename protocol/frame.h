// Wire frames of the stripesolve socket protocol (docs/protocol.md).
//
// A frame is a fixed 32-byte little-endian header, a JSON header (UTF-8, an object, at most
// max_header_bytes), and an optional binary payload (at most max_payload_bytes, 4 MiB by default):
//
//   offset size field
//        0    4 magic        "SSLV" (0x56 4c 53 53 read as a little-endian u32: 0x564C5353)
//        4    2 version      protocol version of this frame's encoding (kProtocolVersion)
//        6    2 type         MessageType (messages.h)
//        8    4 flags        bit 0 = kFlagFinal (last frame of a stream); others must be 0
//       12    4 header_len   bytes of JSON header that follow
//       16    8 request_id   chosen by the client, echoed by every reply frame
//       24    4 payload_len  bytes of binary payload after the JSON header
//       28    4 reserved     must be 0
//
// FrameParser is an incremental, pure state machine: feed() it any split of the byte stream and
// it yields whole frames, or one error after which it stays failed. It never allocates more than
// the limits allow, whatever the bytes say. Thread-safety: a parser or frame is used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace stripesolve::protocol {

inline constexpr uint32_t kMagic = 0x564C5353;  // "SSLV" on the wire
inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr uint16_t kMinProtocolVersion = 1;
inline constexpr size_t kFixedHeaderBytes = 32;
inline constexpr uint32_t kDefaultMaxHeaderBytes = 64 * 1024;
inline constexpr uint32_t kDefaultMaxPayloadBytes = 4 * 1024 * 1024;
inline constexpr uint32_t kFlagFinal = 1u;
inline constexpr uint32_t kKnownFlags = kFlagFinal;

struct Frame {
  uint16_t type = 0;  // a MessageType value; unknown types are rejected by the receiver's dispatch
  uint32_t flags = 0;
  uint64_t request_id = 0;
  nlohmann::json header = nlohmann::json::object();
  std::string payload;  // binary bytes
};

// Serializes a frame; the header is dumped compactly. Fails if the JSON header or payload exceeds
// the default limits (a sender must never produce a frame the receiver will reject).
Result<std::string> encode_frame(const Frame& frame);
// Appends the encoding to `out` (same rules); on error `out` is unchanged.
Status append_frame(std::string& out, const Frame& frame);

struct FrameLimits {
  uint32_t max_header_bytes = kDefaultMaxHeaderBytes;
  uint32_t max_payload_bytes = kDefaultMaxPayloadBytes;
};

class FrameParser {
 public:
  explicit FrameParser(FrameLimits limits = {}) : limits_(limits) {}

  // Consumes all of `bytes`. Complete frames are queued (see next()). Returns the parser's
  // error (sticky: every later call returns the same error without reading) or OK.
  Status feed(std::string_view bytes);
  // The oldest complete frame not yet taken, if any.
  std::optional<Frame> next();
  bool failed() const { return !error_.is_ok(); }
  const Status& error() const { return error_; }
  // Bytes of a partial frame held (fixed header, JSON or payload so far).
  size_t buffered_bytes() const { return buf_.size(); }
  uint64_t frames_parsed() const { return frames_parsed_; }
  // True when no partial frame is pending (a clean end of stream is possible).
  bool at_frame_boundary() const { return state_ == State::kFixedHeader && buf_.empty(); }

 private:
  enum class State { kFixedHeader, kJsonHeader, kPayload, kFailed };
  Status fail(Status st);
  Status parse_fixed_header();
  Status finish_json();
  void emit();

  FrameLimits limits_;
  State state_ = State::kFixedHeader;
  Status error_;
  std::string buf_;  // bytes of the current section
  Frame current_;
  uint32_t header_len_ = 0;
  uint32_t payload_len_ = 0;
  uint64_t frames_parsed_ = 0;
  std::deque<Frame> ready_;
};

}  // namespace stripesolve::protocol
