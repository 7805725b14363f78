// Descriptor passing over the Unix socket (docs/protocol.md "Descriptor passing").
//
// A request that names files carries their descriptors instead of their paths: the client opens
// each file with its own rights and sends the descriptors with SCM_RIGHTS, attached to the first
// bytes of the frame (one sendmsg), whose JSON header says how many ("fds": k, at most
// kMaxFrameDescriptors). The daemon reads and writes only through them; it never opens a path a
// client names, so symlinks and check-then-use races cannot point it at another user's file.
//
// Matching descriptors to frames: Linux delivers a message's descriptors with the first bytes of
// its data, and one recvmsg() returns at most one batch (it stops after the message that carried
// descriptors). A frame's batch therefore arrives no later than the frame's first byte, and in
// frame order, so the receiver hands batches to the frames that declare them in order
// (DescriptorQueue). Anything else - a batch no frame declares, a count that differs from what
// arrived, more than the limit - is a protocol error; every descriptor is closed on every path
// (UniqueFd).
//
// Thread-safety: plain functions; a DescriptorQueue belongs to one connection (one thread).
#pragma once

#include <cstddef>
#include <deque>
#include <span>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "base/unique_fd.h"

namespace stripesolve::protocol {

// Descriptors one frame may carry (a tridiagonal batch needs six: dl, d, du, rhs, sizes, out).
inline constexpr size_t kMaxFrameDescriptors = 8;

// Sends all of `bytes` on the stream socket `socket`, with `fds` (at most kMaxFrameDescriptors)
// attached to the first byte. Retries EINTR and short writes; MSG_NOSIGNAL. A peer that closed
// the connection is kUnavailable.
Status send_with_descriptors(int socket, std::string_view bytes, std::span<const int> fds);

// One recvmsg() into `buf`. Returns the bytes read (0: end of stream) and appends the
// descriptors that came with them to `fds` (close-on-exec). `would_block` is set (and 0
// returned) when a non-blocking read finds nothing. A batch larger than kMaxFrameDescriptors
// (control data truncated) is kInvalidArgument; the descriptors that did arrive are closed.
struct Received {
  size_t bytes = 0;
  bool would_block = false;
};
Result<Received> receive_with_descriptors(int socket, char* buf, size_t len, bool nonblocking,
                                          std::vector<UniqueFd>* fds);

// The number of descriptors a frame declares: its header's "fds" (absent: 0).
Result<size_t> declared_descriptors(const nlohmann::json& header);

// Hands received batches to the frames that declare them (see the header comment).
class DescriptorQueue {
 public:
  // A read delivered `batch` (one sender message's descriptors; empty batches are ignored).
  Status add(std::vector<UniqueFd> batch);
  // A complete frame declared `count` descriptors: returns its batch (empty for 0).
  Result<std::vector<UniqueFd>> take(size_t count);
  // After the frames of a read were taken: a batch may wait only for the one frame still being
  // read. `at_frame_boundary`: no frame is partly read, so nothing may wait.
  Status check(bool at_frame_boundary);
  size_t held() const;
  void clear() { batches_.clear(); }

 private:
  std::deque<std::vector<UniqueFd>> batches_;
};

}  // namespace stripesolve::protocol
