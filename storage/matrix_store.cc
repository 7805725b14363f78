#include "storage/matrix_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/logging.h"
#include "storage/engine_select.h"
#include "storage/object_writer.h"
#include "storage/store_shared.h"
#include "storage/stripe_stream.h"
#include "storage/transpose.h"

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

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
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

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
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

MatrixStore::MatrixStore(std::shared_ptr<StoreShared> shared) : shared_(std::move(shared)) {}
MatrixStore::~MatrixStore() = default;

const StoreConfig& MatrixStore::config() const {
  return shared_->config;
}
std::string_view MatrixStore::engine_name() const {
  return shared_->engine->name();
}

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

PlacementParams MatrixStore::placement_params(int64_t n) const {
  const StoreConfig& c = shared_->config;
  PlacementParams p;
  p.path_count = static_cast<int>(c.paths.size());
  p.levels = c.round_robin_levels > 0 ? c.round_robin_levels
                                      : round_robin_levels(n, c.levels_cache, c.levels_q);
  p.segment_bytes = c.segment_bytes;
  p.min_segment_bytes = c.min_segment_bytes;
  return p;
}

Result<MatrixInfo> MatrixStore::create_generated(std::string_view name, int64_t n,
                                                 const GeneratorSpec& spec, int64_t stripe_rows) {
  STRIPESOLVE_RETURN_IF_ERROR(check_generator(spec));
  STRIPESOLVE_ASSIGN_OR_RETURN(
      StripeGeometry g,
      make_geometry(n, stripe_rows > 0 ? stripe_rows : shared_->config.stripe_rows));
  STRIPESOLVE_ASSIGN_OR_RETURN(
      auto writer,
      ObjectWriter::begin(shared_, std::string(name), "matrix",
                          "generator " + spec.name + " seed " + std::to_string(spec.seed), g,
                          placement_params(n)));
  STRIPESOLVE_ASSIGN_OR_RETURN(AlignedBuffer buffer,
                               AlignedBuffer::allocate(shared_->config.import_buffer));
  StripeStream stream{&writer->placement(), writer->files(), shared_->engine.get(), &buffer};
  const auto produce = [&](int64_t I, int64_t e0, int64_t count, double* out) {
    parallel_for(count, 64 * 1024, [&](int64_t b, int64_t e) {
      fill_generated(spec, n, g.row_begin(I), g.rows(I), e0 + b, e - b, out + b);
    });
    return Status::ok();
  };
  STRIPESOLVE_RETURN_IF_ERROR(write_stripes(stream, produce, writer->manifest().checksums));
  return writer->finish();
}

Result<std::vector<MatrixInfo>> MatrixStore::list() const {
  std::vector<MatrixInfo> out;
  for (const std::string& name : list_dir(shared_->config.paths[0] + "/objects")) {
    if (!check_object_name(name, "object").is_ok()) continue;
    auto m = shared_->read_manifest(name);
    if (!m.is_ok()) {
      if (m.status().code() == StatusCode::kNotFound) continue;  // being created or removed
      // Listed rather than hidden: it holds space, and its name can neither be used nor freed
      // unless its owner sees it (issue 15).
      logger("storage")->warn("object '{}' is unreadable: {}", name, m.status().to_string());
      MatrixInfo corrupt;
      corrupt.name = name;
      corrupt.kind = "unknown";
      corrupt.state = ObjectState::kCorrupt;
      corrupt.problem = m.status().message();
      out.push_back(std::move(corrupt));
      continue;
    }
    if (m->info.state != ObjectState::kIncomplete) out.push_back(m->info);
  }
  return out;
}

Result<MatrixInfo> MatrixStore::info(std::string_view name) const {
  const std::string n(name);
  STRIPESOLVE_RETURN_IF_ERROR(check_object_name(n, "object name"));
  STRIPESOLVE_ASSIGN_OR_RETURN(Manifest m, shared_->read_manifest(n));
  if (m.info.state == ObjectState::kIncomplete) {
    return Status::not_found("no object named '" + n + "' in the store");
  }
  return m.info;
}

Status MatrixStore::remove(std::string_view name) {
  const std::string n(name);
  STRIPESOLVE_RETURN_IF_ERROR(check_object_name(n, "object name"));
  auto i = info(n);
  // A corrupt manifest must not make its object impossible to remove (issue 15).
  const bool corrupt = !i.is_ok() && i.status().code() == StatusCode::kCorruption;
  if (!i.is_ok() && !corrupt) return i.status();
  MutexLock lock(shared_->mu);
  if (shared_->open_count.count(n) != 0) {
    return Status::failed_precondition("object '" + n + "' is open and cannot be removed");
  }
  STRIPESOLVE_RETURN_IF_ERROR(shared_->remove_object_files(n));
  if (corrupt) {
    logger("storage")->warn("removed corrupt object '{}' ({})", n, i.status().message());
  } else {
    logger("storage")->info("removed {} '{}'", i->kind, n);
  }
  return Status::ok();
}

