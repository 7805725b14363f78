#include "storage/progress_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "storage/checksum.h"
#include "storage/data_file.h"

namespace stripesolve::storage {

namespace {

constexpr uint32_t kRecordMagic = 0x52505353;  // "SSPR" little-endian
constexpr size_t kFrameBytes = 12;             // magic, length, CRC

void put_u32(std::vector<std::byte>& out, uint32_t v) {
  for (int k = 0; k < 4; ++k) out.push_back(static_cast<std::byte>((v >> (8 * k)) & 0xff));
}

uint32_t get_u32(const std::byte* p) {
  uint32_t v = 0;
  for (int k = 0; k < 4; ++k) v |= static_cast<uint32_t>(p[k]) << (8 * k);
  return v;
}

}  // namespace

std::vector<std::byte> ProgressLog::frame(std::span<const std::byte> payload) {
  std::vector<std::byte> out;
  out.reserve(payload.size() + kFrameBytes);
  put_u32(out, kRecordMagic);
  put_u32(out, static_cast<uint32_t>(payload.size()));
  out.insert(out.end(), payload.begin(), payload.end());
  put_u32(out, crc32c(out));
  return out;
}

Result<std::unique_ptr<ProgressLog>> ProgressLog::open(const std::string& path, unsigned mode,
                                                       std::vector<Record>* records,
                                                       uint64_t* dropped_bytes) {
  bool created = true;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, static_cast<mode_t>(mode));
  if (fd < 0 && errno == EEXIST) {
    created = false;
    fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  }
  if (fd < 0) return Status::from_errno(errno, "open " + path);
  std::unique_ptr<ProgressLog> log(new ProgressLog(fd, path));
  if (created) {
    // The new name must survive a crash before the first record does.
    STRIPESOLVE_RETURN_IF_ERROR(sync_directory(path.substr(0, path.rfind('/'))));
  }
  std::vector<std::byte> bytes;
  for (;;) {
    std::byte chunk[65536];
    const ssize_t got = ::pread(fd, chunk, sizeof(chunk), static_cast<off_t>(bytes.size()));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Status::from_errno(errno, "read " + path);
    if (got == 0) break;
    bytes.insert(bytes.end(), chunk, chunk + got);
  }
  size_t pos = 0;
  while (bytes.size() - pos >= kFrameBytes) {
    const std::byte* p = bytes.data() + pos;
    const uint64_t len = get_u32(p + 4);
    if (get_u32(p) != kRecordMagic || len > bytes.size() - pos - kFrameBytes) break;
    if (crc32c_extend(0, p, 8 + len) != get_u32(p + 8 + len)) break;
    if (records != nullptr) records->emplace_back(p + 8, p + 8 + len);
    pos += kFrameBytes + len;
  }
  if (dropped_bytes != nullptr) *dropped_bytes = bytes.size() - pos;
  {
    MutexLock lock(log->mu_);  // not shared yet: for the analysis
    log->end_ = pos;
  }
  if (pos != bytes.size()) {
    if (::ftruncate(fd, static_cast<off_t>(pos)) != 0)
      return Status::from_errno(errno, "truncate " + path);
    if (::fdatasync(fd) != 0) return Status::from_errno(errno, "fdatasync " + path);
  }
  return log;
}

ProgressLog::~ProgressLog() {
  ::close(fd_);
}

Status ProgressLog::append(std::span<const std::byte> payload) {
  return append(std::vector<Record>{Record(payload.begin(), payload.end())});
}

Status ProgressLog::append(const std::vector<Record>& payloads) {
  std::vector<std::byte> record;
  for (const Record& p : payloads) {
    const std::vector<std::byte> framed = frame(p);
    record.insert(record.end(), framed.begin(), framed.end());
  }
  MutexLock lock(mu_);
  size_t done = 0;
  while (done < record.size()) {
    const ssize_t n =
        ::pwrite(fd_, record.data() + done, record.size() - done, static_cast<off_t>(end_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::from_errno(errno, "write " + path_);
    done += static_cast<size_t>(n);
  }
  if (::fdatasync(fd_) != 0) return Status::from_errno(errno, "fdatasync " + path_);
  end_ += record.size();
  return Status::ok();
}

}  // namespace stripesolve::storage
