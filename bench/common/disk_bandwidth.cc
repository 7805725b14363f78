#include "bench/common/disk_bandwidth.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "base/units.h"

namespace stripesolve::bench {

nlohmann::json disk_bandwidth(const std::string& dir, uint64_t total) {
  const uint64_t request = 16 * kMiB;
  const int threads = 8;
  total = std::max<uint64_t>(request, total / request * request);
  const std::string path = dir + "/disk_bandwidth.tmp";
  nlohmann::json out = {
      {"path", path}, {"bytes", total}, {"request_bytes", request}, {"threads", threads}};
  bool direct = true;
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_DIRECT, 0600);
  if (fd < 0 && errno == EINVAL) {
    direct = false;
    fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  }
  if (fd < 0) {
    out["error"] = "open " + path + ": " + std::strerror(errno);
    return out;
  }
  out["direct_io"] = direct;
  const uint64_t chunks = total / request;
  std::vector<void*> buffers(threads, nullptr);
  for (auto& p : buffers) {
    if (posix_memalign(&p, 4096, request) != 0) {
      ::close(fd);
      out["error"] = "posix_memalign failed";
      return out;
    }
    std::mt19937_64 gen(reinterpret_cast<uintptr_t>(p));
    auto* w = static_cast<uint64_t*>(p);
    for (uint64_t i = 0; i < request / 8; ++i) w[i] = gen();
  }
  std::atomic<bool> failed{false};
  std::atomic<int> failed_errno{0};
  auto pass = [&](int file, bool write) {
    std::atomic<uint64_t> next{0};
    std::vector<std::thread> pool;
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (uint64_t c = next++; c < chunks && !failed; c = next++) {
          const off_t off = static_cast<off_t>(c * request);
          const ssize_t r = write ? ::pwrite(file, buffers[t], request, off)
                                  : ::pread(file, buffers[t], request, off);
          if (r != static_cast<ssize_t>(request)) {
            failed_errno = r < 0 ? errno : EIO;  // a short transfer counts as an I/O error
            failed = true;
          }
        }
      });
    }
    for (auto& th : pool) th.join();
    if (write && ::fdatasync(file) != 0) {
      failed_errno = errno;
      failed = true;
    }
    return double(total) /
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const double write_bw = pass(fd, true);
  ::close(fd);
  if (failed) {
    out["error"] = std::string("write failed: ") + std::strerror(failed_errno);
  } else {
    out["write_bytes_per_second"] = write_bw;
    fd = ::open(path.c_str(), O_RDONLY | (direct ? O_DIRECT : 0));
    if (fd < 0) {
      out["error"] = "reopen " + path + ": " + std::strerror(errno);
    } else {
      if (!direct) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      double read_bw = 0;
      nlohmann::json passes = nlohmann::json::array();
      for (int k = 0; k < 2 && !failed; ++k) {
        const double bw = pass(fd, false);
        passes.push_back(bw);
        read_bw = std::max(read_bw, bw);
      }
      ::close(fd);
      if (failed) {
        out["error"] = std::string("read failed: ") + std::strerror(failed_errno);
      } else {
        out["read_bytes_per_second"] = read_bw;
        out["read_passes_bytes_per_second"] = passes;
      }
    }
  }
  for (auto* p : buffers) std::free(p);
  std::filesystem::remove(path);
  return out;
}

}  // namespace stripesolve::bench
