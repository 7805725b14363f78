// MatrixStore import (.npy, raw + sidecar) and export (.npy): streaming with bounded memory.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "storage/column_batches.h"
#include "storage/matrix_store.h"
#include "storage/npy.h"
#include "storage/object_writer.h"
#include "storage/pread_engine.h"
#include "storage/store_shared.h"
#include "storage/stripe_stream.h"
#include "storage/transpose.h"

namespace stripesolve::storage {
namespace {

// Columns c with r + c*h in [e0, e1): [first, last) (empty when first >= last).
std::pair<int64_t, int64_t> row_columns(int64_t r, int64_t h, int64_t e0, int64_t e1) {
  const int64_t first = e0 > r ? (e0 - r + h - 1) / h : 0;
  const int64_t last = e1 > r ? (e1 - r + h - 1) / h : 0;
  return {first, last};
}

// The columns [first, last) of a window [e0, e1) of a stripe of h rows that the window holds
// whole (empty when first >= last); the window's other elements belong to at most two partial
// columns at its ends.
std::pair<int64_t, int64_t> whole_columns(int64_t h, int64_t e0, int64_t e1) {
  return {(e0 + h - 1) / h, e1 / h};
}

// Reads elements of a dense n x n file into stripe order. C order: the whole columns of a window
// are h row segments read in one batch (one O_DIRECT read into the staging block when they are
// whole rows) and transposed in tiles over the cores (storage/transpose.h). Fortran order:
// fill_batch reads a range of whole columns in one sequential read and gathers every stripe's rows
// from it (column_batches.h); fill, one read per column segment, is left for buffers too small to
// plan batches.
class DenseReader {
 public:
  DenseReader(int fd, std::string path, DenseLayout layout, int64_t n, bool check_finite,
              bool direct_reads)
      : fd_(fd),
        path_(std::move(path)),
        l_(std::move(layout)),
        enc_{l_.item_bytes, l_.big_endian},
        n_(n),
        check_(check_finite),
        direct_tried_(!direct_reads) {}
  ~DenseReader() {
    if (direct_fd_ >= 0) ::close(direct_fd_);
  }
  DenseReader(const DenseReader&) = delete;
  DenseReader& operator=(const DenseReader&) = delete;

  Status fill(const StripeGeometry& g, int64_t I, int64_t e0, int64_t count, double* out) {
    const int64_t h = g.rows(I), e1 = e0 + count;
    const auto [cf, cl] = whole_columns(h, e0, e1);
    if (l_.fortran_order) {
      STRIPESOLVE_RETURN_IF_ERROR(fill_columns(g, I, e0, e1, out));
    } else if (cf >= cl) {
      STRIPESOLVE_RETURN_IF_ERROR(fill_rows(g, I, e0, e1, out));
    } else {
      STRIPESOLVE_RETURN_IF_ERROR(fill_rows(g, I, e0, cf * h, out));
      STRIPESOLVE_RETURN_IF_ERROR(fill_block(g, I, cf, cl, out + (cf * h - e0)));
      STRIPESOLVE_RETURN_IF_ERROR(fill_rows(g, I, cl * h, e1, out + (cl * h - e0)));
    }
    return check_ ? check_finite(g, I, e0, count, out) : Status::ok();
  }

  // Readies fill_batch for batches of at most `columns` columns (the staging block).
  Status prepare_batches(int64_t columns) {
    return prepare_staging(static_cast<uint64_t>(columns * n_) * l_.item_bytes);
  }

