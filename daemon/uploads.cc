#include "daemon/uploads.h"

#include <fmt/format.h>

#include "daemon/job.h"

namespace stripesolve::daemon {

uint64_t UploadStore::put(uid_t owner, std::string bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  uploads_[id] = Entry{owner, std::move(bytes), std::chrono::steady_clock::now()};
  return id;
}

Result<std::string> UploadStore::take(uid_t owner, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = uploads_.find(id);
  if (it == uploads_.end() || !may_access(owner, it->second.owner)) {
    return Status::not_found(fmt::format("upload {} not found (uploads are used once and expire)", id));
  }
  std::string bytes = std::move(it->second.bytes);
  uploads_.erase(it);
  return bytes;
}

size_t UploadStore::expire(std::chrono::steady_clock::time_point now, std::chrono::seconds ttl) {
  std::lock_guard<std::mutex> lock(mu_);
  return std::erase_if(uploads_, [&](const auto& kv) { return kv.second.created + ttl <= now; });
}

uint64_t UploadStore::bytes_held() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& [id, e] : uploads_) n += e.bytes.size();
  return n;
}

}  // namespace stripesolve::daemon
