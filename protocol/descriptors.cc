#include "protocol/descriptors.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace stripesolve::protocol {

Status send_with_descriptors(int socket, std::string_view bytes, std::span<const int> fds) {
  if (fds.size() > kMaxFrameDescriptors) {
    return Status::invalid_argument(
        fmt::format("{} descriptors in one frame, at most {}", fds.size(), kMaxFrameDescriptors));
  }
  if (bytes.empty() && !fds.empty()) {
    return Status::invalid_argument("descriptors need at least one byte of data to travel with");
  }
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFrameDescriptors)] = {};
  size_t off = 0;
  bool attached = fds.empty();
  while (off < bytes.size()) {
    iovec iov{const_cast<char*>(bytes.data() + off), bytes.size() - off};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!attached) {
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    const ssize_t n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EPIPE || errno == ECONNRESET) {
        return Status::unavailable("sendmsg: the peer closed the connection");
      }
      return Status::from_errno(errno, "sendmsg");
    }
    attached = true;  // the descriptors went with the first bytes sent
    off += static_cast<size_t>(n);
  }
  return Status::ok();
}

Result<Received> receive_with_descriptors(int socket, char* buf, size_t len, bool nonblocking,
                                          std::vector<UniqueFd>* fds) {
  // One more slot than allowed: a batch that fills it is too large (the kernel sets MSG_CTRUNC
  // and closes what does not fit).
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * (kMaxFrameDescriptors + 1))];
  while (true) {
    iovec iov{buf, len};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC | (nonblocking ? MSG_DONTWAIT : 0));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Received{0, true};
      return Status::from_errno(errno, "recvmsg");
    }
    size_t got = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds->emplace_back(fd);
        ++got;
      }
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0 || got > kMaxFrameDescriptors) {
      fds->clear();
      return Status::invalid_argument(
          fmt::format("more than {} descriptors arrived with one message", kMaxFrameDescriptors));
    }
    return Received{static_cast<size_t>(n), false};
  }
}

Result<size_t> declared_descriptors(const nlohmann::json& header) {
  auto it = header.find("fds");
  if (it == header.end()) return size_t{0};
  if (!it->is_number_integer() || it->get<int64_t>() < 0 ||
      it->get<uint64_t>() > kMaxFrameDescriptors) {
    return Status::invalid_argument(fmt::format("field 'fds' must be an integer in [0, {}], got {}",
                                                kMaxFrameDescriptors, it->dump()));
  }
  return static_cast<size_t>(it->get<uint64_t>());
}

Status DescriptorQueue::add(std::vector<UniqueFd> batch) {
  if (batch.empty()) return Status::ok();
  // One batch may wait for a frame still being read, and the next frame's may arrive in the
  // read that completes it; a third means frames were sent without declaring theirs.
  if (batches_.size() >= 2) {
    return Status::invalid_argument("descriptors arrived that no frame declares");
  }
  batches_.push_back(std::move(batch));
  return Status::ok();
}

Result<std::vector<UniqueFd>> DescriptorQueue::take(size_t count) {
  if (count == 0) return std::vector<UniqueFd>{};
  if (batches_.empty()) {
    return Status::invalid_argument(
        fmt::format("the frame declares {} descriptors but none arrived with it", count));
  }
  std::vector<UniqueFd> batch = std::move(batches_.front());
  batches_.pop_front();
  if (batch.size() != count) {
    return Status::invalid_argument(fmt::format(
        "the frame declares {} descriptors but {} arrived with it", count, batch.size()));
  }
  return batch;
}

Status DescriptorQueue::check(bool at_frame_boundary) {
  const size_t allowed = at_frame_boundary ? 0 : 1;
  if (batches_.size() > allowed) {
    batches_.clear();
    return Status::invalid_argument("descriptors arrived that no frame declares");
  }
  return Status::ok();
}

size_t DescriptorQueue::held() const {
  size_t n = 0;
  for (const auto& b : batches_) n += b.size();
  return n;
}

}  // namespace stripesolve::protocol
