#include "storage/placement.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace stripesolve::storage {

int64_t round_robin_levels(int64_t n, uint64_t cache_bytes, double q) {
  const double values = static_cast<double>(cache_bytes) / static_cast<double>(kElementBytes);
  if (values < 1.0) return 1;
  const double levels = std::ceil(q * static_cast<double>(n) / std::sqrt(values));
  return std::max<int64_t>(1, static_cast<int64_t>(std::min(levels, 1e6)));
}

namespace {

Status check_params(const StripeGeometry& geometry, const PlacementParams& params) {
  if (params.path_count < 1) {
    return Status::invalid_argument("placement needs at least one path, got " +
                                    std::to_string(params.path_count));
  }
  if (params.segment_bytes == 0 && params.levels < 1) {
    return Status::invalid_argument("round-robin levels must be at least 1, got " +
                                    std::to_string(params.levels));
  }
  if (params.segment_bytes % kAlignment != 0 || params.min_segment_bytes % kAlignment != 0) {
    return Status::invalid_argument("segment sizes must be multiples of 4096 bytes, got " +
                                    std::to_string(params.segment_bytes) + " and " +
                                    std::to_string(params.min_segment_bytes));
  }
  if (geometry.stripes < 1) return Status::invalid_argument("placement of an empty geometry");
  return Status::ok();
}

// Segment length of a stripe whose padded run has `stored` bytes.
uint64_t segment_length(uint64_t stored, const PlacementParams& params) {
  uint64_t seg = params.segment_bytes;
  if (seg == 0) {
    const uint64_t parts =
        static_cast<uint64_t>(params.levels) * static_cast<uint64_t>(params.path_count);
    seg = std::max(params.min_segment_bytes, align_up((stored + parts - 1) / parts));
  }
  return std::max(seg, kAlignment);
}

}  // namespace

Result<std::vector<uint64_t>> placement_file_bytes(const StripeGeometry& geometry,
                                                   const PlacementParams& params) {
  STRIPESOLVE_RETURN_IF_ERROR(check_params(geometry, params));
  const auto paths = static_cast<uint64_t>(params.path_count);
  std::vector<uint64_t> bytes(paths, 0);
  for (int64_t I = 0; I < geometry.stripes; ++I) {
    const uint64_t stored = align_up(geometry.stripe_bytes(I));
    if (stored == 0) continue;
    const uint64_t seg = segment_length(stored, params);
    const uint64_t count = (stored + seg - 1) / seg;
    // Segment k goes to path (I + k) mod P (as in make()); all have length seg but the last.
    for (uint64_t r = 0; r < std::min(paths, count); ++r) {
      const uint64_t on_path = count / paths + (r < count % paths ? 1 : 0);
      bytes[(static_cast<uint64_t>(I) + r) % paths] += on_path * seg;
    }
    bytes[(static_cast<uint64_t>(I) + count - 1) % paths] -= count * seg - stored;
  }
  return bytes;
}

Result<Placement> Placement::make(const StripeGeometry& geometry, const PlacementParams& params) {
  STRIPESOLVE_RETURN_IF_ERROR(check_params(geometry, params));
  Placement p;
  p.geometry_ = geometry;
  p.params_ = params;
  const auto paths = static_cast<uint64_t>(params.path_count);
  p.file_bytes_.assign(paths, 0);
  p.first_segment_.reserve(geometry.stripes + 1);
  for (int64_t I = 0; I < geometry.stripes; ++I) {
    p.first_segment_.push_back(static_cast<int64_t>(p.segments_.size()));
    const uint64_t stored = p.stored_bytes(I);
    const uint64_t seg = segment_length(stored, params);
    uint64_t k = 0;
    for (uint64_t off = 0; off < stored; off += seg, ++k) {
      Segment s;
      s.path = static_cast<int>((static_cast<uint64_t>(I) + k) % paths);
      s.stripe_offset = off;
      s.length = std::min(seg, stored - off);
      s.file_offset = p.file_bytes_[s.path];
      p.file_bytes_[s.path] += s.length;
      p.segments_.push_back(s);
    }
  }
  p.first_segment_.push_back(static_cast<int64_t>(p.segments_.size()));
  return p;
}

std::span<const Segment> Placement::segments(int64_t I) const {
  return {segments_.data() + first_segment_[I],
          static_cast<size_t>(first_segment_[I + 1] - first_segment_[I])};
}

int64_t Placement::stripe_of_segment(int64_t global_index) const {
  auto it = std::upper_bound(first_segment_.begin(), first_segment_.end(), global_index);
  return static_cast<int64_t>(it - first_segment_.begin()) - 1;
}

void Placement::pieces(int64_t I, uint64_t begin, uint64_t end, std::vector<IoPiece>& out) const {
  const std::span<const Segment> segs = segments(I);
  // Segments of a stripe have one length except the last, so the first touched one is direct.
  const uint64_t seg_len = segs.front().length;
  for (size_t k = begin / seg_len; k < segs.size(); ++k) {
    const Segment& s = segs[k];
    if (s.stripe_offset >= end) break;
    const uint64_t lo = std::max(begin, s.stripe_offset);
    const uint64_t hi = std::min(end, s.stripe_offset + s.length);
    IoPiece piece;
    piece.path = s.path;
    piece.file_offset = s.file_offset + (lo - s.stripe_offset);
    piece.buffer_offset = lo - begin;
    piece.length = hi - lo;
    piece.segment = first_segment_[I] + static_cast<int64_t>(k);
    piece.whole_segment = lo == s.stripe_offset && hi == s.stripe_offset + s.length;
    out.push_back(piece);
  }
}

}  // namespace stripesolve::storage
