#include "client/connection.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "protocol/descriptors.h"

namespace stripesolve::client {

using protocol::Frame;
using protocol::MessageType;

std::string daemon_unreachable_message(const std::string& path, int err) {
  return fmt::format(
      "cannot connect to stripesolved at {}: {}. Is the daemon running? Start it with "
      "'stripesolved &' (or 'systemctl --user start stripesolved'), or point --socket / "
      "STRIPESOLVE_SOCKET at its socket",
      path, std::strerror(err));
}

Result<std::optional<uid_t>> daemon_uid_from_environment() {
  const char* text = std::getenv("STRIPESOLVE_DAEMON_UID");
  if (text == nullptr || *text == '\0') return std::optional<uid_t>();
  char* end = nullptr;
  errno = 0;
  const unsigned long v = std::strtoul(text, &end, 10);
  if (*end != '\0' || errno == ERANGE || v > 0xfffffffeul || text[0] == '-') {
    return Status::invalid_argument(
        fmt::format("STRIPESOLVE_DAEMON_UID must be a uid (a number), got '{}'", text));
  }
  return std::optional<uid_t>(static_cast<uid_t>(v));
}

Result<std::unique_ptr<Connection>> Connection::connect(const std::string& socket_path,
                                                        std::string_view client_name,
                                                        std::optional<uid_t> daemon_uid) {
  if (!daemon_uid) {
    STRIPESOLVE_ASSIGN_OR_RETURN(daemon_uid, daemon_uid_from_environment());
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    return Status::invalid_argument("socket path " + socket_path + " is too long");
  }
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::from_errno(errno, "socket(AF_UNIX)");
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::unavailable(daemon_unreachable_message(socket_path, err));
  }
  std::unique_ptr<Connection> c(new Connection(fd, socket_path));
  // Who serves this socket? Anyone who could create it could otherwise receive our requests
  // (and the descriptors they carry). Checked before the first byte is sent.
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Status::from_errno(errno, "SO_PEERCRED on " + socket_path);
  }
  if (cred.uid != 0 && cred.uid != ::getuid() && !(daemon_uid && cred.uid == *daemon_uid)) {
    return Status::failed_precondition(fmt::format(
        "refusing the daemon at {}: the socket is served by uid {}, which is neither root nor you "
        "(uid {}); if uid {} runs your daemon, set STRIPESOLVE_DAEMON_UID={} or pass --daemon-uid "
        "{}",
        socket_path, cred.uid, ::getuid(), cred.uid, cred.uid, cred.uid));
  }
  // A daemon that refuses the connection (limit reached) has already sent an error frame and
  // closed: the hello may fail with EPIPE, but the error is still there to read.
  const Status sent = c->send(protocol::make_hello(client_name));
  auto received = c->receive();
  if (!received.is_ok()) return sent.is_ok() ? received.status() : sent;
  Frame welcome = std::move(received).value();
  if (welcome.type == static_cast<uint16_t>(MessageType::kError)) return c->error_from(welcome);
  if (welcome.type != static_cast<uint16_t>(MessageType::kWelcome)) {
    return Status::failed_precondition(fmt::format("expected welcome from the daemon, got {}",
                                                   protocol::message_type_name(welcome.type)));
  }
  c->welcome_ = std::move(welcome.header);
  return c;
}

Connection::~Connection() {
  if (fd_ >= 0) ::close(fd_);
}

Status Connection::send(const Frame& frame, std::span<const int> fds) {
  Result<std::string> bytes = Status::internal("not encoded");
  if (fds.empty()) {
    bytes = protocol::encode_frame(frame);
  } else {
    Frame with_fds = frame;
    with_fds.header["fds"] = fds.size();
    bytes = protocol::encode_frame(with_fds);
  }
  if (!bytes.is_ok()) return bytes.status();
  Status st = protocol::send_with_descriptors(fd_, *bytes, fds);
  if (st.code() == StatusCode::kUnavailable) {
    return Status::unavailable(
        "the daemon closed the connection (it may have stopped or crashed); check "
        "'stripesolve daemon status' and the daemon log");
  }
  if (!st.is_ok()) return st.with_context("send to " + path_);
  return Status::ok();
}

