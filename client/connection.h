// The client side of the socket protocol (docs/protocol.md): a blocking connection used by the
// stripesolve CLI, the integration tests and the benchmarks.
//
// connect() performs the handshake. call() sends one request and returns its final reply;
// stream() delivers every frame of a streamed reply until the final one. An error frame becomes
// a Status with the daemon's code and message (and the hint appended). End of file before a final
// frame is kUnavailable: "the daemon closed the connection in the middle of a reply ...".
//
// Threading: one thread uses a connection at a time.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "protocol/frame.h"
#include "protocol/messages.h"

namespace stripesolve::client {

class Connection {
 public:
  // Connects to `socket_path` and says hello. A missing daemon gives an error that says how to
  // start one. Before anything is sent the peer's uid (SO_PEERCRED) must be root, the user's
  // own, or `daemon_uid` (default: $STRIPESOLVE_DAEMON_UID when set): a socket served by anyone
  // else is refused (issue 15 point 9).
  static Result<std::unique_ptr<Connection>> connect(
      const std::string& socket_path, std::string_view client_name = "stripesolve",
      std::optional<uid_t> daemon_uid = std::nullopt);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  const nlohmann::json& welcome() const { return welcome_; }
  const std::string& socket_path() const { return path_; }

  // `fds` travel with the request (protocol/descriptors.h); its header then says how many.
  Result<nlohmann::json> call(protocol::MessageType type,
                              nlohmann::json header = nlohmann::json::object(),
                              std::span<const int> fds = {});
  // `on_frame` sees every reply frame (also the final kOk); returning an error stops reading.
  Status stream(protocol::MessageType type, nlohmann::json header,
                const std::function<Status(const protocol::Frame&)>& on_frame,
                std::span<const int> fds = {});
  // Uploads bytes (an .npy image) in pieces of at most the payload limit; returns the upload id.
  Result<uint64_t> upload(std::string_view bytes);

  // Asked when a blocking receive is interrupted by a signal (EINTR): a non-ok status ends the
  // receive with it (the client's Ctrl-C, client/interrupt.h); by default it reads on.
  void set_interrupt_check(std::function<Status()> check) { interrupt_check_ = std::move(check); }

  // Low level.
  uint64_t next_request_id() { return ++last_request_id_; }
  // Sends a frame, with `fds` attached (SCM_RIGHTS) and counted in its header's "fds".
  Status send(const protocol::Frame& frame, std::span<const int> fds = {});
  Result<protocol::Frame> receive();
  int fd() const { return fd_; }

 private:
  Connection(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Status error_from(const protocol::Frame& frame) const;

  int fd_ = -1;
  std::string path_;
  nlohmann::json welcome_;
  protocol::FrameParser parser_;
  uint64_t last_request_id_ = 0;
  std::string read_buf_;
  std::function<Status()> interrupt_check_;
};

// The uid a daemon may run as besides root and the user: $STRIPESOLVE_DAEMON_UID, if set.
Result<std::optional<uid_t>> daemon_uid_from_environment();

// The message for a daemon that cannot be reached at `path` (errno `err`).
std::string daemon_unreachable_message(const std::string& path, int err);

}  // namespace stripesolve::client
