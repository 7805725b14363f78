#include "storage/matrix_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/logging.h"
#include "storage/data_file.h"
#include "storage/engine_select.h"
#include "storage/object_writer.h"
#include "storage/store_shared.h"
#include "storage/stripe_stream.h"
#include "storage/transpose.h"

namespace stripesolve::storage {

MatrixStore::MatrixStore(std::shared_ptr<StoreShared> shared) : shared_(std::move(shared)) {}
MatrixStore::~MatrixStore() = default;

const StoreConfig& MatrixStore::config() const {
  return shared_->config;
}
std::string_view MatrixStore::engine_name() const {
  return shared_->engine->name();
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

std::string MatrixStore::generated_source(const GeneratorSpec& spec) {
  return "generator " + spec.name + " seed " + std::to_string(spec.seed);
}

std::string MatrixStore::npy_source(const std::string& label) {
  return "npy " + label;
}

Result<MatrixInfo> MatrixStore::create_generated(std::string_view name, int64_t n,
                                                 const GeneratorSpec& spec, int64_t stripe_rows) {
  STRIPESOLVE_RETURN_IF_ERROR(check_generator(spec));
  STRIPESOLVE_ASSIGN_OR_RETURN(
      StripeGeometry g,
      make_geometry(n, stripe_rows > 0 ? stripe_rows : shared_->config.stripe_rows));
  STRIPESOLVE_ASSIGN_OR_RETURN(
      auto writer, ObjectWriter::begin(shared_, std::string(name), "matrix", generated_source(spec),
                                       g, placement_params(n)));
  STRIPESOLVE_ASSIGN_OR_RETURN(AlignedBuffer buffer,
                               AlignedBuffer::allocate(stream_buffer_bytes(
                                   writer->placement(), shared_->config.import_buffer)));
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
