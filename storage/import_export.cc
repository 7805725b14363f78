// MatrixStore import (.npy, raw + sidecar) and export (.npy): streaming with bounded memory. The
// reading of a dense file into stripe order: dense_reader.h.
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
#include "storage/dense_reader.h"
#include "storage/matrix_store.h"
#include "storage/npy.h"
#include "storage/object_writer.h"
#include "storage/pread_engine.h"
#include "storage/store_shared.h"
#include "storage/stripe_stream.h"
#include "storage/transpose.h"

namespace stripesolve::storage {
namespace {

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
    STRIPESOLVE_ASSIGN_OR_RETURN(AlignedBuffer buffer, AlignedBuffer::allocate(stream_buffer_bytes(
                                                           writer->placement(), budget / 2)));
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
  STRIPESOLVE_ASSIGN_OR_RETURN(AlignedBuffer buffer, AlignedBuffer::allocate(stream_buffer_bytes(
                                                         writer->placement(), budget)));
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
  return import_dense(std::string(name), fd, label, layout, npy_source(label), options);
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
  STRIPESOLVE_ASSIGN_OR_RETURN(
      AlignedBuffer buffer,
      AlignedBuffer::allocate(stream_buffer_bytes(m->placement(), shared_->config.import_buffer)));
  StripeStream stream{&m->placement(), m->files(), shared_->engine.get(), &buffer};
  return read_stripes(stream, consume, m->checksums(), shared_->config.verify_checksums);
}

}  // namespace stripesolve::storage
