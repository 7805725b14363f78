#include "storage/stripe_stream.h"

#include <algorithm>
#include <cstring>
#include <future>

#include <fmt/format.h>

#include "storage/checksum.h"

namespace stripesolve::storage {
namespace {

// Requests for window [begin, end) of stripe I held at `base`; `pieces` is filled alongside.
void make_requests(const StripeStream& s, int64_t I, uint64_t begin, uint64_t end, IoOp op,
                   std::byte* base, std::vector<IoPiece>& pieces,
                   std::vector<IoRequest>& requests) {
  pieces.clear();
  requests.clear();
  s.placement->pieces(I, begin, end, pieces);
  for (const IoPiece& p : pieces) {
    requests.push_back(IoRequest{op, s.files[p.path].fd(), &s.files[p.path].path(), p.file_offset,
                                 p.length, base + p.buffer_offset});
  }
}

// One window of a stripe: bytes [begin, end) of its stored part.
struct Window {
  int64_t stripe = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  bool last_of_stripe = false;
};

std::vector<Window> windows_of(const Placement& pl, uint64_t window) {
  std::vector<Window> out;
  for (int64_t i = 0; i < pl.geometry().stripes; ++i) {
    const uint64_t stored = pl.stored_bytes(i);
    for (uint64_t w = 0; w < stored; w += window) {
      const uint64_t end = std::min(stored, w + window);
      out.push_back(Window{i, w, end, end == stored});
    }
  }
  return out;
}

// The buffer as two halves (4 KiB aligned), so that the I/O of one window overlaps the
// production or consumption of the next; one half when the buffer is too small to split.
struct Halves {
  std::byte* base[2] = {nullptr, nullptr};
  uint64_t window = 0;
  int count = 1;
};

Halves halves_of(const AlignedBuffer& buffer) {
  Halves h;
  const uint64_t half = buffer.size() / 2 / 4096 * 4096;
  if (half == 0) {
    h.base[0] = h.base[1] = buffer.data();
    h.window = buffer.size();
    return h;
  }
  h.base[0] = buffer.data();
  h.base[1] = buffer.data() + half;
  h.window = half;
  h.count = 2;
  return h;
}

}  // namespace

Status checksum_mismatch(const Placement& placement, std::span<const DataFile> files,
                         int64_t segment, uint32_t stored, uint32_t computed) {
  const Segment& seg = placement.segment(segment);
  return Status::corruption(fmt::format(
      "checksum mismatch in segment {} (stripe {}, {} at offset {}, {} bytes): stored {:08x}, "
      "computed {:08x}",
      segment, placement.stripe_of_segment(segment), files[seg.path].path(), seg.file_offset,
      seg.length, stored, computed));
}

uint64_t batch_capacity(const AlignedBuffer& buffer) {
  return halves_of(buffer).window;
}

uint64_t stream_buffer_bytes(const Placement& placement, uint64_t budget) {
  const int64_t stripes = placement.geometry().stripes;
  uint64_t stored = 0;
  for (int64_t i = 0; i < stripes; ++i) stored += placement.stored_bytes(i);
  const uint64_t half = stored + 2 * kAlignment * static_cast<uint64_t>(stripes);
  return std::min(budget, 2 * half);
}

Status write_stripes(const StripeStream& s, const ElementProducer& produce,
                     std::vector<std::optional<uint32_t>>& checksums) {
  const Halves halves = halves_of(*s.buffer);
  // Consecutive windows share a batch up to a half of the buffer (stripes smaller than a half:
  // fewer batches, each one the disk's queue fills and drains).
  std::vector<std::vector<StripeWindow>> batches;
  uint64_t batch_bytes = 0;
  for (const Window& w : windows_of(*s.placement, halves.window)) {
    if (batches.empty() || batch_bytes + (w.end - w.begin) > halves.window) {
      batches.emplace_back();
      batch_bytes = 0;
    }
    batches.back().push_back(StripeWindow{w.stripe, w.begin, w.end});
    batch_bytes += w.end - w.begin;
  }
  const auto one = [&produce](size_t, std::span<const ElementRun> runs) {
    for (const ElementRun& r : runs) {
      STRIPESOLVE_RETURN_IF_ERROR(produce(r.stripe, r.e0, r.count, r.out));
    }
    return Status::ok();
  };
  return write_stripe_batches(s, batches, one, checksums);
}

Status write_stripe_batches(const StripeStream& s,
                            std::span<const std::vector<StripeWindow>> batches,
                            const BatchProducer& produce,
                            std::vector<std::optional<uint32_t>>& checksums) {
  // The calling thread produces batch k + 1 in one half while a writer task checksums and
  // writes batch k from the other; one batch is in flight at a time, in order, so the running
  // checksums of each segment extend in order.
  const Placement& pl = *s.placement;
  const StripeGeometry& g = pl.geometry();
  checksums.assign(pl.segment_count(), std::nullopt);
  const Halves halves = halves_of(*s.buffer);
  std::vector<uint32_t> running(pl.segment_count(), 0);  // owned by the writer task
  std::vector<uint64_t> next_byte(static_cast<size_t>(g.stripes), 0);
  std::future<Status> in_flight;
  auto wait = [&in_flight]() -> Status {
    return in_flight.valid() ? in_flight.get() : Status::ok();
  };
  std::vector<ElementRun> runs;
  for (size_t k = 0; k < batches.size(); ++k) {
    const std::vector<StripeWindow>& batch = batches[k];
    std::byte* base = halves.base[k % 2];
    runs.clear();
    uint64_t offset = 0;
    for (const StripeWindow& w : batch) {
      const bool valid = w.stripe >= 0 && w.stripe < g.stripes && w.begin == next_byte[w.stripe] &&
                         w.end > w.begin && w.end <= pl.stored_bytes(w.stripe) &&
                         w.end % kAlignment == 0;
      if (!valid || offset + (w.end - w.begin) > halves.window) {
        (void)wait();
        return Status::internal("write_stripe_batches: batch " + std::to_string(k) +
                                " has a window of stripe " + std::to_string(w.stripe) + " [" +
                                std::to_string(w.begin) + ", " + std::to_string(w.end) +
                                ") out of order or beyond the buffer");
      }
      next_byte[w.stripe] = w.end;
      const uint64_t data_end = std::min(g.stripe_bytes(w.stripe), w.end);
      runs.push_back(ElementRun{w.stripe, static_cast<int64_t>(w.begin / kElementBytes),
                                static_cast<int64_t>((data_end - w.begin) / kElementBytes),
                                reinterpret_cast<double*>(base + offset)});
      offset += w.end - w.begin;
    }
    if (halves.count == 1) STRIPESOLVE_RETURN_IF_ERROR(wait());
    Status produced = produce(k, runs);
    const Status written = wait();
    STRIPESOLVE_RETURN_IF_ERROR(produced);
    STRIPESOLVE_RETURN_IF_ERROR(written);
    offset = 0;
    for (const StripeWindow& w : batch) {  // 4 KiB tail padding
      const uint64_t data_end = std::min(g.stripe_bytes(w.stripe), w.end);
      std::memset(base + offset + (data_end - w.begin), 0, w.end - data_end);
      offset += w.end - w.begin;
    }
    in_flight = std::async(std::launch::async, [&s, &pl, &running, &checksums, &batch, base] {
      std::vector<IoPiece> pieces, batch_pieces;
      std::vector<IoRequest> requests, batch_requests;
      uint64_t at = 0;
      for (const StripeWindow& w : batch) {
        make_requests(s, w.stripe, w.begin, w.end, IoOp::kWrite, base + at, pieces, requests);
        for (IoPiece p : pieces) {  // offsets from the batch's base
          p.buffer_offset += at;
          batch_pieces.push_back(p);
        }
        batch_requests.insert(batch_requests.end(), requests.begin(), requests.end());
        at += w.end - w.begin;
      }
      // The checksums beside the writes (both only read the buffer): computed first, they held
      // every batch's writes back by a pass over it (create of 2 GiB on 2 cores: 0.67x the
      // disk's write bound).
      std::future<void> crcs = std::async(std::launch::async, [&] {
        for (const IoPiece& p : batch_pieces) {
          uint32_t& crc = running[p.segment];
          crc = crc32c_extend(crc, base + p.buffer_offset, p.length);
        }
      });
      const Status wrote = s.engine->run(batch_requests);
      crcs.get();
      STRIPESOLVE_RETURN_IF_ERROR(wrote);
      for (const StripeWindow& w : batch) {
        if (w.end != pl.stored_bytes(w.stripe)) continue;
        const int64_t first = pl.first_segment(w.stripe);
        for (size_t i = 0; i < pl.segments(w.stripe).size(); ++i) {
          checksums[first + i] = running[first + i];
        }
      }
      return Status::ok();
    });
  }
  STRIPESOLVE_RETURN_IF_ERROR(wait());
  for (int64_t i = 0; i < g.stripes; ++i) {
    if (next_byte[i] != pl.stored_bytes(i)) {
      return Status::internal("write_stripe_batches: stripe " + std::to_string(i) +
                              " written up to byte " + std::to_string(next_byte[i]) + " of " +
                              std::to_string(pl.stored_bytes(i)));
    }
  }
  return Status::ok();
}

Status read_stripes(const StripeStream& s, const ElementConsumer& consume,
                    const std::vector<std::optional<uint32_t>>& checksums, bool verify) {
  // A reader task fills window k + 1 in one half while the calling thread verifies and consumes
  // window k from the other.
  const Placement& pl = *s.placement;
  const Halves halves = halves_of(*s.buffer);
  const std::vector<Window> windows = windows_of(pl, halves.window);
  auto read = [&s, &halves](const Window& win, int slot) {
    return std::async(std::launch::async, [&s, win, base = halves.base[slot]] {
      std::vector<IoPiece> pieces;
      std::vector<IoRequest> requests;
      make_requests(s, win.stripe, win.begin, win.end, IoOp::kRead, base, pieces, requests);
      return s.engine->run(requests);
    });
  };
  std::future<Status> next;
  if (!windows.empty()) next = read(windows[0], 0);
  std::vector<uint32_t> running;
  std::vector<IoPiece> pieces;
  for (size_t k = 0; k < windows.size(); ++k) {
    const Window win = windows[k];
    std::byte* base = halves.base[k % 2];
    STRIPESOLVE_RETURN_IF_ERROR(next.get());
    if (k + 1 < windows.size() && halves.count == 2)
      next = read(windows[k + 1], static_cast<int>((k + 1) % 2));
    if (win.begin == 0) running.assign(pl.segments(win.stripe).size(), 0);
    pieces.clear();
    pl.pieces(win.stripe, win.begin, win.end, pieces);
    for (const IoPiece& p : pieces) {
      const int64_t i = p.segment - pl.first_segment(win.stripe);
      running[i] = crc32c_extend(running[i], base + p.buffer_offset, p.length);
      const Segment& seg = pl.segment(p.segment);
      const bool segment_done = p.file_offset + p.length == seg.file_offset + seg.length;
      const auto& stored_crc = checksums[p.segment];
      if (verify && segment_done && stored_crc && *stored_crc != running[i]) {
        if (next.valid()) (void)next.get();
        return checksum_mismatch(pl, s.files, p.segment, *stored_crc, running[i]);
      }
    }
    const uint64_t data = pl.geometry().stripe_bytes(win.stripe);
    if (win.begin < data) {
      const uint64_t data_end = std::min(data, win.end);
      Status st = consume(win.stripe, static_cast<int64_t>(win.begin / kElementBytes),
                          static_cast<int64_t>((data_end - win.begin) / kElementBytes),
                          reinterpret_cast<const double*>(base));
      if (!st.is_ok()) {
        if (next.valid()) (void)next.get();
        return st;
      }
    }
    if (k + 1 < windows.size() && halves.count == 1) next = read(windows[k + 1], 0);
  }
  return Status::ok();
}

}  // namespace stripesolve::storage
