#include "storage/store_shared.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

#include "base/units.h"
#include "storage/data_file.h"

namespace stripesolve::storage {

StoreShared::~StoreShared() {
  if (lock_fd >= 0) ::close(lock_fd);
}

Status StoreShared::write_manifest(const Manifest& manifest) const {
  return write_file_atomically(manifest_path(manifest.info.name), manifest_to_json(manifest),
                               file_mode());
}

Result<Manifest> StoreShared::read_manifest(const std::string& name) const {
  const std::string path = manifest_path(name);
  auto text = read_whole_file(path, 256 * kMiB);
  if (!text.is_ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return Status::not_found("no object named '" + name + "' in the store");
    }
    return text.status();
  }
  auto m = manifest_from_json(*text, path);
  if (m.is_ok() && m->info.name != name) {
    return Status::corruption("manifest " + path + ": names object '" + m->info.name + "'");
  }
  if (m.is_ok() && m->store_id != store_id) {
    return Status::corruption("manifest " + path + ": belongs to store " + m->store_id + ", not " +
                              store_id);
  }
  return m;
}

Status StoreShared::remove_object_files(const std::string& name) const {
  // Hide the object first (atomic rename of the directory holding the manifest), then delete.
  static std::atomic<uint64_t> counter{0};
  const std::string hidden = config.paths[0] + "/objects/.removing-" + name + "-" +
                             std::to_string(::getpid()) + "-" + std::to_string(counter++);
  Status first;
  if (std::rename(object_dir(0, name).c_str(), hidden.c_str()) != 0 && errno != ENOENT) {
    first = Status::from_errno(errno, "rename " + object_dir(0, name) + " to " + hidden);
  }
  for (size_t p = 1; p < config.paths.size(); ++p) {
    Status st = remove_tree(object_dir(static_cast<int>(p), name));
    if (first.is_ok() && !st.is_ok()) first = st;
  }
  Status st = remove_tree(first.is_ok() ? hidden : object_dir(0, name));
  return first.is_ok() ? st : first;
}

Status check_object_name(const std::string& name, const char* what) {
  const auto bad = [&](const std::string& why) {
    return Status::invalid_argument(std::string(what) + " '" + name + "' " + why);
  };
  if (name.empty() || name.size() > kMaxObjectNameLength) {
    return bad("must have 1 to " + std::to_string(kMaxObjectNameLength) + " characters");
  }
  if (name[0] == '.' || name[0] == '-') return bad("must not start with '.' or '-'");
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return bad("may only contain letters, digits, '_', '.' and '-'");
  }
  return Status::ok();
}

Status check_matrix_name(const std::string& name) {
  STRIPESOLVE_RETURN_IF_ERROR(check_object_name(name, "object name"));
  if (name.size() > kMaxMatrixNameLength) {
    return Status::invalid_argument(
        "matrix name '" + name + "' has " + std::to_string(name.size()) +
        " characters; matrix names " + "have at most " + std::to_string(kMaxMatrixNameLength) +
        ", so that the names of their " + "factors (NAME.lu.<pivot>) fit in " +
        std::to_string(kMaxObjectNameLength));
  }
  return Status::ok();
}

}  // namespace stripesolve::storage
