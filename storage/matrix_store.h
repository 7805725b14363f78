// The matrix store: named matrices and factors kept as row stripes over the configured paths
// (002 §7, ARCHITECTURE.md §4; on-disk format in docs/storage-format.md).
//
// Guarantees:
// - An object becomes visible (list, info, open_*) only when its data is complete and synced and
//   its manifest says "complete"; any failure while creating, importing or factoring removes what
//   was written. Objects left "incomplete" by a crash are removed when the store is next opened,
//   except factors with a progress log (a factorization to resume: reopen_factor()).
// - Manifests are replaced atomically (temporary file, fsync, rename, fsync of the directory).
// - Before creating or importing, the free space of every filesystem involved is checked
//   (all paths on one filesystem are counted together), keeping free_space_reserve free.
// - A store is used by one process at a time (flock on <paths[0]>/lock); open() fails otherwise.
// - Paths are identified by a marker file (stripesolve-store.json), so a reordered or foreign path
//   list is refused instead of misreading data.
//
// Thread-safety: all methods may be called concurrently. StripedMatrix objects may outlive the
// MatrixStore that opened them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "storage/data_file.h"
#include "storage/generators.h"
#include "storage/io_engine.h"
#include "storage/manifest.h"
#include "storage/placement.h"
#include "storage/store_config.h"
#include "storage/striped_matrix.h"

namespace stripesolve::storage {

struct StoreShared;

struct ImportOptions {
  int64_t stripe_rows = 0;  // 0 = stripe_rows_for(n) if set, else config.stripe_rows
  // Chooses S once the order n is known from the file's header (the daemon's planner).
  std::function<int64_t(int64_t n)> stripe_rows_for;
  bool check_finite = true;  // refuse NaN and infinite values
  // Large reads of the file through a second, O_DIRECT descriptor (reopened through
  // /proc/self/fd) where allowed; false reads everything through the page cache.
  bool direct_reads = true;
};

struct DenseLayout;

// Holds one object name of a store for its owner (MatrixStore::lock_name); released on
// destruction or release(). Movable; an empty lock holds nothing.
class ObjectNameLock {
 public:
  ObjectNameLock() = default;
  ObjectNameLock(ObjectNameLock&& other) noexcept;
  ObjectNameLock& operator=(ObjectNameLock&& other) noexcept;
  ~ObjectNameLock() { release(); }
  void release();

 private:
  friend class MatrixStore;
  ObjectNameLock(std::shared_ptr<StoreShared> store, std::string name)
      : store_(std::move(store)), name_(std::move(name)) {}
  std::shared_ptr<StoreShared> store_;
  std::string name_;
};

class MatrixStore {
 public:
  // Opens (creating where needed) the store over config.paths; selects the I/O engine.
  static Result<std::unique_ptr<MatrixStore>> open(const StoreConfig& config);
  // The same with a given engine instead of config.io_engine (fault injection, benchmarks).
  static Result<std::unique_ptr<MatrixStore>> open(const StoreConfig& config,
                                                   std::shared_ptr<IoEngine> engine);
  ~MatrixStore();

  const StoreConfig& config() const;
  std::string_view engine_name() const;

  // The source (MatrixInfo::source) of a matrix create_generated() makes from `spec`, and of
  // one import_npy() reads from the file named `label`.
  static std::string generated_source(const GeneratorSpec& spec);
  static std::string npy_source(const std::string& label);

  // A matrix of order n whose element (r, c) is generated_value(spec, n, r, c).
  // stripe_rows 0 = config.stripe_rows.
  Result<MatrixInfo> create_generated(std::string_view name, int64_t n, const GeneratorSpec& spec,
                                      int64_t stripe_rows = 0);

  // Imports a square float64/float32 (widened) .npy file, v1-v3, C or Fortran order, streaming
  // through config.import_buffer (C order: the buffer and a block of one window of the file's
  // rows; Fortran order: half the buffer and a block of a quarter of it of whole columns; large
  // reads bypass the page cache through an O_DIRECT reopen of the file). Bad header, dtype, shape,
  // size or (when checked) a non-finite value is kInvalidArgument naming the file (and row/column);
  // nothing is left in the store.
  Result<MatrixInfo> import_npy(std::string_view name, const std::string& path,
                                const ImportOptions& options = {});
  // The same from an open file (the daemon's imports: a descriptor the client passed, never a
  // path it named). `label` names the file in errors and in the object's source.
  Result<MatrixInfo> import_npy(std::string_view name, int fd, const std::string& label,
                                const ImportOptions& options = {});
  // Imports raw binary data described by a JSON sidecar:
  //   {"n": 1000, "dtype": "float64" | "float32", "order": "C" | "F",
  //    "endian": "little" | "big", "offset": 0}   (order, endian, offset optional)
  Result<MatrixInfo> import_raw(std::string_view name, const std::string& data_path,
                                const std::string& sidecar_path, const ImportOptions& options = {});
  // Writes object `name` as a C-order float64 .npy file (v1 header), streaming; the file appears
  // under `path` only when complete (written as a new temporary created with O_EXCL, synced,
  // renamed).
  Status export_npy(std::string_view name, const std::string& path);
  // The same into an open file, which is sized to the array and written from offset 0 (the
  // daemon's exports: a temporary the client created and renames once the job COMPLETED).
  // `label` names the file in errors.
  Status export_npy(std::string_view name, int fd, const std::string& label);

