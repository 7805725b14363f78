#include "storage/object_writer.h"

#include <fcntl.h>

#include <map>

#include "base/logging.h"
#include "base/units.h"

namespace stripesolve::storage {

Status check_free_space(const StoreShared& store, const std::vector<uint64_t>& file_bytes) {
  struct Need {
    uint64_t bytes = 0;
    uint64_t available = 0;
    std::string path;
  };
  std::map<uint64_t, Need> by_device;
  for (size_t p = 0; p < file_bytes.size(); ++p) {
    STRIPESOLVE_ASSIGN_OR_RETURN(FreeSpace fs, free_space(store.config.paths[p]));
    Need& need = by_device[fs.device];
    need.bytes += file_bytes[p];
    need.available = fs.bytes;
    if (need.path.empty()) need.path = store.config.paths[p];
  }
  for (const auto& [device, need] : by_device) {
    if (need.bytes > need.available ||
        need.available - need.bytes < store.config.free_space_reserve) {
      return Status::no_space("not enough free space on the filesystem of " + need.path +
                              ": need " + format_bytes(need.bytes) + " plus a reserve of " +
                              format_bytes(store.config.free_space_reserve) + ", available " +
                              format_bytes(need.available));
    }
  }
  return Status::ok();
}

Status check_free_space_for(const StoreShared& store, const std::string& name,
                            const StripeGeometry& geometry, const PlacementParams& params) {
  if (params.path_count < 1 || params.path_count > static_cast<int>(store.config.paths.size())) {
    return Status::invalid_argument("an object on " + std::to_string(params.path_count) +
                                    " paths does not fit a store of " +
                                    std::to_string(store.config.paths.size()));
  }
  // Necessary condition, whatever the placement: every filesystem keeps its reserve.
  std::map<uint64_t, uint64_t> usable_by_device;
  for (int p = 0; p < params.path_count; ++p) {
    STRIPESOLVE_ASSIGN_OR_RETURN(FreeSpace fs, free_space(store.config.paths[p]));
    usable_by_device[fs.device] =
        fs.bytes > store.config.free_space_reserve ? fs.bytes - store.config.free_space_reserve : 0;
  }
  unsigned __int128 usable = 0;
  for (const auto& [device, bytes] : usable_by_device) usable += bytes;
  const unsigned __int128 data = static_cast<unsigned __int128>(kElementBytes) *
                                 static_cast<uint64_t>(geometry.n) *
                                 static_cast<uint64_t>(geometry.n);
  if (data > usable) {
    const auto bytes = [](unsigned __int128 b) {
      return format_bytes(b > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(b));
    };
    return Status::no_space(
        "not enough free space for '" + name + "' (order " + std::to_string(geometry.n) +
        "): it needs " + bytes(data) + ", the " + std::to_string(usable_by_device.size()) +
        " filesystem(s) of the store paths have " + bytes(usable) + " beyond the reserve of " +
        format_bytes(store.config.free_space_reserve) + " each");
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(std::vector<uint64_t> file_bytes,
                               placement_file_bytes(geometry, params));
  Status st = check_free_space(store, file_bytes);
  if (!st.is_ok())
    return Status(st.code(),
                  "'" + name + "' (order " + std::to_string(geometry.n) + "): " + st.message());
  return st;
}

Result<std::unique_ptr<ObjectWriter>> ObjectWriter::begin(
    const std::shared_ptr<StoreShared>& store, const std::string& name, const std::string& kind,
    const std::string& source, const StripeGeometry& geometry, const PlacementParams& params,
    DiskSpace space) {
  STRIPESOLVE_RETURN_IF_ERROR(kind == "matrix" ? check_matrix_name(name)
                                               : check_object_name(name, "object name"));
  if (params.path_count > static_cast<int>(store->config.paths.size())) {
    return Status::invalid_argument("object '" + name + "' needs " +
                                    std::to_string(params.path_count) + " paths, the store has " +
                                    std::to_string(store->config.paths.size()));
  }
  // Space first: the placement holds a record per segment, as many as the object is large.
  if (space == DiskSpace::kReserved) {
    STRIPESOLVE_RETURN_IF_ERROR(check_free_space_for(*store, name, geometry, params));
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(Placement placement, Placement::make(geometry, params));
  std::unique_ptr<ObjectWriter> w(new ObjectWriter(store, std::move(placement)));

  Status st = make_directory(store->object_dir(0, name), store->dir_mode());
  if (st.code() == StatusCode::kAlreadyExists) {
    return Status::already_exists("an object named '" + name + "' already exists");
  }
  STRIPESOLVE_RETURN_IF_ERROR(st);
  w->reserved_ = true;

  Manifest& m = w->manifest_;
  m.info.name = name;
  m.info.id = new_object_id();
  m.info.kind = kind;
  m.info.state = ObjectState::kIncomplete;
  m.info.geometry = geometry;
  m.info.placement = params;
  m.info.path_count = params.path_count;
  m.info.created = utc_now();
  m.info.source = source;
  m.store_id = store->store_id;
  m.file_bytes = w->placement_.file_bytes();
  for (uint64_t b : m.file_bytes) m.info.stored_bytes += b;
  m.checksums.assign(w->placement_.segment_count(), std::nullopt);
  STRIPESOLVE_RETURN_IF_ERROR(store->write_manifest(m));

  for (int p = 0; p < params.path_count; ++p) {
    if (p > 0)
      STRIPESOLVE_RETURN_IF_ERROR(make_directory(store->object_dir(p, name), store->dir_mode()));
    STRIPESOLVE_ASSIGN_OR_RETURN(
        DataFile f, open_data_file(store->data_path(p, name), O_RDWR | O_CREAT | O_EXCL,
                                   store->config.direct_io, nullptr, store->file_mode()));
    STRIPESOLVE_RETURN_IF_ERROR(space == DiskSpace::kReserved ? preallocate(f, m.file_bytes[p])
                                                              : set_size(f, m.file_bytes[p]));
    w->files_.push_back(std::move(f));
  }
  return w;
}

ObjectWriter::~ObjectWriter() {
  if (done_ || !reserved_) return;
  files_.clear();
  Status st = store_->remove_object_files(manifest_.info.name);
  if (!st.is_ok()) {
    logger("storage")->error("cannot remove unfinished object '{}': {}", manifest_.info.name,
                             st.to_string());
  }
}

Result<MatrixInfo> ObjectWriter::finish() {
  for (const DataFile& f : files_) STRIPESOLVE_RETURN_IF_ERROR(f.sync());
  Manifest m = manifest_;
  m.info.state = ObjectState::kComplete;
  m.info.checksum_summary = checksum_summary(m.checksums);
  STRIPESOLVE_RETURN_IF_ERROR(store_->write_manifest(m));
  done_ = true;
  logger("storage")->info("created {} '{}' (n={}, S={}, {} on {} paths)", m.info.kind, m.info.name,
                          m.info.geometry.n, m.info.geometry.stripe_rows,
                          format_bytes(m.info.stored_bytes), m.info.path_count);
  return m.info;
}

std::unique_ptr<StripedMatrix> ObjectWriter::into_factor() {
  done_ = true;
  return std::make_unique<StripedMatrix>(store_, manifest_, placement_, std::move(files_),
                                         StripedMatrix::Mode::kNewFactor);
}

}  // namespace stripesolve::storage
