// Reading a descriptor to its end: a pipe from a child, a socket after the peer's last frame, a
// file up to a bound.
// Thread-safety: a plain function on the caller's descriptor.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace stripesolve {

// What `fd` yields until end of file or `limit` bytes, in 64 KiB reads (a read interrupted by a
// signal is retried). `what` names the source in the error of a failed read ("read <what>").
Result<std::string> read_fd(int fd, const std::string& what, uint64_t limit = UINT64_MAX);

}  // namespace stripesolve
