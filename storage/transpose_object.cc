#include "storage/transpose_object.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <future>
#include <optional>

#include "storage/checksum.h"
#include "storage/matrix_store.h"
#include "storage/object_writer.h"
#include "storage/store_shared.h"
#include "storage/stripe_stream.h"
#include "storage/transpose.h"

namespace stripesolve::storage {
namespace {

constexpr uint64_t kMinStream = 2 * kAlignment;

uint64_t largest_stripe_bytes(const StripeGeometry& g) {
  uint64_t most = 0;
  for (int64_t j = 0; j < g.stripes; ++j) most = std::max(most, g.stripe_bytes(j));
  return most;
}

// The output stripes of one group in RAM, column-major each (leading dimension h_J), one after
// another: A^T's rows [col_begin, col_end) are A's columns of that range.
class Group {
 public:
  Group(const StripeGeometry& g, std::vector<double>& data) : g_(g), data_(data) {}

  void start(const StripeGroup& group) {
    col_begin_ = g_.row_begin(group.first);
    col_end_ = g_.row_begin(group.end - 1) + g_.rows(group.end - 1);
    first_ = group.first;
    end_ = group.end;
    offsets_.clear();
    column_.clear();
    ld_.clear();
    uint64_t at = 0;
    for (int64_t j = group.first; j < group.end; ++j) {
      offsets_.push_back(at);
      for (int64_t c = g_.row_begin(j); c < g_.row_end(j); ++c) {
        column_.push_back(data_.data() + at + (c - g_.row_begin(j)));
        ld_.push_back(g_.rows(j));
      }
      at += static_cast<uint64_t>(g_.rows(j) * g_.n);
    }
  }

  bool holds(int64_t J) const { return J >= first_ && J < end_; }
  int64_t end() const { return end_; }
  const double* stripe(int64_t J) const {
    return data_.data() + offsets_[static_cast<size_t>(J - first_)];
  }

  // Elements [e0, e0 + count) of A's stripe I (column-major, leading dimension h_I): those in
  // the group's columns go to A^T, element (r, c) of A to (c, r). Tiled so that a tile's reads
  // and writes each touch few cache lines; columns spread over the cores.
  void scatter(int64_t I, int64_t e0, int64_t count, const double* in) {
    const int64_t h = g_.rows(I);
    const int64_t r0 = g_.row_begin(I);
    const int64_t first = std::max(e0 / h, col_begin_);
    const int64_t last = std::min((e0 + count - 1) / h + 1, col_end_);
    if (last <= first) return;
    parallel_for(last - first, kTransposeTile, [&](int64_t b, int64_t e) {
      for (int64_t ct = first + b; ct < first + e; ct += kTransposeTile) {
        const int64_t ce = std::min(first + e, ct + kTransposeTile);
        for (int64_t qt = 0; qt < h; qt += kTransposeTile) {
          const int64_t qe = std::min(h, qt + kTransposeTile);
          for (int64_t c = ct; c < ce; ++c) {
            const int64_t q0 = std::max(qt, e0 - c * h);
            const int64_t q1 = std::min(qe, e0 + count - c * h);
            const auto k = static_cast<size_t>(c - col_begin_);
            double* out = column_[k] + r0 * ld_[k];
            const int64_t ld = ld_[k];
            const double* src = in + (c * h - e0);
            for (int64_t q = q0; q < q1; ++q) out[q * ld] = src[q];
          }
        }
      }
    });
  }

