#include "protocol/frame.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace stripesolve::protocol {
namespace {

// The JSON header may nest at most this deep; deeper input is rejected before parsing, so no
// recursion anywhere depends on attacker-chosen depth.
constexpr int kMaxJsonDepth = 32;

void put_u16(char* p, uint16_t v) {
  p[0] = static_cast<char>(v & 0xff);
  p[1] = static_cast<char>(v >> 8);
}
void put_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_u64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint16_t get_u16(const char* p) {
  return static_cast<uint16_t>(static_cast<uint8_t>(p[0]) | (static_cast<uint8_t>(p[1]) << 8));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// Maximum nesting depth of arrays/objects outside strings (a lexical scan, no allocation).
int json_depth(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace

Status append_frame(std::string& out, const Frame& frame) {
  if ((frame.flags & ~kKnownFlags) != 0) {
    return Status::invalid_argument(
        fmt::format("frame flags 0x{:x} has unknown bits", frame.flags));
  }
  const std::string json =
      frame.header.is_null()
          ? std::string("{}")
          : frame.header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (json.size() > kDefaultMaxHeaderBytes) {
    return Status::invalid_argument(
        fmt::format("JSON header of {} bytes exceeds the limit of {} bytes", json.size(),
                    kDefaultMaxHeaderBytes));
  }
  if (frame.payload.size() > kDefaultMaxPayloadBytes) {
    return Status::invalid_argument(fmt::format("payload of {} bytes exceeds the limit of {} bytes",
                                                frame.payload.size(), kDefaultMaxPayloadBytes));
  }
  char fixed[kFixedHeaderBytes] = {};
  put_u32(fixed + 0, kMagic);
  put_u16(fixed + 4, kProtocolVersion);
  put_u16(fixed + 6, frame.type);
  put_u32(fixed + 8, frame.flags);
  put_u32(fixed + 12, static_cast<uint32_t>(json.size()));
  put_u64(fixed + 16, frame.request_id);
  put_u32(fixed + 24, static_cast<uint32_t>(frame.payload.size()));
  out.reserve(out.size() + kFixedHeaderBytes + json.size() + frame.payload.size());
  out.append(fixed, kFixedHeaderBytes);
  out.append(json);
  out.append(frame.payload);
  return Status::ok();
}

Result<std::string> encode_frame(const Frame& frame) {
  std::string out;
  STRIPESOLVE_RETURN_IF_ERROR(append_frame(out, frame));
  return out;
}

Status FrameParser::fail(Status st) {
  state_ = State::kFailed;
  error_ = st.with_context(fmt::format("frame {}", frames_parsed_));
  buf_.clear();
  buf_.shrink_to_fit();
  return error_;
}

Status FrameParser::parse_fixed_header() {
  const char* p = buf_.data();
  const uint32_t magic = get_u32(p);
  if (magic != kMagic) {
    return Status::invalid_argument(fmt::format(
        "bad magic 0x{:08x} (expected 0x{:08x} \"SSLV\"): the peer does not speak the stripesolve "
        "protocol",
        magic, kMagic));
  }
  const uint16_t version = get_u16(p + 4);
  if (version < kMinProtocolVersion || version > kProtocolVersion) {
    return Status::invalid_argument(
        fmt::format("unsupported protocol version {} (this side speaks {}..{})", version,
                    kMinProtocolVersion, kProtocolVersion));
  }
  current_ = Frame{};
  current_.type = get_u16(p + 6);
  current_.flags = get_u32(p + 8);
  header_len_ = get_u32(p + 12);
  current_.request_id = get_u64(p + 16);
  payload_len_ = get_u32(p + 24);
  const uint32_t reserved = get_u32(p + 28);
  if ((current_.flags & ~kKnownFlags) != 0) {
    return Status::invalid_argument(fmt::format("unknown flag bits 0x{:x}", current_.flags));
  }
  if (reserved != 0) {
    return Status::invalid_argument(fmt::format("reserved field is 0x{:x}, must be 0", reserved));
  }
  if (header_len_ > limits_.max_header_bytes) {
    return Status::invalid_argument(
        fmt::format("JSON header of {} bytes exceeds the limit of {} bytes", header_len_,
                    limits_.max_header_bytes));
  }
  if (payload_len_ > limits_.max_payload_bytes) {
    return Status::invalid_argument(fmt::format("payload of {} bytes exceeds the limit of {} bytes",
                                                payload_len_, limits_.max_payload_bytes));
  }
  return Status::ok();
}

Status FrameParser::finish_json() {
  if (buf_.empty()) {
    current_.header = nlohmann::json::object();
    return Status::ok();
  }
  if (json_depth(buf_) > kMaxJsonDepth) {
    return Status::invalid_argument(
        fmt::format("JSON header nests deeper than {} levels", kMaxJsonDepth));
  }
  nlohmann::json parsed = nlohmann::json::parse(buf_, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return Status::invalid_argument(
        fmt::format("JSON header of {} bytes is not valid JSON", buf_.size()));
  }
  if (!parsed.is_object()) {
    return Status::invalid_argument(
        fmt::format("JSON header must be an object, got {}", parsed.type_name()));
  }
  current_.header = std::move(parsed);
  return Status::ok();
}

void FrameParser::emit() {
  ready_.push_back(std::move(current_));
  current_ = Frame{};
  ++frames_parsed_;
  state_ = State::kFixedHeader;
  buf_.clear();
}

Status FrameParser::feed(std::string_view bytes) {
  if (state_ == State::kFailed) return error_;
  while (true) {
    switch (state_) {
      case State::kFixedHeader: {
        if (bytes.empty()) return Status::ok();
        const size_t take = std::min(bytes.size(), kFixedHeaderBytes - buf_.size());
        buf_.append(bytes.data(), take);
        bytes.remove_prefix(take);
        if (buf_.size() < kFixedHeaderBytes) return Status::ok();
        if (Status st = parse_fixed_header(); !st.is_ok()) return fail(std::move(st));
        buf_.clear();
        buf_.reserve(header_len_);
        state_ = State::kJsonHeader;
        break;
      }
      case State::kJsonHeader: {
        const size_t take = std::min<size_t>(bytes.size(), header_len_ - buf_.size());
        buf_.append(bytes.data(), take);
        bytes.remove_prefix(take);
        if (buf_.size() < header_len_) return Status::ok();
        if (Status st = finish_json(); !st.is_ok()) return fail(std::move(st));
        buf_.clear();
        state_ = State::kPayload;
        current_.payload.reserve(payload_len_);
        break;
      }
      case State::kPayload: {
        const size_t take = std::min<size_t>(bytes.size(), payload_len_ - current_.payload.size());
        current_.payload.append(bytes.data(), take);
        bytes.remove_prefix(take);
        if (current_.payload.size() < payload_len_) return Status::ok();
        emit();
        break;
      }
      case State::kFailed:
        return error_;
    }
  }
}

std::optional<Frame> FrameParser::next() {
  if (ready_.empty()) return std::nullopt;
  Frame f = std::move(ready_.front());
  ready_.pop_front();
  return f;
}

}  // namespace stripesolve::protocol
