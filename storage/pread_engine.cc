#include "storage/pread_engine.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace stripesolve::storage {

ssize_t PosixIo::pread(int fd, void* buf, size_t count, off_t offset) {
  return ::pread(fd, buf, count, offset);
}

ssize_t PosixIo::pwrite(int fd, const void* buf, size_t count, off_t offset) {
  return ::pwrite(fd, buf, count, offset);
}

PreadEngine::PreadEngine(std::shared_ptr<PosixIo> io)
    : io_(io ? std::move(io) : std::make_shared<PosixIo>()) {}

Status PreadEngine::run(std::span<const IoRequest> requests, const IoCompletion& on_complete) {
  // Linux moves at most 0x7ffff000 bytes per call; stay below with a 4 KiB-aligned cap.
  constexpr uint64_t kMaxCall = uint64_t{1} << 30;
  for (size_t i = 0; i < requests.size(); ++i) {
    const IoRequest& r = requests[i];
    Transfer t{&r, r.offset, r.length, r.buffer};
    while (t.done < t.length) {
      const size_t count = std::min(kMaxCall, t.length - t.done);
      const auto off = static_cast<off_t>(t.offset + t.done);
      ssize_t res = r.op == IoOp::kRead ? io_->pread(r.fd, t.buffer + t.done, count, off)
                                        : io_->pwrite(r.fd, t.buffer + t.done, count, off);
      const int64_t result = res < 0 ? -int64_t{errno} : res;
      Status error;
      if (apply_transfer_result(t, result, &error) == TransferStep::kFailed) return error;
    }
    if (on_complete) on_complete(i);
  }
  return Status::ok();
}

}  // namespace stripesolve::storage