Result<Frame> Connection::receive() {
  while (true) {
    if (auto f = parser_.next()) return std::move(*f);
    if (read_buf_.empty()) read_buf_.resize(4 << 20);
    const ssize_t n = ::recv(fd_, read_buf_.data(), read_buf_.size(), 0);
    if (n < 0 && errno == EINTR) {
      if (interrupt_check_) STRIPESOLVE_RETURN_IF_ERROR(interrupt_check_());
      continue;
    }
    if (n < 0 && errno != ECONNRESET) return Status::from_errno(errno, "recv from " + path_);
    if (n <= 0) {
      return Status::unavailable(
          "the daemon closed the connection in the middle of a reply (it may have stopped or "
          "crashed); check 'stripesolve daemon status' and the daemon log");
    }
    Status st = parser_.feed(std::string_view(read_buf_.data(), static_cast<size_t>(n)));
    if (!st.is_ok()) {
      return Status::failed_precondition("malformed reply from the daemon: " + st.message() +
                                         " (client and daemon versions differ?)");
    }
  }
}

Status Connection::error_from(const Frame& frame) const {
  Status st = protocol::status_from_error_frame(frame);
  const std::string hint = frame.header.value("hint", std::string());
  if (hint.empty()) return st;
  Status out(st.code(), st.message() + " (" + hint + ")");
  out.set_retryable(st.retryable());
  return out;
}

Result<nlohmann::json> Connection::call(MessageType type, nlohmann::json header,
                                        std::span<const int> fds) {
  nlohmann::json reply;
  Status st = stream(
      type, std::move(header),
      [&](const Frame& f) -> Status {
        if (f.type != static_cast<uint16_t>(MessageType::kOk)) return Status::ok();
        STRIPESOLVE_ASSIGN_OR_RETURN(reply, protocol::reply_body(f));
        return Status::ok();
      },
      fds);
  if (!st.is_ok()) return st;
  return reply;
}

Status Connection::stream(MessageType type, nlohmann::json header,
                          const std::function<Status(const Frame&)>& on_frame,
                          std::span<const int> fds) {
  const uint64_t id = next_request_id();
  if (Status sent = send(protocol::make_frame(type, id, std::move(header)), fds); !sent.is_ok()) {
    // A daemon that closed the connection may have said why first (an idle or handshake timeout).
    if (sent.code() == StatusCode::kUnavailable) {
      auto last = receive();
      if (last.is_ok() && last->type == static_cast<uint16_t>(MessageType::kError))
        return error_from(*last);
    }
    return sent;
  }
  while (true) {
    STRIPESOLVE_ASSIGN_OR_RETURN(Frame f, receive());
    if (f.request_id != id && f.request_id != 0) continue;  // a stale reply of an abandoned request
    if (f.type == static_cast<uint16_t>(MessageType::kError)) return error_from(f);
    STRIPESOLVE_RETURN_IF_ERROR(on_frame(f));
    if (f.flags & protocol::kFlagFinal) return Status::ok();
  }
}

Result<uint64_t> Connection::upload(std::string_view bytes) {
  const uint64_t id = next_request_id();
  const size_t piece = welcome_.value("limits", nlohmann::json::object())
                           .value("max_payload_bytes", protocol::kDefaultMaxPayloadBytes);
  size_t off = 0;
  do {
    const size_t n = std::min(piece, bytes.size() - off);
    Frame f = protocol::make_frame(MessageType::kUpload, id, nlohmann::json::object(),
                                   off + n == bytes.size() ? protocol::kFlagFinal : 0);
    f.payload.assign(bytes.data() + off, n);
    STRIPESOLVE_RETURN_IF_ERROR(send(f));
    off += n;
  } while (off < bytes.size());
  while (true) {
    STRIPESOLVE_ASSIGN_OR_RETURN(Frame f, receive());
    if (f.request_id != id && f.request_id != 0) continue;
    if (f.type == static_cast<uint16_t>(MessageType::kError)) return error_from(f);
    return static_cast<uint64_t>(f.header.value("upload", uint64_t{0}));
  }
}

}  // namespace stripesolve::client
