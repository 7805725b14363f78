// Placement of stripe segments over the store paths (002 §7.3, Fig 16, Eqs 19-20): pure, no I/O.
//
// Each stripe's byte run (geometry.h), padded to a multiple of 4 KiB, is cut into segments of one
// length per stripe (a multiple of 4 KiB; the last segment may be shorter, still 4 KiB aligned).
// Segment k of stripe I goes to path (I + k) mod P: round-robin as in Fig 16, with the first path
// rotated per stripe so that the shorter tail segments spread evenly over the paths. On path p the
// segments are concatenated in (stripe, k) order in one data file, so every file offset and length
// is a multiple of 4 KiB and O_DIRECT can be used throughout.
//
// The segment length of stripe I is max(min_segment_bytes, ceil(stored_I / (levels * P))) rounded
// up to 4 KiB, unless segment_bytes fixes it: with `levels` round-robin levels each path holds
// `levels` segments of every stripe large enough (002 §7.3 keeps 8 levels fixed).
//
// Thread-safety: an immutable value after make(); share freely.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "storage/geometry.h"

namespace stripesolve::storage {

inline constexpr uint64_t kAlignment = 4096;  // O_DIRECT offset, length and buffer alignment

inline constexpr uint64_t align_up(uint64_t x) {
  return (x + kAlignment - 1) / kAlignment * kAlignment;
}
inline constexpr uint64_t align_down(uint64_t x) {
  return x / kAlignment * kAlignment;
}

struct PlacementParams {
  int path_count = 1;          // P
  int64_t levels = 8;          // round-robin levels (002 §7.3); used if segment_bytes == 0
  uint64_t segment_bytes = 0;  // fixed segment length (multiple of 4 KiB), 0 = use levels
  uint64_t min_segment_bytes = 1 << 20;  // keeps transfers coarse (002 §9.7 after Eq 19)

  friend bool operator==(const PlacementParams&, const PlacementParams&) = default;
};

// Placement::make(geometry, params).file_bytes() without making the segments: O(N P) time, O(P)
// memory, for checks that must come before anything in proportion to the object is allocated.
Result<std::vector<uint64_t>> placement_file_bytes(const StripeGeometry& geometry,
                                                   const PlacementParams& params);

// 002 Eq 20: levels = Q * n / sqrt(NV_LPC), NV_LPC = RAM cache size in float64 values; at least 1
// (and at least Eq 19's bound n / sqrt(NV_LPC) since Q >= 1).
int64_t round_robin_levels(int64_t n, uint64_t cache_bytes, double q);

struct Segment {
  int path = 0;                // index into the store paths
  uint64_t file_offset = 0;    // in that path's data file
  uint64_t stripe_offset = 0;  // in the stripe's byte run
  uint64_t length = 0;         // multiple of 4 KiB
};

// A piece of a transfer between a buffer and one segment.
struct IoPiece {
  int path = 0;
  uint64_t file_offset = 0;
  uint64_t buffer_offset = 0;
  uint64_t length = 0;
  int64_t segment = 0;  // global segment index (checksums)
  bool whole_segment = false;
};

class Placement {
 public:
  static Result<Placement> make(const StripeGeometry& geometry, const PlacementParams& params);

  const StripeGeometry& geometry() const { return geometry_; }
  const PlacementParams& params() const { return params_; }

  // Stripe byte run padded to 4 KiB: what the segments of stripe I cover.
  uint64_t stored_bytes(int64_t I) const { return align_up(geometry_.stripe_bytes(I)); }
  std::span<const Segment> segments(int64_t I) const;
  // Global index of the first segment of stripe I; segments are numbered stripe by stripe.
  int64_t first_segment(int64_t I) const { return first_segment_[I]; }
  int64_t segment_count() const { return static_cast<int64_t>(segments_.size()); }
  const Segment& segment(int64_t global_index) const { return segments_[global_index]; }
  // Stripe of a global segment index.
  int64_t stripe_of_segment(int64_t global_index) const;
  // Size of the data file on each path.
  const std::vector<uint64_t>& file_bytes() const { return file_bytes_; }

  // Appends the pieces that move stripe bytes [begin, end) (4 KiB aligned, end <= stored_bytes)
  // to or from a buffer whose byte 0 is stripe byte `begin`.
  void pieces(int64_t I, uint64_t begin, uint64_t end, std::vector<IoPiece>& out) const;

 private:
  StripeGeometry geometry_;
  PlacementParams params_;
  std::vector<Segment> segments_;
  std::vector<int64_t> first_segment_;  // N + 1 entries
  std::vector<uint64_t> file_bytes_;
};

}  // namespace stripesolve::storage
