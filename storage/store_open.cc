// MatrixStore::open (matrix_store.h): each path's marker checked or written (one store id
// across the paths, no folder named twice), the store's folders given its mode and group, the
// store locked against a second process, and what a crashed process left removed (a factor
// whose factorization can resume is kept).
#include <fcntl.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/logging.h"
#include "storage/data_file.h"
#include "storage/engine_select.h"
#include "storage/matrix_store.h"
#include "storage/store_shared.h"

namespace stripesolve::storage {
namespace {

constexpr const char* kMarker = "stripesolve-store.json";

std::string random_id() {
  std::random_device rd;
  const uint64_t v = (uint64_t{rd()} << 32) ^ rd();
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// A store folder (a path, or its objects/) gets the store's mode, and its group when one is
// configured (`gid`, else -1), before anything is created in it. This also closes stores made
// before files were private (0644 inside folders of 0755): their files cannot be reached by
// others any more.
Status restrict_folder(const StoreShared& store, const std::string& dir, gid_t gid) {
  if (gid != static_cast<gid_t>(-1) && ::chown(dir.c_str(), static_cast<uid_t>(-1), gid) != 0) {
    return Status::from_errno(errno, "chown :" + store.config.group + " " + dir);
  }
  if (::chmod(dir.c_str(), store.dir_mode()) != 0) return Status::from_errno(errno, "chmod " + dir);
  return Status::ok();
}

// Refuses a path list naming one directory twice (through links or mounts: parse_store_config
// catches the spellings), before any marker is read or written.
Status check_distinct_paths(const StoreConfig& config) {
  std::map<std::pair<dev_t, ino_t>, size_t> seen;
  for (size_t p = 0; p < config.paths.size(); ++p) {
    const std::string& dir = config.paths[p];
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::from_errno(ec.value(), "create store path " + dir);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) return Status::from_errno(errno, "stat store path " + dir);
    auto [it, fresh] = seen.emplace(std::make_pair(st.st_dev, st.st_ino), p);
    if (!fresh) {
      return Status::invalid_argument("store paths " + std::to_string(it->second) + " and " +
                                      std::to_string(p) + " ('" + config.paths[it->second] +
                                      "' and '" + dir +
                                      "') are the same directory; list each "
                                      "directory once in store.paths");
    }
  }
  return Status::ok();
}

// Checks or writes the marker of every path; returns the store id.
Result<std::string> check_markers(const StoreShared& store) {
  const StoreConfig& config = store.config;
  STRIPESOLVE_RETURN_IF_ERROR(check_distinct_paths(config));
  gid_t gid = static_cast<gid_t>(-1);
  if (!config.group.empty()) {
    group entry{};
    group* g = nullptr;
    std::vector<char> buffer(16 * 1024);
    int rc = 0;
    while ((rc = ::getgrnam_r(config.group.c_str(), &entry, buffer.data(), buffer.size(), &g)) ==
               ERANGE &&
           buffer.size() < (1u << 20)) {
      buffer.resize(buffer.size() * 2);
    }
    if (rc != 0 || g == nullptr) {
      return Status::not_found("store.group '" + config.group + "' does not exist");
    }
    gid = g->gr_gid;
  }
  std::string id;
  std::vector<int> fresh;
  for (size_t p = 0; p < config.paths.size(); ++p) {
    const std::string& dir = config.paths[p];
    STRIPESOLVE_RETURN_IF_ERROR(restrict_folder(store, dir, gid));
    const std::string marker = dir + "/" + kMarker;
    auto text = read_whole_file(marker, 1 << 16);
    if (!text.is_ok()) {
      if (text.status().code() != StatusCode::kNotFound) return text.status();
      if (!list_dir(dir).empty()) {
        return Status::failed_precondition("store path " + dir + " is not empty and has no " +
                                           kMarker + "; refusing to use it");
      }
      fresh.push_back(static_cast<int>(p));
      continue;
    }
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("store_id") ||
        !j.contains("path_index")) {
      return Status::corruption("store marker " + marker + " is damaged");
    }
    const auto this_id = j["store_id"].get<std::string>();
    const auto index = j["path_index"].get<int64_t>();
    if (!id.empty() && this_id != id) {
      return Status::failed_precondition(fmt::format(
          "store path {} belongs to store {}, the other paths to store {}", dir, this_id, id));
    }
    if (index != static_cast<int64_t>(p)) {
      return Status::failed_precondition("store path " + dir + " is path " + std::to_string(index) +
                                         " of its store but listed as " + std::to_string(p) +
                                         "; the order of paths matters");
    }
    id = this_id;
  }
  if (id.empty()) id = random_id();
  for (int p : fresh) {
    nlohmann::json j = {
        {"format", "stripesolve-store"}, {"version", 1}, {"store_id", id}, {"path_index", p}};
    STRIPESOLVE_RETURN_IF_ERROR(write_file_atomically(config.paths[p] + "/" + kMarker,
                                                      j.dump(1) + "\n", store.file_mode()));
  }
  for (const auto& dir : config.paths) {
    Status st = make_directory(dir + "/objects", store.dir_mode());
    if (!st.is_ok() && st.code() != StatusCode::kAlreadyExists) return st;
    STRIPESOLVE_RETURN_IF_ERROR(restrict_folder(store, dir + "/objects", gid));
  }
  return id;
}

// Removes objects that a crashed process left incomplete, and half-removed ones.
void clean_up(const StoreShared& store) {
  auto log = logger("storage");
  for (size_t p = 0; p < store.config.paths.size(); ++p) {
    const std::string objects = store.config.paths[p] + "/objects";
    for (const std::string& name : list_dir(objects)) {
      if (name.rfind(".removing-", 0) == 0) {
        (void)remove_tree(fmt::format("{}/{}", objects, name));
        continue;
      }
      if (!check_object_name(name, "object").is_ok()) continue;
      auto m = store.read_manifest(name);
      const bool orphan = !m.is_ok() && m.status().code() == StatusCode::kNotFound;
      const bool incomplete = m.is_ok() && m->info.state == ObjectState::kIncomplete;
      // A factorization a crash interrupted: kept for its job to resume (reopen_factor).
      const bool resumable =
          incomplete && m->info.kind == "factor" && file_exists(store.progress_path(name));
      if (resumable) {
        if (p != 0) continue;
        log->info("keeping factor '{}' for its interrupted factorization to resume", name);
        continue;
      }
      if (orphan || incomplete) {
        log->warn("removing {} object '{}' left by an earlier process",
                  incomplete ? "incomplete" : "orphaned", name);
        (void)store.remove_object_files(name);
      }
    }
  }
}

}  // namespace