  // The windows of batch b (Fortran order): the file's whole columns [col_begin, col_end) in one
  // read into the staging block, then each window's rows copied out of it over the cores.
  Status fill_batch(const StripeGeometry& g, const ColumnBatch& b,
                    std::span<const ElementRun> runs) {
    const uint64_t item = static_cast<uint64_t>(l_.item_bytes);
    const int64_t col0 = b.col_begin;
    const uint64_t bytes = static_cast<uint64_t>((b.col_end - col0) * n_) * item;
    const uint64_t offset = l_.data_offset + static_cast<uint64_t>(col0 * n_) * item;
    const unsigned char* cols = nullptr;
    STRIPESOLVE_ASSIGN_OR_RETURN(cols, read_staged(offset, bytes));
    std::vector<int64_t> start(runs.size() + 1, 0);  // the runs as one range of elements
    for (size_t i = 0; i < runs.size(); ++i) start[i + 1] = start[i] + runs[i].count;
    parallel_for(start.back(), 64 * 1024, [&](int64_t lo, int64_t hi) {
      size_t i = std::upper_bound(start.begin(), start.end(), lo) - start.begin() - 1;
      for (; i < runs.size() && start[i] < hi; ++i) {
        const ElementRun& run = runs[i];
        const int64_t h = g.rows(run.stripe), rb = g.row_begin(run.stripe);
        int64_t k = std::max(lo, start[i]) - start[i];
        const int64_t k_end = std::min(hi, start[i + 1]) - start[i];
        while (k < k_end) {  // one column segment of the stripe at a time
          const int64_t e = run.e0 + k, c = e / h, r = e % h;
          const int64_t len = std::min(h - r, k_end - k);
          const unsigned char* src = cols + static_cast<uint64_t>((c - col0) * n_ + rb + r) * item;
          double* out = run.out + k;
          for (int64_t j = 0; j < len; ++j) out[j] = decode(src + j * item, enc_);
          k += len;
        }
      }
    });
    if (!check_) return Status::ok();
    for (const ElementRun& run : runs) {
      STRIPESOLVE_RETURN_IF_ERROR(check_finite(g, run.stripe, run.e0, run.count, run.out));
    }
    return Status::ok();
  }

 private:
  // Whole columns [cf, cl) of stripe I, C order: out[r + (c - cf) h].
  Status fill_block(const StripeGeometry& g, int64_t I, int64_t cf, int64_t cl, double* out) {
    const int64_t h = g.rows(I), rb = g.row_begin(I), w = cl - cf;
    const uint64_t item = static_cast<uint64_t>(l_.item_bytes);
    if (w == n_) {  // whole rows: one contiguous run of the file, through the staging block
      const uint64_t bytes = static_cast<uint64_t>(h * n_) * item;
      STRIPESOLVE_RETURN_IF_ERROR(prepare_staging(bytes));
      const unsigned char* rows = nullptr;
      STRIPESOLVE_ASSIGN_OR_RETURN(
          rows, read_staged(l_.data_offset + static_cast<uint64_t>(rb * n_) * item, bytes));
      rows_to_columns(rows, h, w, enc_, out, h);
      return Status::ok();
    }
    tmp_.resize(static_cast<size_t>(h * w) * item);
    std::vector<IoRequest> reqs;
    for (int64_t r = 0; r < h; ++r) {
      reqs.push_back(request(static_cast<uint64_t>((rb + r) * n_ + cf), w * item,
                             tmp_.data() + static_cast<uint64_t>(r * w) * item));
    }
    STRIPESOLVE_RETURN_IF_ERROR(engine_.run(reqs));
    rows_to_columns(tmp_.data(), h, w, enc_, out, h);
    return Status::ok();
  }

  // Elements [e0, e1) of stripe I, C order, one read per row (the partial columns of a window).
  Status fill_rows(const StripeGeometry& g, int64_t I, int64_t e0, int64_t e1, double* out) {
    const int64_t h = g.rows(I), rb = g.row_begin(I);
    for (int64_t r = 0; r < h && e0 < e1; ++r) {
      const auto [first, last] = row_columns(r, h, e0, e1);
      if (first >= last) continue;
      STRIPESOLVE_RETURN_IF_ERROR(read((rb + r) * n_ + first, last - first));
      for (int64_t c = first; c < last; ++c) {
        out[r + c * h - e0] = decode(tmp_.data() + (c - first) * l_.item_bytes, enc_);
      }
    }
    return Status::ok();
  }

  // Elements [e0, e1) of stripe I, Fortran order: each column's segment is contiguous, read in
  // one batch for the window and decoded over the cores.
  Status fill_columns(const StripeGeometry& g, int64_t I, int64_t e0, int64_t e1, double* out) {
    const int64_t h = g.rows(I), rb = g.row_begin(I);
    const uint64_t item = static_cast<uint64_t>(l_.item_bytes);
    tmp_.resize(static_cast<size_t>(e1 - e0) * item);
    std::vector<IoRequest> reqs;
    for (int64_t c = e0 / h; c <= (e1 - 1) / h; ++c) {
      const int64_t lo = std::max<int64_t>(e0 - c * h, 0), hi = std::min<int64_t>(e1 - c * h, h);
      reqs.push_back(request(static_cast<uint64_t>(c * n_ + rb + lo), (hi - lo) * item,
                             tmp_.data() + static_cast<uint64_t>(c * h + lo - e0) * item));
    }
    STRIPESOLVE_RETURN_IF_ERROR(engine_.run(reqs));
    parallel_for(e1 - e0, 64 * 1024, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) out[k] = decode(tmp_.data() + k * item, enc_);
    });
    return Status::ok();
  }

