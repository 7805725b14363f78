#include "storage/stripe_stream.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "storage/checksum.h"

namespace stripesolve::storage {
namespace {

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// Requests for window [begin, end) of stripe I; `pieces` is filled alongside.
void make_requests(const StripeStream& s, int64_t I, uint64_t begin, uint64_t end, IoOp op,
                   std::vector<IoPiece>& pieces, std::vector<IoRequest>& requests) {
  pieces.clear();
  requests.clear();
  s.placement->pieces(I, begin, end, pieces);
  for (const IoPiece& p : pieces) {
    requests.push_back(IoRequest{op, s.files[p.path].fd(), &s.files[p.path].path(), p.file_offset,
                                 p.length, s.buffer->data() + p.buffer_offset});
  }
}

}  // namespace

Status checksum_mismatch(const Placement& placement, std::span<const DataFile> files,
                         int64_t segment, uint32_t stored, uint32_t computed) {
  const Segment& seg = placement.segment(segment);
  return Status::corruption("checksum mismatch in segment " + std::to_string(segment) +
                            " (stripe " + std::to_string(placement.stripe_of_segment(segment)) +
                            ", " + files[seg.path].path() + " at offset " +
                            std::to_string(seg.file_offset) + ", " + std::to_string(seg.length) +
                            " bytes): stored " + hex32(stored) + ", computed " + hex32(computed));
}

Status write_stripes(const StripeStream& s, const ElementProducer& produce,
                     std::vector<std::optional<uint32_t>>& checksums) {
  const Placement& pl = *s.placement;
  checksums.assign(pl.segment_count(), std::nullopt);
  std::vector<IoPiece> pieces;
  std::vector<IoRequest> requests;
  const uint64_t window = s.buffer->size();
  for (int64_t I = 0; I < pl.geometry().stripes; ++I) {
    const uint64_t data = pl.geometry().stripe_bytes(I);
    const uint64_t stored = pl.stored_bytes(I);
    std::vector<uint32_t> running(pl.segments(I).size(), 0);
    for (uint64_t w = 0; w < stored; w += window) {
      const uint64_t end = std::min(stored, w + window);
      const uint64_t data_end = std::min(data, end);
      auto* values = reinterpret_cast<double*>(s.buffer->data());
      const auto count = static_cast<int64_t>((data_end - w) / kElementBytes);
      STRIPESOLVE_RETURN_IF_ERROR(produce(I, static_cast<int64_t>(w / kElementBytes), count, values));
      std::memset(s.buffer->data() + (data_end - w), 0, end - data_end);  // 4 KiB tail padding
      make_requests(s, I, w, end, IoOp::kWrite, pieces, requests);
      for (const IoPiece& p : pieces) {
        uint32_t& crc = running[p.segment - pl.first_segment(I)];
        crc = crc32c_extend(crc, s.buffer->data() + p.buffer_offset, p.length);
      }
      STRIPESOLVE_RETURN_IF_ERROR(s.engine->run(requests));
    }
    for (size_t k = 0; k < running.size(); ++k) checksums[pl.first_segment(I) + k] = running[k];
  }
  return Status::ok();
}

Status read_stripes(const StripeStream& s, const ElementConsumer& consume,
                    const std::vector<std::optional<uint32_t>>& checksums, bool verify) {
  const Placement& pl = *s.placement;
  std::vector<IoPiece> pieces;
  std::vector<IoRequest> requests;
  const uint64_t window = s.buffer->size();
  for (int64_t I = 0; I < pl.geometry().stripes; ++I) {
    const uint64_t data = pl.geometry().stripe_bytes(I);
    const uint64_t stored = pl.stored_bytes(I);
    std::vector<uint32_t> running(pl.segments(I).size(), 0);
    for (uint64_t w = 0; w < stored; w += window) {
      const uint64_t end = std::min(stored, w + window);
      make_requests(s, I, w, end, IoOp::kRead, pieces, requests);
      STRIPESOLVE_RETURN_IF_ERROR(s.engine->run(requests));
      for (const IoPiece& p : pieces) {
        const int64_t k = p.segment - pl.first_segment(I);
        running[k] = crc32c_extend(running[k], s.buffer->data() + p.buffer_offset, p.length);
        const Segment& seg = pl.segment(p.segment);
        const bool segment_done = p.file_offset + p.length == seg.file_offset + seg.length;
        const auto& stored_crc = checksums[p.segment];
        if (verify && segment_done && stored_crc && *stored_crc != running[k]) {
          return checksum_mismatch(pl, s.files, p.segment, *stored_crc, running[k]);
        }
      }
      if (w < data) {
        const uint64_t data_end = std::min(data, end);
        STRIPESOLVE_RETURN_IF_ERROR(consume(I, static_cast<int64_t>(w / kElementBytes),
                                            static_cast<int64_t>((data_end - w) / kElementBytes),
                                            reinterpret_cast<const double*>(s.buffer->data())));
      }
    }
  }
  return Status::ok();
}

}  // namespace stripesolve::storage