  // Complete and being_factored objects, by name, and objects whose manifest cannot be read
  // (state kCorrupt, kind "unknown", `problem` says why) so that they can be seen and removed.
  Result<std::vector<MatrixInfo>> list() const;
  Result<MatrixInfo> info(std::string_view name) const;
  // Fails with kFailedPrecondition while the object is open. An object whose manifest is corrupt
  // is removed too (nothing of it can be used).
  Status remove(std::string_view name);
  // The complete objects derived from matrix `name`: factors and transposes recording its id
  // (MatrixInfo::factor_of), and factors made before ids existed that are named NAME.lu.* with
  // source "factor of NAME".
  Result<std::vector<std::string>> factors_of(std::string_view name) const;
  // remove(name), then, for a matrix, its derived objects (factors_of, found before the matrix
  // goes); returns those removed. The matrix is removed first so that an open matrix (a solve
  // running) leaves everything in place.
  Result<std::vector<std::string>> remove_with_factors(std::string_view name);

  // Waits until no other holder in this process has `name` locked, then locks it. `cancelled`
  // (may be empty) is polled while waiting: kCancelled when it returns true. Serializes those who
  // may create the same object, so that concurrent first solves of one matrix make one factor,
  // the later ones waiting and then reusing it (issue 15).
  Result<ObjectNameLock> lock_name(std::string_view name, const std::function<bool()>& cancelled);

  // Read-only views of complete objects (matrix or factor); open_factor requires kind "factor".
  Result<std::unique_ptr<StripedMatrix>> open_matrix(std::string_view name) const;
  Result<std::unique_ptr<StripedMatrix>> open_factor(std::string_view name) const;
  // A new writable factor object with the geometry and placement of `like`, state "incomplete"
  // (invisible until commit(); deleted if destroyed uncommitted). Its data starts as zeros. It
  // records `like`'s id, order and checksum summary (MatrixInfo::factor_of, is_factor_of()).
  // `space`: kReserved checks the filesystems for its 8 n^2 bytes (kNoSpace naming them) and
  // allocates every block, so that a factorization never meets a full disk midway; kSparse
  // only sizes its files, for a factor that is not expected to be written (a solve that keeps
  // its factors in RAM and does not store them): blocks are taken if and when written, and
  // such a write fails with kNoSpace when the disk is full.
  Result<std::unique_ptr<StripedMatrix>> create_factor(std::string_view name,
                                                       const StripedMatrix& like,
                                                       DiskSpace space = DiskSpace::kReserved);
  // Makes object `name` of kind "transpose": A^T of the complete object `a`, in a's geometry and
  // placement, recording `a` (id, order, checksum summary) as what it derives from
  // (MatrixInfo::factor_of, is_factor_of()), so that it is one of a's derived objects
  // (factors_of) and goes with it. Out of core within about `memory_budget` bytes
  // (transpose_object.h), a group of output stripes at a time, each filled by reading its
  // columns of every stripe of A. Invisible until complete; a failure or `cancelled` (may be
  // empty; polled between windows, kCancelled) leaves nothing. About 8 n^2 bytes read and 8 n^2
  // written, no flops.
  Result<MatrixInfo> create_transpose(std::string_view name, const StripedMatrix& a,
                                      uint64_t memory_budget,
                                      const std::function<bool()>& cancelled = {});
  // Reopens the incomplete factor `name` whose factorization a crash interrupted: one that has a
  // progress log (StripedMatrix::progress_path). Writable as create_factor()'s (deleted if
  // destroyed uncommitted), recording `like` as what it factors. kNotFound when there is no
  // such object.
  Result<std::unique_ptr<StripedMatrix>> reopen_factor(std::string_view name,
                                                       const StripedMatrix& like);
  // The incomplete factors kept for their factorization to resume (reopen_factor), by name.
  Result<std::vector<std::string>> resumable_factors() const;
  // Removes one of them (no solve will resume it). Fails while it is open.
  Status remove_resumable(std::string_view name);
  // Opens matrix `name` writable for an in-place factorization: its manifest says
  // "being_factored" until commit() turns it into a factor. Fails while it is open elsewhere.
  Result<std::unique_ptr<StripedMatrix>> open_for_in_place(std::string_view name);

  // The placement parameters create/import use for a matrix of order n (config + 002 Eq 20).
  PlacementParams placement_params(int64_t n) const;

 private:
  friend class ObjectWriter;
  explicit MatrixStore(std::shared_ptr<StoreShared> shared);
  // `resuming`: the object must be an incomplete factor (reopen_factor), not a visible one.
  Result<std::unique_ptr<StripedMatrix>> open_object(const std::string& name,
                                                     StripedMatrix::Mode mode,
                                                     bool resuming = false) const;
  Result<MatrixInfo> import_dense(const std::string& name, int fd, const std::string& path,
                                  const DenseLayout& layout, const std::string& source,
                                  const ImportOptions& options);

  std::shared_ptr<StoreShared> shared_;
};

}  // namespace stripesolve::storage