  // A staging block for reads of up to `bytes`, and a second descriptor of the file opened with
  // O_DIRECT where the filesystem allows it (tried once), so large reads go from the disk to the
  // block without the page cache: no copy, nothing to evict, on cores the transposes need.
  Status prepare_staging(uint64_t bytes) {
    if (staging_.size() < bytes + 2 * kAlignment) {
      staging_ = AlignedBuffer();
      STRIPESOLVE_ASSIGN_OR_RETURN(staging_, AlignedBuffer::allocate(bytes + 2 * kAlignment));
    }
    if (!direct_tried_) {
      // Only a descriptor open for reading is reopened (the same file, read-only): a caller's
      // write-only descriptor still fails its reads as before.
      direct_tried_ = true;
      const int flags = ::fcntl(fd_, F_GETFL);
      if (flags >= 0 && (flags & O_ACCMODE) != O_WRONLY) {
        const std::string self = "/proc/self/fd/" + std::to_string(fd_);
        direct_fd_ = ::open(self.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
      }
    }
    return Status::ok();
  }

  // File bytes [offset, offset + bytes) into the staging block; returns where they start in it.
  // O_DIRECT reads cover the 4 KiB-aligned range around them; a read that meets the end of the
  // file before `bytes` is an error, as for the buffered read.
  Result<const unsigned char*> read_staged(uint64_t offset, uint64_t bytes) {
    auto* block = reinterpret_cast<unsigned char*>(staging_.data());
    if (direct_fd_ >= 0) {
      const uint64_t begin = align_down(offset), need = offset + bytes - begin;
      const uint64_t length = std::min<uint64_t>(align_up(need), staging_.size());
      uint64_t done = 0;
      while (done < need) {
        const ssize_t got =
            ::pread(direct_fd_, block + done, length - done, static_cast<off_t>(begin + done));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && errno == EINVAL && done == 0) break;  // alignment refused: buffered
        if (got < 0) {
          return Status::from_errno(errno,
                                    "read " + path_ + " at offset " + std::to_string(begin + done));
        }
        if (got == 0) {
          return Status::invalid_argument(path_ + ": unexpected end of file at offset " +
                                          std::to_string(begin + done));
        }
        done += static_cast<uint64_t>(got);
      }
      if (done >= need) return block + (offset - begin);
      ::close(direct_fd_);
      direct_fd_ = -1;
    }
    const IoRequest req{IoOp::kRead, fd_, &path_, offset, bytes, staging_.data()};
    STRIPESOLVE_RETURN_IF_ERROR(engine_.run({&req, 1}));
    return block;
  }

  // The first non-finite value of the window, named by its row and column.
  Status check_finite(const StripeGeometry& g, int64_t I, int64_t e0, int64_t count,
                      const double* out) const {
    for (int64_t k = 0; k < count; ++k) {
      if (!std::isfinite(out[k])) {
        const int64_t e = e0 + k, h = g.rows(I);
        return Status::invalid_argument(path_ + ": non-finite value " + std::to_string(out[k]) +
                                        " at row " + std::to_string(g.row_begin(I) + e % h) +
                                        ", column " + std::to_string(e / h));
      }
    }
    return Status::ok();
  }

  IoRequest request(uint64_t element, uint64_t bytes, unsigned char* into) const {
    return IoRequest{IoOp::kRead, fd_,
                     &path_,      l_.data_offset + element * l_.item_bytes,
                     bytes,       reinterpret_cast<std::byte*>(into)};
  }

  Status read(int64_t element, int64_t count) {
    tmp_.resize(static_cast<size_t>(count) * l_.item_bytes);
    const IoRequest req = request(static_cast<uint64_t>(element), tmp_.size(), tmp_.data());
    return engine_.run({&req, 1});
  }

  int fd_;
  std::string path_;
  DenseLayout l_;
  ElementEncoding enc_;
  int64_t n_;
  bool check_;
  std::vector<unsigned char> tmp_;
  AlignedBuffer staging_;  // fill_batch's columns
  int direct_fd_ = -1;     // the file again, O_DIRECT (-1: buffered reads)
  bool direct_tried_ = false;
  PreadEngine engine_;
};

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

