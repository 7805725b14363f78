#include "daemon/uploads.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "base/units.h"
#include "daemon/job.h"

namespace stripesolve::daemon {

Status UploadStore::reserve(uint64_t bytes) {
  MutexLock lock(mu_);
  if (bytes > max_total_ || held_ > max_total_ - bytes) {
    return Status::resource_exhausted(
               fmt::format("uploads waiting in the daemon would exceed "
                           "daemon.limits.max_upload_total ({} held, "
                           "{} more asked); submit or close what you uploaded, or retry later",
                           format_bytes(held_), format_bytes(bytes)))
        .set_retryable();
  }
  held_ += bytes;
  return Status::ok();
}

void UploadStore::release(uint64_t bytes) {
  MutexLock lock(mu_);
  held_ -= std::min(held_, bytes);
}

uint64_t UploadStore::put(uid_t owner, std::string bytes, uint64_t connection) {
  MutexLock lock(mu_);
  const uint64_t id = next_id_++;
  uploads_[id] = Entry{owner, std::move(bytes), std::chrono::steady_clock::now(), connection};
  return id;
}

void UploadStore::claim(uid_t owner, uint64_t id) {
  auto it = uploads_.find(id);
  if (it != uploads_.end() && may_access(owner, it->second.owner)) it->second.claimed = true;
}

void UploadStore::claim_named(uid_t owner, const nlohmann::json& job) {
  MutexLock lock(mu_);
  // Iterative: the job came from a client (its nesting is bounded by the frame parser anyway).
  std::vector<const nlohmann::json*> todo = {&job};
  while (!todo.empty()) {
    const nlohmann::json* j = todo.back();
    todo.pop_back();
    if (j->is_object()) {
      auto it = j->find("upload");
      if (it != j->end() && it->is_number_integer()) {
        claim(owner, it->is_number_unsigned()
                         ? it->get<uint64_t>()
                         : static_cast<uint64_t>(std::max<int64_t>(0, it->get<int64_t>())));
      }
    }
    if (j->is_structured()) {
      for (const auto& child : *j) todo.push_back(&child);
    }
  }
}

size_t UploadStore::drop_connection(uint64_t connection) {
  MutexLock lock(mu_);
  return drop_if([&](const Entry& e) { return e.connection == connection && !e.claimed; });
}

Result<std::string> UploadStore::take(uid_t owner, uint64_t id) {
  MutexLock lock(mu_);
  auto it = uploads_.find(id);
  if (it == uploads_.end() || !may_access(owner, it->second.owner)) {
    return Status::not_found(fmt::format(
        "upload {} not found (uploads are used once, expire, and go with their connection unless a "
        "job submitted on it names them)",
        id));
  }
  std::string bytes = std::move(it->second.bytes);
  uploads_.erase(it);
  // The job holds them now; it is bounded by its own limits (max_rhs_bytes, tridiag.max_bytes).
  held_ -= std::min<uint64_t>(held_, bytes.size());
  return bytes;
}

size_t UploadStore::expire(std::chrono::steady_clock::time_point now, std::chrono::seconds ttl) {
  MutexLock lock(mu_);
  return drop_if([&](const Entry& e) { return e.created + ttl <= now; });
}

uint64_t UploadStore::bytes_held() const {
  MutexLock lock(mu_);
  return held_;
}

}  // namespace stripesolve::daemon
