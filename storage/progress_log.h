// An append-only log of CRC'd records beside a factor object: the durable progress of its
// factorization (issue 18; the records' contents are the scheduler's, scheduler/factor_progress.h;
// the file format is in docs/storage-format.md, "Progress log").
//
// Each record is framed as  u32 magic "SSPR" | u32 payload length | payload | u32 CRC32C of the
// magic, the length and the payload  (little-endian). append() writes one record and
// fdatasync()s the file before it returns, so a record that append() reported is durable.
// open() reads the valid records from the start and stops at the first one that is cut short or
// fails its CRC (a torn tail after a crash): the file is truncated there, so that later records
// follow the last good one.
//
// Thread-safety: append() may be called from any thread; `mu_` serializes the appends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"

namespace stripesolve::storage {

class ProgressLog {
 public:
  using Record = std::vector<std::byte>;

  // Opens (creating, with `mode`) the log at `path`; *records receives the valid records in
  // order, *dropped_bytes (may be null) the length of the torn tail cut off.
  static Result<std::unique_ptr<ProgressLog>> open(const std::string& path, unsigned mode,
                                                   std::vector<Record>* records,
                                                   uint64_t* dropped_bytes = nullptr);
  ~ProgressLog();
  ProgressLog(const ProgressLog&) = delete;
  ProgressLog& operator=(const ProgressLog&) = delete;

  // Appends one record and syncs it (write, fdatasync).
  Status append(std::span<const std::byte> payload);
  // Appends several records with one write and one fdatasync.
  Status append(const std::vector<Record>& payloads);
  const std::string& path() const { return path_; }

  // The framing of one record (for tests that write a torn tail on purpose).
  static std::vector<std::byte> frame(std::span<const std::byte> payload);

 private:
  ProgressLog(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Mutex mu_;
  uint64_t end_ GUARDED_BY(mu_) = 0;  // where the next record goes
  const int fd_;
  const std::string path_;
};

}  // namespace stripesolve::storage