namespace {

// Reads up to `bytes` from the start of the file (fewer if it is shorter).
Result<std::string> read_prefix(int fd, const std::string& label, uint64_t bytes) {
  std::string out(static_cast<size_t>(bytes), '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::from_errno(errno, "read " + label);
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

}  // namespace

Result<MatrixInfo> MatrixStore::import_dense(const std::string& name, int fd,
                                             const std::string& path, const DenseLayout& layout,
                                             const std::string& source,
                                             const ImportOptions& options) {
  if (layout.shape.size() != 2 || layout.shape[0] != layout.shape[1]) {
    std::string shape;
    for (int64_t d : layout.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    return Status::invalid_argument(path + ": expected a square matrix, got shape (" + shape + ")");
  }
  const int64_t n = layout.shape[0];
  int64_t stripe_rows = options.stripe_rows;
  if (stripe_rows <= 0 && options.stripe_rows_for) stripe_rows = options.stripe_rows_for(n);
  if (stripe_rows <= 0) stripe_rows = shared_->config.stripe_rows;
  STRIPESOLVE_ASSIGN_OR_RETURN(StripeGeometry g, make_geometry(n, stripe_rows));
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::from_errno(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) return Status::invalid_argument(path + ": not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint64_t data = static_cast<uint64_t>(n) * static_cast<uint64_t>(n) * layout.item_bytes;
  if (size < layout.data_offset + data) {
    return Status::invalid_argument(
        path + ": truncated: expected " + std::to_string(data) + " bytes of data after " +
        std::to_string(layout.data_offset) + " header bytes, the file has " +
        std::to_string(size > layout.data_offset ? size - layout.data_offset : 0));
  }
  if (size > layout.data_offset + data) {
    return Status::invalid_argument(path + ": " + std::to_string(size - layout.data_offset - data) +
                                    " bytes after the data of a " + std::to_string(n) + " x " +
                                    std::to_string(n) + " matrix");
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(
      auto writer, ObjectWriter::begin(shared_, name, "matrix", source, g, placement_params(n)));
  DenseReader reader(fd, path, layout, n, options.check_finite, options.direct_reads);
  const uint64_t budget = shared_->config.import_buffer;
  if (layout.fortran_order) {
    // Batches of several stripes' windows over a range of columns: the stream's two halves of
    // budget / 4 each and a staging block of at most budget / 4 of the file's columns, 3/4 of
    // import_buffer in all (192 MiB by default).
    STRIPESOLVE_ASSIGN_OR_RETURN(AlignedBuffer buffer, AlignedBuffer::allocate(budget / 2));
    const std::vector<ColumnBatch> batches = plan_column_batches(
        writer->placement(), batch_capacity(buffer), budget / 4, layout.item_bytes);
    if (!batches.empty()) {
      std::vector<std::vector<StripeWindow>> windows;
      windows.reserve(batches.size());
      int64_t widest = 0;
      for (const ColumnBatch& b : batches) {
        windows.push_back(b.windows);
        widest = std::max(widest, b.col_end - b.col_begin);
      }
      STRIPESOLVE_RETURN_IF_ERROR(reader.prepare_batches(widest));
      StripeStream stream{&writer->placement(), writer->files(), shared_->engine.get(), &buffer};
      const auto produce = [&](size_t k, std::span<const ElementRun> runs) {
        return reader.fill_batch(g, batches[k], runs);
      };
      STRIPESOLVE_RETURN_IF_ERROR(
          write_stripe_batches(stream, windows, produce, writer->manifest().checksums));
      return writer->finish();
    }
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(AlignedBuffer buffer, AlignedBuffer::allocate(budget));
  StripeStream stream{&writer->placement(), writer->files(), shared_->engine.get(), &buffer};
  const auto produce = [&](int64_t I, int64_t e0, int64_t count, double* out) {
    return reader.fill(g, I, e0, count, out);
  };
  STRIPESOLVE_RETURN_IF_ERROR(write_stripes(stream, produce, writer->manifest().checksums));
  return writer->finish();
}

Result<MatrixInfo> MatrixStore::import_npy(std::string_view name, const std::string& path,
                                           const ImportOptions& options) {
  STRIPESOLVE_RETURN_IF_ERROR(check_object_name(std::string(name), "object name"));
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) return Status::from_errno(errno, "open " + path);
  return import_npy(name, file.fd, path, options);
}

Result<MatrixInfo> MatrixStore::import_npy(std::string_view name, int fd, const std::string& label,
                                           const ImportOptions& options) {
  STRIPESOLVE_RETURN_IF_ERROR(check_object_name(std::string(name), "object name"));
  STRIPESOLVE_ASSIGN_OR_RETURN(std::string head, read_prefix(fd, label, 12));
  uint64_t header = npy_header_bytes(head);
  if (header == 0) header = head.size();  // parse_npy_header reports what is wrong
  STRIPESOLVE_ASSIGN_OR_RETURN(std::string text, read_prefix(fd, label, header));
  STRIPESOLVE_ASSIGN_OR_RETURN(DenseLayout layout, parse_npy_header(text, label));
  return import_dense(std::string(name), fd, label, layout, "npy " + label, options);
}

Result<MatrixInfo> MatrixStore::import_raw(std::string_view name, const std::string& data_path,
                                           const std::string& sidecar_path,
                                           const ImportOptions& options) {
  STRIPESOLVE_RETURN_IF_ERROR(check_object_name(std::string(name), "object name"));
  STRIPESOLVE_ASSIGN_OR_RETURN(std::string text, read_whole_file(sidecar_path, 1 << 16));
  const auto bad = [&sidecar_path](const std::string& what) {
    return Status::invalid_argument(sidecar_path + ": " + what);
  };
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  DenseLayout layout;
  for (const auto& [key, value] : j.items()) {
    if (key == "n" && value.is_number_integer()) {
      layout.shape = {value.get<int64_t>(), value.get<int64_t>()};
    } else if (key == "dtype" && (value == "float64" || value == "float32")) {
      layout.item_bytes = value == "float64" ? 8 : 4;
    } else if (key == "order" && (value == "C" || value == "F")) {
      layout.fortran_order = value == "F";
    } else if (key == "endian" && (value == "little" || value == "big")) {
      layout.big_endian = value == "big";
    } else if (key == "offset" && value.is_number_unsigned()) {
      layout.data_offset = value.get<uint64_t>();
    } else {
      return bad("bad or unknown key '" + key + "': " + value.dump());
    }
  }
  if (layout.shape.empty()) return bad("missing key 'n'");
  if (!j.contains("dtype")) return bad("missing key 'dtype'");
  Fd file{::open(data_path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) return Status::from_errno(errno, "open " + data_path);
  return import_dense(std::string(name), file.fd, data_path, layout, "raw " + data_path, options);
}

Status MatrixStore::export_npy(std::string_view name, const std::string& path) {
  // A new temporary beside the target: O_EXCL, so never an existing file or a planted symlink.
  std::string tmp = path + ".XXXXXX";
  Fd out{::mkostemp(tmp.data(), O_CLOEXEC)};
  if (out.fd < 0) return Status::from_errno(errno, "create a temporary for " + path);
  Status st = export_npy(name, out.fd, tmp);
  if (st.is_ok() && ::fsync(out.fd) != 0) st = Status::from_errno(errno, "fsync " + tmp);
  if (st.is_ok() && ::fchmod(out.fd, 0644) != 0) st = Status::from_errno(errno, "chmod " + tmp);
  if (st.is_ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = Status::from_errno(errno, "rename " + tmp + " to " + path);
  }
  if (!st.is_ok()) ::unlink(tmp.c_str());
  return st;
}

Status MatrixStore::export_npy(std::string_view name, int fd, const std::string& label) {
  STRIPESOLVE_ASSIGN_OR_RETURN(auto m, open_matrix(name));
  const StripeGeometry& g = m->geometry();
  const int64_t n = g.n;
  const std::string header = make_npy_header({n, n});
  const uint64_t total = header.size() + kElementBytes * static_cast<uint64_t>(n) * n;
  struct statvfs vfs {};
  if (::fstatvfs(fd, &vfs) != 0) return Status::from_errno(errno, "statvfs " + label);
  const uint64_t available = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  if (available < total) {
    return Status::no_space("not enough free space for " + label + ": need " +
                            std::to_string(total) + " bytes, available " +
                            std::to_string(available));
  }
  if (::ftruncate(fd, static_cast<off_t>(total)) != 0) {
    return Status::from_errno(errno, "size " + label + " to " + std::to_string(total) + " bytes");
  }
  PreadEngine io;
  std::vector<double> row;
  const auto write_at = [&](uint64_t offset, const void* p, uint64_t bytes) {
    const IoRequest req{IoOp::kWrite, fd,    &label,
                        offset,       bytes, static_cast<std::byte*>(const_cast<void*>(p))};
    return io.run({&req, 1});
  };
  // Whole columns of a window go through a row-major staging block (transposed in tiles over
  // the cores) as h row segments in one batch, or one write when they are whole rows; the
  // partial columns at the window's ends one segment per row.
  std::vector<double> block;
  const auto file_offset = [&](int64_t element) {
    return header.size() + kElementBytes * static_cast<uint64_t>(element);
  };
  const auto write_rows = [&](int64_t I, int64_t e0, int64_t e1, const double* in) {
    const int64_t h = g.rows(I), rb = g.row_begin(I);
    for (int64_t r = 0; r < h && e0 < e1; ++r) {
      const auto [first, last] = row_columns(r, h, e0, e1);
      if (first >= last) continue;
      row.resize(static_cast<size_t>(last - first));
      for (int64_t c = first; c < last; ++c) row[c - first] = in[r + c * h - e0];
      STRIPESOLVE_RETURN_IF_ERROR(
          write_at(file_offset((rb + r) * n + first), row.data(), row.size() * kElementBytes));
    }
    return Status::ok();
  };
  // Write-behind: once all the rows of stripe I are written, their writeback starts, and the
  // rows of the stripe before are waited for and dropped from the page cache. The export then
  // holds about two stripes of the file in the cache instead of all of it until the fsync, its
  // disk writes overlap its reads, and it reuses the pages it frees rather than touching fresh
  // memory (costly on VMs that hand freed memory back to the host). Filesystems that do not
  // support sync_file_range are left to the fsync.
  std::optional<std::pair<uint64_t, uint64_t>> behind;
  const auto sync_range = [&](uint64_t begin, uint64_t end, unsigned flags) {
    if (::sync_file_range(fd, static_cast<off_t>(begin), static_cast<off_t>(end - begin), flags) ==
            0 ||
        errno == EINVAL || errno == ESPIPE || errno == ENOSYS || errno == EOPNOTSUPP) {
      return Status::ok();
    }
    return Status::from_errno(errno, "write " + label);
  };
  const auto write_behind = [&](int64_t I) {
    const uint64_t begin = file_offset(g.row_begin(I) * n);
    const uint64_t end = file_offset((g.row_begin(I) + g.rows(I)) * n);
    STRIPESOLVE_RETURN_IF_ERROR(sync_range(begin, end, SYNC_FILE_RANGE_WRITE));
    if (behind) {
      const auto [b, e] = *behind;
      STRIPESOLVE_RETURN_IF_ERROR(sync_range(
          b, e, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER));
      ::posix_fadvise(fd, static_cast<off_t>(b), static_cast<off_t>(e - b), POSIX_FADV_DONTNEED);
    }
    behind = {begin, end};
    return Status::ok();
  };
  const auto write_window = [&](int64_t I, int64_t e0, int64_t count, const double* in) {
    const int64_t h = g.rows(I), rb = g.row_begin(I), e1 = e0 + count;
    const auto [cf, cl] = whole_columns(h, e0, e1);
    if (cf >= cl) return write_rows(I, e0, e1, in);
    STRIPESOLVE_RETURN_IF_ERROR(write_rows(I, e0, cf * h, in));
    const int64_t w = cl - cf;
    block.resize(static_cast<size_t>(h * w));
    columns_to_rows(in + (cf * h - e0), h, h, w, block.data());
    std::vector<IoRequest> reqs;
    for (int64_t r = 0; r < h; r += (w == n ? h : 1)) {
      const uint64_t bytes = kElementBytes * static_cast<uint64_t>(w == n ? h * n : w);
      reqs.push_back(IoRequest{IoOp::kWrite, fd, &label, file_offset((rb + r) * n + cf), bytes,
                               reinterpret_cast<std::byte*>(block.data() + r * w)});
    }
    STRIPESOLVE_RETURN_IF_ERROR(io.run(reqs));
    return write_rows(I, cl * h, e1, in + (cl * h - e0));
  };
  const auto consume = [&](int64_t I, int64_t e0, int64_t count, const double* in) {
    STRIPESOLVE_RETURN_IF_ERROR(write_window(I, e0, count, in));
    return e0 + count == g.rows(I) * n ? write_behind(I) : Status::ok();
  };
  STRIPESOLVE_RETURN_IF_ERROR(write_at(0, header.data(), header.size()));
  STRIPESOLVE_ASSIGN_OR_RETURN(AlignedBuffer buffer,
                               AlignedBuffer::allocate(shared_->config.import_buffer));
  StripeStream stream{&m->placement(), m->files(), shared_->engine.get(), &buffer};
  return read_stripes(stream, consume, m->checksums(), shared_->config.verify_checksums);
}

}  // namespace stripesolve::storage
