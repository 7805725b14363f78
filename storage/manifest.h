// The manifest of a stored object (matrix or factor): geometry, dtype, placement, per-segment
// CRC32C, blobs, creation info and state, as one JSON document (docs/storage-format.md). It carries
// a CRC32C of its own canonical text, so a damaged manifest is detected even when it still parses.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "storage/geometry.h"
#include "storage/placement.h"

namespace stripesolve::storage {

// Life of an object. Only kComplete objects are listed and opened; kIncomplete ones are being
// created (removed if their creator fails or dies); kBeingFactored marks a matrix opened for an
// in-place factorization, whose data is neither A nor its factors until commit. kCorrupt is never
// written: list() reports an object whose manifest cannot be read with it, so that it can be
// seen and removed.
enum class ObjectState { kIncomplete, kComplete, kBeingFactored, kCorrupt };
std::string_view object_state_name(ObjectState state);

struct BlobEntry {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
  friend bool operator==(const BlobEntry&, const BlobEntry&) = default;
};

// Object names: 1-128 characters of [A-Za-z0-9_.-], not starting with '.' or '-'.
inline constexpr size_t kMaxObjectNameLength = 128;
// Names of new matrices leave this many characters for the names derived from them (factors
// "NAME.lu.<pivot>", scheduler/dense_solve.h), so that a matrix that can be created can be solved.
inline constexpr size_t kDerivedNameReserve = 9;
inline constexpr size_t kMaxMatrixNameLength = kMaxObjectNameLength - kDerivedNameReserve;

// What a factor factors (issue 15): reuse requires all three to match the matrix.
struct FactorOf {
  std::string matrix_id;          // MatrixInfo::id of the matrix
  int64_t n = 0;                  // its order
  uint32_t checksum_summary = 0;  // its MatrixInfo::checksum_summary when factored
  friend bool operator==(const FactorOf&, const FactorOf&) = default;
};

// What list()/info() report about an object.
struct MatrixInfo {
  std::string name;
  // Unique id made at creation (32 hex digits, 128 random bits): a matrix removed and created
  // again under its name is another object. Empty for objects made before ids existed.
  std::string id;
  StripeGeometry geometry;
  std::string kind;  // "matrix" | "factor" | "transpose" (MatrixStore::create_transpose)
  ObjectState state = ObjectState::kIncomplete;
  std::string dtype = "float64";
  uint64_t stored_bytes = 0;  // sum of the data files
  int path_count = 0;
  PlacementParams placement;
  std::string created;  // UTC time, ISO 8601
  std::string source;   // "generator uniform seed 7", "npy /data/a.npy", "factor of A"
  // checksum_summary() of the segment checksums: derived on read, not stored.
  uint32_t checksum_summary = 0;
  // Factors (and matrices factored in place): what they factor; transposes: what they transpose.
  std::optional<FactorOf> factor_of;
  std::string problem;  // kCorrupt: why the manifest cannot be read
};

struct Manifest {
  MatrixInfo info;
  std::string store_id;
  std::vector<uint64_t> file_bytes;                // per path
  std::vector<std::optional<uint32_t>> checksums;  // per segment; nullopt = not known yet
  std::map<std::string, BlobEntry> blobs;
};

std::string manifest_to_json(const Manifest& manifest);
// Parses and validates (format, version, self-checksum, field types, geometry, checksum count
// against the placement). Errors are kCorruption naming `where`.
Result<Manifest> manifest_from_json(std::string_view text, const std::string& where);

// Current UTC time as "2026-11-22T05:01:02Z".
std::string utc_now();

// A new object id: 32 lowercase hex digits from std::random_device.
std::string new_object_id();
// CRC32C over the segment checksums in order, each as a little-endian u32 (an unknown one as 0).
uint32_t checksum_summary(const std::vector<std::optional<uint32_t>>& checksums);
// True when `factor` records `matrix` as what it factors: same id (never empty), order and
// checksum summary.
bool is_factor_of(const MatrixInfo& factor, const MatrixInfo& matrix);

}  // namespace stripesolve::storage
