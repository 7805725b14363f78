// Test support for descriptor passing: one sendmsg() that attaches any number of descriptors,
// past send_with_descriptors' limit, so that tests reach the receiver's check of it.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstring>
#include <span>
#include <string_view>
#include <vector>

namespace stripesolve::protocol {

// Sends `bytes` (one sendmsg, MSG_NOSIGNAL) with `fds` attached by SCM_RIGHTS, unchecked.
// Returns sendmsg's result.
inline ssize_t send_unchecked(int socket, std::string_view bytes, std::span<const int> fds) {
  // operator new's alignment suits cmsghdr.
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  return ::sendmsg(socket, &msg, MSG_NOSIGNAL);
}

}  // namespace stripesolve::protocol
