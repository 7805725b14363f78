// Files of the store: 4 KiB-aligned buffers, data files opened for O_DIRECT (with a buffered
// fallback where the filesystem refuses it), preallocation, free space, and atomically replaced
// small files (manifests, blobs).
//
// Every error names the path and errno. Thread-safety: plain functions; a DataFile is owned by
// one object and its descriptor may be used by several threads through an IoEngine.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace stripesolve::storage {

// A zero-filled heap buffer whose address and size are multiples of 4 KiB (O_DIRECT). Move-only.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  static Result<AlignedBuffer> allocate(uint64_t bytes);  // size rounded up to 4 KiB
  std::byte* data() const { return data_.get(); }
  uint64_t size() const { return size_; }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, Free> data_;
  uint64_t size_ = 0;
};

// An open file with its path; closes on destruction. Move-only.
class DataFile {
 public:
  DataFile() = default;
  DataFile(int fd, std::string path, bool direct)
      : fd_(fd), path_(std::move(path)), direct_(direct) {}
  DataFile(DataFile&& other) noexcept;
  DataFile& operator=(DataFile&& other) noexcept;
  ~DataFile();

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  bool direct() const { return direct_; }  // opened with O_DIRECT
  Status sync() const;                     // fdatasync

 private:
  int fd_ = -1;
  std::string path_;
  bool direct_ = false;
};

// The open(2) used by open_data_file; tests pass one that refuses O_DIRECT.
using OpenCall = int (*)(const char* path, int flags, mode_t mode);

// Opens `path` with `flags` (O_RDONLY / O_RDWR, O_CREAT...), adding O_DIRECT when `want_direct`.
// If the filesystem refuses O_DIRECT (EINVAL, as tmpfs did before Linux 6.6), logs a warning once
// per process and opens without it: the data is then correct but goes through the page cache.
// A file it creates gets `mode` (the store's file mode, StoreShared::file_mode), whatever the
// umask.
Result<DataFile> open_data_file(const std::string& path, int flags, bool want_direct,
                                OpenCall call = nullptr, mode_t mode = 0600);

// How a new object takes its disk space (ObjectWriter::begin, MatrixStore::create_factor).
enum class DiskSpace {
  kReserved,  // checked against the filesystems (check_free_space_for), every block allocated
  kSparse,    // files sized only: blocks taken when written (a write may then meet kNoSpace)
};

// Reserves `bytes` for the file (fallocate; ftruncate where the filesystem cannot preallocate).
Status preallocate(const DataFile& file, uint64_t bytes);
// Sizes the file to `bytes` without reserving its blocks (ftruncate: a sparse file reading as
// zeros; blocks are taken when written, and such a write may fail with kNoSpace).
Status set_size(const DataFile& file, uint64_t bytes);

// Bytes available to unprivileged users on the filesystem holding `dir`, and its device id.
struct FreeSpace {
  uint64_t bytes = 0;
  uint64_t device = 0;
};
Result<FreeSpace> free_space(const std::string& dir);

// Writes `content` to `path` atomically: `path`.tmp, fsync, rename, fsync of the directory.
// On failure the temporary file is removed and `path` is unchanged. The file gets `mode`.
Status write_file_atomically(const std::string& path, std::string_view content, mode_t mode = 0600);

// Reads a whole file of at most `max_bytes`.
Result<std::string> read_whole_file(const std::string& path, uint64_t max_bytes);

// Reads at most the first `max_bytes` of a file (less if it is shorter).
Result<std::string> read_whole_file_prefix(const std::string& path, uint64_t max_bytes);

// One level, with `mode` whatever the umask; EEXIST is kAlreadyExists.
Status make_directory(const std::string& path, mode_t mode = 0700);
Status sync_directory(const std::string& path);
// Removes a file or directory tree; a missing path is not an error.
Status remove_tree(const std::string& path);
// The names in a folder, sorted; none when it cannot be read.
std::vector<std::string> list_dir(const std::string& dir);
bool file_exists(const std::string& path);

}  // namespace stripesolve::storage
