// Creating an object on disk (internal to storage/): reserve the name, make its directories and
// preallocated data files, and publish an "incomplete" manifest; finish() syncs the data and
// publishes "complete". Destroying an unfinished writer removes everything it made, so a failed
// create or import leaves nothing behind.
//
// Thread-safety: one thread uses a writer. Name reservation is an atomic mkdir.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "storage/data_file.h"
#include "storage/manifest.h"
#include "storage/placement.h"
#include "storage/store_shared.h"
#include "storage/striped_matrix.h"

namespace stripesolve::storage {

// kNoSpace unless every filesystem holding a path has room for its files plus the reserve.
Status check_free_space(const StoreShared& store, const std::vector<uint64_t>& file_bytes);
// The same for object `name` of `geometry` placed by `params` (the messages name it: a solve's
// factors are an object of their own, `<matrix>.lu.<pivot>`), checked before anything in
// proportion to it is allocated (issue 15): first 8 n^2 bytes against the space of all the
// filesystems together (O(P)), then each filesystem's share (O(N P), placement_file_bytes()).
Status check_free_space_for(const StoreShared& store, const std::string& name,
                            const StripeGeometry& geometry, const PlacementParams& params);

class ObjectWriter {
 public:
  static Result<std::unique_ptr<ObjectWriter>> begin(
      const std::shared_ptr<StoreShared>& store, const std::string& name, const std::string& kind,
      const std::string& source, const StripeGeometry& geometry, const PlacementParams& params,
      DiskSpace space = DiskSpace::kReserved);
  ~ObjectWriter();

  const Placement& placement() const { return placement_; }
  const std::vector<DataFile>& files() const { return files_; }
  Manifest& manifest() { return manifest_; }

  // Syncs the data files and publishes the manifest as "complete".
  Result<MatrixInfo> finish();
  // Hands the object to a writable StripedMatrix (kNewFactor), which owns its fate from now on.
  std::unique_ptr<StripedMatrix> into_factor();

 private:
  ObjectWriter(std::shared_ptr<StoreShared> store, Placement placement)
      : store_(std::move(store)), placement_(std::move(placement)) {}

  std::shared_ptr<StoreShared> store_;
  Placement placement_;
  std::vector<DataFile> files_;
  Manifest manifest_;
  bool reserved_ = false;  // the directory on path 0 is ours: remove on failure
  bool done_ = false;
};

}  // namespace stripesolve::storage
