#include "storage/data_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "base/logging.h"
#include "base/read_fd.h"
#include "base/unique_fd.h"
#include "storage/placement.h"

namespace stripesolve::storage {

void AlignedBuffer::Free::operator()(std::byte* p) const {
  std::free(p);
}

Result<AlignedBuffer> AlignedBuffer::allocate(uint64_t bytes) {
  AlignedBuffer b;
  b.size_ = align_up(bytes == 0 ? 1 : bytes);
  void* p = std::aligned_alloc(kAlignment, b.size_);
  if (p == nullptr) {
    return Status::resource_exhausted("cannot allocate an aligned I/O buffer of " +
                                      std::to_string(b.size_) + " bytes");
  }
  std::memset(p, 0, b.size_);
  b.data_.reset(static_cast<std::byte*>(p));
  return b;
}

DataFile::DataFile(DataFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), direct_(other.direct_) {}

DataFile& DataFile::operator=(DataFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    direct_ = other.direct_;
  }
  return *this;
}

DataFile::~DataFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status DataFile::sync() const {
  if (::fdatasync(fd_) != 0) return Status::from_errno(errno, "fdatasync " + path_);
  return Status::ok();
}

namespace {

// The umask may have taken bits `mode` asks for (a group's read bit).
Status set_mode(int fd, const std::string& path, mode_t mode) {
  if ((mode & 077) != 0 && ::fchmod(fd, mode) != 0) {
    return Status::from_errno(errno, fmt::format("chmod {:o} {}", mode, path));
  }
  return Status::ok();
}

}  // namespace

Result<DataFile> open_data_file(const std::string& path, int flags, bool want_direct, OpenCall call,
                                mode_t mode) {
  if (call == nullptr) call = [](const char* p, int f, mode_t m) { return ::open(p, f, m); };
  flags |= O_CLOEXEC;
  if (want_direct) {
    const int fd = call(path.c_str(), flags | O_DIRECT, mode);
    if (fd >= 0) {
      DataFile f(fd, path, true);
      if ((flags & O_CREAT) != 0) STRIPESOLVE_RETURN_IF_ERROR(set_mode(fd, path, mode));
      return f;
    }
    if (errno != EINVAL) return Status::from_errno(errno, "open " + path);
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      logger("storage")->warn("the filesystem of {} refuses O_DIRECT; using buffered I/O", path);
    }
  }
  const int fd = call(path.c_str(), flags, mode);
  if (fd < 0) return Status::from_errno(errno, "open " + path);
  DataFile f(fd, path, false);
  if ((flags & O_CREAT) != 0) STRIPESOLVE_RETURN_IF_ERROR(set_mode(fd, path, mode));
  return f;
}

Status preallocate(const DataFile& file, uint64_t bytes) {
  if (bytes == 0) return Status::ok();
  const int rc = ::posix_fallocate(file.fd(), 0, static_cast<off_t>(bytes));
  if (rc == 0) return Status::ok();
  if (rc != EOPNOTSUPP && rc != ENOSYS) {
    return Status::from_errno(rc,
                              "preallocate " + std::to_string(bytes) + " bytes for " + file.path());
  }
  return set_size(file, bytes);
}

Status set_size(const DataFile& file, uint64_t bytes) {
  if (::ftruncate(file.fd(), static_cast<off_t>(bytes)) != 0) {
    return Status::from_errno(errno, "truncate " + file.path() + " to " + std::to_string(bytes));
  }
  return Status::ok();
}

Result<FreeSpace> free_space(const std::string& dir) {
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0) return Status::from_errno(errno, "statvfs " + dir);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return Status::from_errno(errno, "stat " + dir);
  return FreeSpace{static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize,
                   static_cast<uint64_t>(st.st_dev)};
}

Status sync_directory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::from_errno(errno, "open directory " + path);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return Status::from_errno(err, "fsync directory " + path);
  return Status::ok();
}

Status write_file_atomically(const std::string& path, std::string_view content, mode_t mode) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::from_errno(errno, "create " + tmp);
  Status st = set_mode(fd, tmp, mode);
  size_t done = 0;
  while (st.is_ok() && done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      st = Status::from_errno(n < 0 ? errno : EIO, "write " + tmp);
    else
      done += static_cast<size_t>(n);
  }
  if (st.is_ok() && ::fsync(fd) != 0) st = Status::from_errno(errno, "fsync " + tmp);
  ::close(fd);
  if (st.is_ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = Status::from_errno(errno, "rename " + tmp + " to " + path);
  }
  if (!st.is_ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return sync_directory(std::filesystem::path(path).parent_path().string());
}

namespace {

// The first `limit` bytes of the file (fewer if it is shorter).
Result<std::string> read_up_to(const std::string& path, uint64_t limit) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::from_errno(errno, "open " + path);
  return read_fd(fd.get(), path, limit);
}

}  // namespace

Result<std::string> read_whole_file(const std::string& path, uint64_t max_bytes) {
  STRIPESOLVE_ASSIGN_OR_RETURN(
      std::string out, read_up_to(path, max_bytes == UINT64_MAX ? max_bytes : max_bytes + 1));
  if (out.size() > max_bytes) {
    return Status::invalid_argument(path + " is larger than " + std::to_string(max_bytes) +
                                    " bytes");
  }
  return out;
}

Result<std::string> read_whole_file_prefix(const std::string& path, uint64_t max_bytes) {
  return read_up_to(path, max_bytes);
}

Status make_directory(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0) return Status::from_errno(errno, "mkdir " + path);
  if ((mode & 077) != 0 && ::chmod(path.c_str(), mode) != 0) {
    return Status::from_errno(errno, fmt::format("chmod {:o} {}", mode, path));
  }
  return Status::ok();
}

Status remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return Status::from_errno(ec.value(), "remove " + path);
  return Status::ok();
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace stripesolve::storage