Result<std::vector<std::string>> MatrixStore::factors_of(std::string_view name) const {
  STRIPESOLVE_ASSIGN_OR_RETURN(MatrixInfo matrix, info(name));
  std::vector<std::string> out;
  if (matrix.kind != "matrix") return out;
  STRIPESOLVE_ASSIGN_OR_RETURN(std::vector<MatrixInfo> all, list());
  const std::string legacy_prefix = matrix.name + ".lu.";
  for (const MatrixInfo& i : all) {
    const bool derived = i.kind == "factor" || i.kind == "transpose";
    if (!derived || i.state != ObjectState::kComplete || i.name == matrix.name) continue;
    const bool by_id = i.factor_of && !matrix.id.empty() && i.factor_of->matrix_id == matrix.id;
    const bool legacy = !i.factor_of && i.name.rfind(legacy_prefix, 0) == 0 &&
                        i.source == "factor of " + matrix.name;
    if (by_id || legacy) out.push_back(i.name);
  }
  return out;
}

Result<std::vector<std::string>> MatrixStore::remove_with_factors(std::string_view name) {
  std::vector<std::string> factors;
  auto found = factors_of(name);
  if (found.is_ok()) {
    factors = std::move(found).value();
  } else if (found.status().code() != StatusCode::kCorruption) {
    return found.status();
  }
  STRIPESOLVE_RETURN_IF_ERROR(remove(name));
  std::vector<std::string> removed;
  for (const std::string& f : factors) {
    Status st = remove(f);
    if (st.is_ok()) {
      removed.push_back(f);
    } else if (st.code() != StatusCode::kNotFound) {  // removed meanwhile: fine
      // fmt, not "'" + std::string(name): GCC 12 at -O3 warns falsely (-Wrestrict) on that.
      return st.with_context(fmt::format("'{}' was removed, its factor '{}' not", name, f));
    }
  }
  return removed;
}

ObjectNameLock::ObjectNameLock(ObjectNameLock&& other) noexcept
    : store_(std::move(other.store_)), name_(std::move(other.name_)) {
  other.store_.reset();
}

ObjectNameLock& ObjectNameLock::operator=(ObjectNameLock&& other) noexcept {
  if (this != &other) {
    release();
    store_ = std::move(other.store_);
    name_ = std::move(other.name_);
    other.store_.reset();
  }
  return *this;
}

void ObjectNameLock::release() {
  if (!store_) return;
  {
    MutexLock lock(store_->mu);
    store_->locked_names.erase(name_);
  }
  store_->name_unlocked.notify_all();
  store_.reset();
}

Result<ObjectNameLock> MatrixStore::lock_name(std::string_view name,
                                              const std::function<bool()>& cancelled) {
  const std::string n(name);
  MutexLock lock(shared_->mu);
  while (shared_->locked_names.count(n) != 0) {
    // Polled: the canceller has no handle on this condition variable.
    shared_->name_unlocked.wait_for(lock, std::chrono::milliseconds(50));
    if (cancelled && cancelled()) {
      return Status::cancelled("cancelled while waiting for another job's work on '" + n + "'");
    }
  }
  shared_->locked_names.insert(n);
  return ObjectNameLock(shared_, n);
}

