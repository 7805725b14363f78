// Uploaded .npy files (right-hand sides, tridiagonal arrays) waiting for the job that uses them,
// and the memory bound over all uploads (issue 15, point 6).
//
// An upload belongs to the uid that sent it; take() by another uid reads as "not found". Every
// byte of an upload is accounted from the moment its piece arrives: a connection reserve()s
// each piece of an unfinished upload and release()s what it drops; put() keeps the finished
// bytes under the same account until take(), drop_connection() or expire() frees them. The
// account never exceeds max_total (daemon.limits.max_upload_total): reserve() fails instead.
//
// Lifetime: an upload lives until a job takes it, or until the connection that sent it closes,
// unless a job submitted before that names it (claim_named()): then until the job takes it or
// the upload ttl passes. So a client that leaves frees what it sent and no job asked for.
//
// Thread-safe (mu_ guards the table and the account).
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "base/mutex.h"
#include "base/status.h"

namespace stripesolve::daemon {

class UploadStore {
 public:
  explicit UploadStore(uint64_t max_total = UINT64_MAX) : max_total_(max_total) {}

  // Accounts `bytes` more of an unfinished upload; kResourceExhausted (retryable) naming
  // daemon.limits.max_upload_total when the uploads held would exceed it.
  Status reserve(uint64_t bytes);
  // Gives back bytes reserve() accounted (an unfinished upload dropped).
  void release(uint64_t bytes);
  // Stores a finished upload whose bytes were reserve()d, sent on `connection`; returns its id.
  uint64_t put(uid_t owner, std::string bytes, uint64_t connection);
  // Marks every upload of `owner` that `job` names as {"upload": id} (at any depth) as wanted by
  // a job: it outlives its connection.
  void claim_named(uid_t owner, const nlohmann::json& job);
  // Frees the uploads of a closed connection that no job named; returns how many.
  size_t drop_connection(uint64_t connection);
  // Removes and returns an upload of `owner`.
  Result<std::string> take(uid_t owner, uint64_t id);
  // Drops uploads older than `ttl`; returns how many.
  size_t expire(std::chrono::steady_clock::time_point now, std::chrono::seconds ttl);
  // Bytes accounted: unfinished pieces and finished uploads.
  uint64_t bytes_held() const;

 private:
  struct Entry {
    uid_t owner;
    std::string bytes;
    std::chrono::steady_clock::time_point created;
    uint64_t connection;
    bool claimed = false;
  };
  void claim(uid_t owner, uint64_t id) REQUIRES(mu_);
  // Removes the uploads `drop` picks and returns their bytes to the account; how many went.
  template <typename Drop>
  size_t drop_if(Drop drop) REQUIRES(mu_) {
    uint64_t freed = 0;
    const size_t dropped = std::erase_if(uploads_, [&](const auto& kv) {
      if (!drop(kv.second)) return false;
      freed += kv.second.bytes.size();
      return true;
    });
    held_ -= std::min(held_, freed);
    return dropped;
  }

  const uint64_t max_total_;
  mutable Mutex mu_;
  std::map<uint64_t, Entry> uploads_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  uint64_t held_ GUARDED_BY(mu_) = 0;  // reserved unfinished + finished bytes
};

}  // namespace stripesolve::daemon
