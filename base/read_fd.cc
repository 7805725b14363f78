#include "base/read_fd.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace stripesolve {

Result<std::string> read_fd(int fd, const std::string& what, uint64_t limit) {
  std::string out;
  char buf[65536];
  while (out.size() < limit) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(sizeof buf, limit - out.size()));
    const ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::from_errno(errno, "read " + what);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace stripesolve
