#include "daemon/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace stripesolve::daemon {

Status sd_notify_to(const std::string& address, std::string_view state) {
  if (address.empty() || (address[0] != '/' && address[0] != '@')) {
    return Status::invalid_argument("NOTIFY_SOCKET '" + address +
                                    "' is neither a path nor @abstract");
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (address.size() >= sizeof(addr.sun_path)) {
    return Status::invalid_argument("NOTIFY_SOCKET '" + address + "' is too long");
  }
  std::memcpy(addr.sun_path, address.data(), address.size());
  if (address[0] == '@') addr.sun_path[0] = '\0';
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size());
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::from_errno(errno, "socket(AF_UNIX, SOCK_DGRAM)");
  const ssize_t n = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                             reinterpret_cast<const sockaddr*>(&addr), len);
  const int err = errno;
  ::close(fd);
  if (n < 0) return Status::from_errno(err, "sd_notify to " + address);
  return Status::ok();
}

Status sd_notify(std::string_view state) {
  const char* env = std::getenv("NOTIFY_SOCKET");
  if (env == nullptr || *env == '\0') return Status::ok();
  return sd_notify_to(env, state);
}

}  // namespace stripesolve::daemon
