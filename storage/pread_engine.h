// The pread/pwrite engine: requests one after another with plain system calls. It is the
// fallback when io_uring is unavailable and the oracle the io_uring engine is tested against.
//
// The system calls go through a PosixIo object so tests can make them fail, return short counts or
// -EINTR (pread_engine_test.cc); production code uses the default, which calls ::pread/::pwrite.
//
// Thread-safety: run() may be called concurrently; the engine holds no mutable state.
#pragma once

#include <sys/types.h>

#include <memory>

#include "storage/io_engine.h"

namespace stripesolve::storage {

class PosixIo {
 public:
  virtual ~PosixIo() = default;
  // Return bytes moved or -1 with errno set, like the system calls.
  virtual ssize_t pread(int fd, void* buf, size_t count, off_t offset);
  virtual ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset);
};

class PreadEngine final : public IoEngine {
 public:
  // `io` null means the real system calls.
  explicit PreadEngine(std::shared_ptr<PosixIo> io = nullptr);
  std::string_view name() const override { return "pread"; }
  using IoEngine::run;
  Status run(std::span<const IoRequest> requests, const IoCompletion& on_complete) override;

 private:
  std::shared_ptr<PosixIo> io_;
};

}  // namespace stripesolve::storage