Result<std::unique_ptr<StripedMatrix>> MatrixStore::open_object(const std::string& name,
                                                                StripedMatrix::Mode mode,
                                                                bool resuming) const {
  STRIPESOLVE_RETURN_IF_ERROR(check_object_name(name, "object name"));
  STRIPESOLVE_ASSIGN_OR_RETURN(Manifest m, shared_->read_manifest(name));
  if (resuming != (m.info.state == ObjectState::kIncomplete) ||
      (resuming && (m.info.kind != "factor" || !file_exists(shared_->progress_path(name))))) {
    return Status::not_found("no object named '" + name + "' in the store");
  }
  if (m.info.state == ObjectState::kBeingFactored) {
    return Status::failed_precondition("matrix '" + name +
                                       "' is being factored in place (or its factorization "
                                       "failed); its data is not usable");
  }
  if (m.info.path_count > static_cast<int>(shared_->config.paths.size())) {
    return Status::failed_precondition(
        "object '" + name + "' lies on " + std::to_string(m.info.path_count) +
        " paths; the store is configured with " + std::to_string(shared_->config.paths.size()));
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(Placement placement,
                               Placement::make(m.info.geometry, m.info.placement));
  std::vector<DataFile> files;
  const int flags = mode == StripedMatrix::Mode::kReadOnly ? O_RDONLY : O_RDWR;
  for (int p = 0; p < m.info.path_count; ++p) {
    STRIPESOLVE_ASSIGN_OR_RETURN(
        DataFile f, open_data_file(shared_->data_path(p, name), flags, shared_->config.direct_io,
                                   nullptr, shared_->file_mode()));
    struct stat st {};
    if (::fstat(f.fd(), &st) != 0) return Status::from_errno(errno, "stat " + f.path());
    if (static_cast<uint64_t>(st.st_size) < m.file_bytes[p]) {
      return Status::corruption("data file " + f.path() + " has " + std::to_string(st.st_size) +
                                " bytes, its manifest expects " + std::to_string(m.file_bytes[p]));
    }
    files.push_back(std::move(f));
  }
  return std::make_unique<StripedMatrix>(shared_, std::move(m), std::move(placement),
                                         std::move(files), mode);
}

Result<std::unique_ptr<StripedMatrix>> MatrixStore::open_matrix(std::string_view name) const {
  return open_object(std::string(name), StripedMatrix::Mode::kReadOnly);
}

Result<std::unique_ptr<StripedMatrix>> MatrixStore::open_factor(std::string_view name) const {
  STRIPESOLVE_ASSIGN_OR_RETURN(auto m,
                               open_object(std::string(name), StripedMatrix::Mode::kReadOnly));
  if (m->info().kind != "factor") {
    return Status::invalid_argument("object '" + std::string(name) + "' is a " + m->info().kind +
                                    ", not a factor");
  }
  return m;
}

Result<std::unique_ptr<StripedMatrix>> MatrixStore::create_factor(std::string_view name,
                                                                  const StripedMatrix& like,
                                                                  DiskSpace space) {
  STRIPESOLVE_ASSIGN_OR_RETURN(
      auto writer,
      ObjectWriter::begin(shared_, std::string(name), "factor", "factor of " + like.info().name,
                          like.geometry(), like.info().placement, space));
  // Published with the factor at commit(): what it factors, for reuse checks (is_factor_of).
  writer->manifest().info.factor_of =
      FactorOf{like.info().id, like.geometry().n, checksum_summary(like.checksums())};
  return writer->into_factor();
}

Result<std::unique_ptr<StripedMatrix>> MatrixStore::reopen_factor(std::string_view name,
                                                                  const StripedMatrix& like) {
  STRIPESOLVE_ASSIGN_OR_RETURN(
      auto m, open_object(std::string(name), StripedMatrix::Mode::kNewFactor, true));
  // As create_factor(): what it factors, published at commit().
  m->set_factor_of(FactorOf{like.info().id, like.geometry().n, checksum_summary(like.checksums())});
  return m;
}

Result<std::vector<std::string>> MatrixStore::resumable_factors() const {
  std::vector<std::string> out;
  for (const std::string& name : list_dir(shared_->config.paths[0] + "/objects")) {
    if (!check_object_name(name, "object").is_ok()) continue;
    auto m = shared_->read_manifest(name);
    if (m.is_ok() && m->info.state == ObjectState::kIncomplete && m->info.kind == "factor" &&
        file_exists(shared_->progress_path(name))) {
      out.push_back(name);
    }
  }
  return out;
}

Status MatrixStore::remove_resumable(std::string_view name) {
  const std::string n(name);
  {
    MutexLock lock(shared_->mu);
    if (shared_->open_count.count(n) != 0) {
      return Status::failed_precondition("factor '" + n + "' is open");
    }
  }
  return shared_->remove_object_files(n);
}

Result<std::unique_ptr<StripedMatrix>> MatrixStore::open_for_in_place(std::string_view name) {
  const std::string n(name);
  {
    MutexLock lock(shared_->mu);
    if (shared_->open_count.count(n) != 0) {
      return Status::failed_precondition("matrix '" + n +
                                         "' is open; close it before factoring "
                                         "it in place");
    }
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(auto m, open_object(n, StripedMatrix::Mode::kInPlace));
  if (m->info().kind != "matrix") {
    return Status::invalid_argument("object '" + n + "' is a " + m->info().kind + ", not a matrix");
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(Manifest manifest, shared_->read_manifest(n));
  manifest.info.state = ObjectState::kBeingFactored;
  STRIPESOLVE_RETURN_IF_ERROR(shared_->write_manifest(manifest));
  return m;
}

}  // namespace stripesolve::storage
