// A client's file mapped into the daemon, safe against the client truncating it.
//
// Mapping a passed file lets a job compute on the page cache itself: inputs are not copied and a
// solution is written straight into the client's output (issue 15: the data path of a
// tridiagonal batch). The danger is the client: it owns the file and may truncate it while the
// job runs, and touching a mapped page beyond the new end raises SIGBUS. A process-wide SIGBUS
// handler (installed with the first mapping) looks the faulting address up among the live
// mappings; inside one, it replaces the rest of that mapping with anonymous zero pages, marks it
// truncated and returns, so the access is retried on memory that exists. The job then sees
// truncated() and fails with a message; the daemon lives on. A SIGBUS at any other address is
// passed to the handler that was installed before (by default: the process dies, as it would
// have without us).
//
// Limits: at most kMaxClientMappings mappings live at once (map() fails beyond, and callers fall
// back to reading). Thread-safety: map() and the destructor from any thread; the handler reads
// the table lock-free (atomics).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace stripesolve::daemon {

inline constexpr size_t kMaxClientMappings = 256;

class ClientMapping {
 public:
  // Maps `length` bytes of `fd` from offset 0: read-only and private, or shared and writable
  // (the file must then be open for reading and writing). `length` must not exceed the file.
  static Result<ClientMapping> map(int fd, uint64_t length, bool writable);
  ClientMapping() = default;
  ClientMapping(ClientMapping&& other) noexcept;
  ClientMapping& operator=(ClientMapping&& other) noexcept;
  ~ClientMapping();  // unmaps

  char* data() const { return data_; }
  uint64_t size() const { return size_; }
  // Whether an access faulted because the file became shorter (the data read or written past
  // that point is not the file's).
  bool truncated() const;

 private:
  void release();
  char* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t mapped_ = 0;  // size_ rounded up to pages
  int slot_ = -1;
};

}  // namespace stripesolve::daemon