Result<std::unique_ptr<MatrixStore>> MatrixStore::open(const StoreConfig& config) {
  return open(config, nullptr);
}

Result<std::unique_ptr<MatrixStore>> MatrixStore::open(const StoreConfig& config,
                                                       std::shared_ptr<IoEngine> engine) {
  if (config.paths.empty()) return Status::invalid_argument("the store needs at least one path");
  auto shared = std::make_shared<StoreShared>();
  shared->config = config;
  STRIPESOLVE_ASSIGN_OR_RETURN(shared->store_id, check_markers(*shared));
  const std::string lock = config.paths[0] + "/lock";
  shared->lock_fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, shared->file_mode());
  if (shared->lock_fd < 0) return Status::from_errno(errno, "open " + lock);
  if (::flock(shared->lock_fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return Status::failed_precondition("the store at " + config.paths[0] +
                                         " is in use by another process (" + lock + ")");
    }
    return Status::from_errno(errno, "lock " + lock);
  }
  if (engine) {
    shared->engine = std::move(engine);
  } else {
    STRIPESOLVE_ASSIGN_OR_RETURN(shared->engine, make_io_engine(config));
  }
  clean_up(*shared);
  logger("storage")->info("opened store {} with {} paths, {} engine", shared->store_id,
                          config.paths.size(), shared->engine->name());
  return std::unique_ptr<MatrixStore>(new MatrixStore(std::move(shared)));
}

}  // namespace stripesolve::storage