 private:
  const StripeGeometry& g_;
  std::vector<double>& data_;
  int64_t col_begin_ = 0;
  int64_t col_end_ = 0;
  int64_t first_ = 0;
  int64_t end_ = 0;
  std::vector<uint64_t> offsets_;  // element offset of each stripe of the group
  std::vector<double*> column_;    // per column c of the group: where A^T's row c starts
  std::vector<int64_t> ld_;        // and its stride (h_J of its stripe)
};

// Bytes [begin, end) of stripe I of A: whole 4 KiB blocks around its columns [c0, c1).
struct ColumnRange {
  uint64_t begin = 0;
  uint64_t end = 0;
};

ColumnRange column_range(const Placement& pl, int64_t I, int64_t c0, int64_t c1) {
  const auto h = static_cast<uint64_t>(pl.geometry().rows(I));
  return {align_down(kElementBytes * h * static_cast<uint64_t>(c0)),
          std::min(align_up(kElementBytes * h * static_cast<uint64_t>(c1)), pl.stored_bytes(I))};
}

// Reads `range` of A's stripe I into `buffer` and, when `verify`, checks the segments it covers
// whole against their checksums (as StripedMatrix::read_parts does).
Status read_range(const StripedMatrix& a, IoEngine& engine,
                  const std::vector<std::optional<uint32_t>>& checksums, bool verify, int64_t I,
                  ColumnRange range, std::byte* buffer) {
  std::vector<IoPiece> pieces;
  a.placement().pieces(I, range.begin, range.end, pieces);
  std::vector<IoRequest> requests;
  for (const IoPiece& p : pieces) {
    const DataFile& f = a.files()[static_cast<size_t>(p.path)];
    requests.push_back(IoRequest{IoOp::kRead, f.fd(), &f.path(), p.file_offset, p.length,
                                 buffer + p.buffer_offset});
  }
  STRIPESOLVE_RETURN_IF_ERROR(engine.run(requests));
  for (const IoPiece& p : pieces) {
    const std::optional<uint32_t>& stored = checksums[static_cast<size_t>(p.segment)];
    if (!verify || !p.whole_segment || !stored) continue;
    const uint32_t computed = crc32c_extend(0, buffer + p.buffer_offset, p.length);
    if (computed != *stored) {
      return checksum_mismatch(a.placement(), a.files(), p.segment, *stored, computed);
    }
  }
  return Status::ok();
}

}  // namespace

TransposeMemory transpose_memory(const StripeGeometry& g, uint64_t budget, uint64_t import_buffer) {
  // An eighth of the budget for the writes (at most the store's import buffer); the rest holds
  // the group and the two reads of its columns of an input stripe, which take 2 h / n of the
  // group each (h the tallest stripe): the larger the group, the fewer groups; the reads cost the
  // same whatever their number (each byte of A is read once).
  uint64_t stream = std::min(import_buffer, budget / 8) / kAlignment * kAlignment;
  stream = std::max(stream, kMinStream);
  const uint64_t left = budget > stream ? budget - stream : 0;
  const double reads = 2.0 * static_cast<double>(g.rows(0) + 1) / static_cast<double>(g.n);
  const auto group = static_cast<uint64_t>(static_cast<double>(left) / (1.0 + reads));
  return {stream, std::max(group, largest_stripe_bytes(g))};
}

std::vector<StripeGroup> transpose_groups(const StripeGeometry& g, uint64_t group_bytes) {
  std::vector<StripeGroup> out;
  int64_t j = 0;
  while (j < g.stripes) {
    StripeGroup group{j, j + 1};
    uint64_t bytes = g.stripe_bytes(j);
    while (group.end < g.stripes && bytes + g.stripe_bytes(group.end) <= group_bytes) {
      bytes += g.stripe_bytes(group.end);
      ++group.end;
    }
    out.push_back(group);
    j = group.end;
  }
  return out;
}

Result<MatrixInfo> MatrixStore::create_transpose(std::string_view name, const StripedMatrix& a,
                                                 uint64_t memory_budget,
                                                 const std::function<bool()>& cancelled) {
  const StripeGeometry& g = a.geometry();
  const Placement& pl = a.placement();
  const TransposeMemory memory = transpose_memory(g, memory_budget, shared_->config.import_buffer);
  const std::vector<StripeGroup> groups = transpose_groups(g, memory.group_bytes);
  uint64_t largest_group = 0;
  uint64_t largest_read = 0;
  for (const StripeGroup& k : groups) {
    uint64_t bytes = 0;
    for (int64_t j = k.first; j < k.end; ++j) bytes += g.stripe_bytes(j);
    largest_group = std::max(largest_group, bytes);
    const int64_t c0 = g.row_begin(k.first);
    const int64_t c1 = g.row_end(k.end - 1);
    for (int64_t i = 0; i < g.stripes; ++i) {
      const ColumnRange r = column_range(pl, i, c0, c1);
      largest_read = std::max(largest_read, r.end - r.begin);
    }
  }
  const std::vector<std::optional<uint32_t>> a_checksums = a.checksums();
  STRIPESOLVE_ASSIGN_OR_RETURN(
      auto writer, ObjectWriter::begin(shared_, std::string(name), "transpose",
                                       "transpose of " + a.info().name, g, a.info().placement));
  // What it is the transpose of: checked before reuse (is_factor_of), and it lists the object
  // among a's derived ones (factors_of), so that it goes with a.
  writer->manifest().info.factor_of = FactorOf{a.info().id, g.n, checksum_summary(a_checksums)};
  STRIPESOLVE_ASSIGN_OR_RETURN(
      AlignedBuffer out_buffer,
      AlignedBuffer::allocate(stream_buffer_bytes(writer->placement(), memory.stream_bytes)));
  AlignedBuffer reads[2];
  for (AlignedBuffer& r : reads) {
    STRIPESOLVE_ASSIGN_OR_RETURN(r, AlignedBuffer::allocate(largest_read));
  }
  std::vector<double> data(largest_group / kElementBytes);
  Group group(g, data);
  size_t next_group = 0;
  IoEngine& engine = *shared_->engine;
  const bool verify = shared_->config.verify_checksums;
  // One pass over A's stripes reads the group's columns of each (every byte of A is read once
  // over all the groups); the read of stripe I + 1 overlaps the scatter of stripe I.
  const auto fill = [&](const StripeGroup& k) -> Status {
    const int64_t c0 = g.row_begin(k.first);
    const int64_t c1 = g.row_end(k.end - 1);
    auto read = [&](int64_t I) {
      return std::async(std::launch::async, [&, I] {
        return read_range(a, engine, a_checksums, verify, I, column_range(pl, I, c0, c1),
                          reads[I % 2].data());
      });
    };
    std::future<Status> next = read(0);
    for (int64_t i = 0; i < g.stripes; ++i) {
      STRIPESOLVE_RETURN_IF_ERROR(next.get());
      if (i + 1 < g.stripes) next = read(i + 1);
      const ColumnRange r = column_range(pl, i, c0, c1);
      const uint64_t data_end = std::min(r.end, g.stripe_bytes(i));
      group.scatter(i, static_cast<int64_t>(r.begin / kElementBytes),
                    static_cast<int64_t>((data_end - r.begin) / kElementBytes),
                    reinterpret_cast<const double*>(reads[i % 2].data()));
    }
    return Status::ok();
  };
  // write_stripes asks for A^T's stripes in order: the first element of each group's first
  // stripe fills the group.
  const auto produce = [&](int64_t J, int64_t e0, int64_t count, double* dst) -> Status {
    if (cancelled && cancelled()) {
      return Status::cancelled("transpose of '" + a.info().name + "' cancelled");
    }
    if (!group.holds(J)) {
      if (next_group >= groups.size() || groups[next_group].first != J) {
        return Status::internal("transpose: stripe " + std::to_string(J) + " out of order");
      }
      group.start(groups[next_group]);
      STRIPESOLVE_RETURN_IF_ERROR(fill(groups[next_group++]));
    }
    std::memcpy(dst, group.stripe(J) + e0, static_cast<size_t>(count) * sizeof(double));
    return Status::ok();
  };
  const StripeStream out{&writer->placement(), writer->files(), &engine, &out_buffer};
  STRIPESOLVE_RETURN_IF_ERROR(write_stripes(out, produce, writer->manifest().checksums));
  return writer->finish();
}

}  // namespace stripesolve::storage
