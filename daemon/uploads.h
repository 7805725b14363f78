// Uploaded .npy files (right-hand sides) waiting for the job that uses them.
// An upload belongs to the uid that sent it; take() by another uid reads as "not found".
// Thread-safe (mu_ guards the table).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"

namespace stripesolve::daemon {

class UploadStore {
 public:
  // Stores `bytes` and returns its id.
  uint64_t put(uid_t owner, std::string bytes);
  // Removes and returns an upload of `owner`.
  Result<std::string> take(uid_t owner, uint64_t id);
  // Drops uploads older than `ttl`; returns how many.
  size_t expire(std::chrono::steady_clock::time_point now, std::chrono::seconds ttl);
  uint64_t bytes_held() const;

 private:
  struct Entry {
    uid_t owner;
    std::string bytes;
    std::chrono::steady_clock::time_point created;
  };
  mutable std::mutex mu_;
  std::map<uint64_t, Entry> uploads_;  // guarded by mu_
  uint64_t next_id_ = 1;               // guarded by mu_
};

}  // namespace stripesolve::daemon
