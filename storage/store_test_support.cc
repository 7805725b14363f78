#include "storage/store_test_support.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <mutex>

#include <gtest/gtest.h>

#include "storage/data_file.h"
#include "storage/engine_select.h"

namespace stripesolve::storage {

namespace {
// Removes the test directories when the test binary exits.
struct TempDirs {
  std::mutex mu;
  std::vector<std::string> dirs;
  ~TempDirs() {
    std::error_code ec;
    for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
  }
};
TempDirs& temp_dirs() {
  static TempDirs dirs;
  return dirs;
}
}  // namespace

std::string make_temp_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  std::string dir = ::testing::TempDir() + "/storage_test." + std::to_string(::getpid()) + "." +
                    std::to_string(counter++) + "." + tag;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::lock_guard lock(temp_dirs().mu);
  temp_dirs().dirs.push_back(dir);
  return dir;
}

StoreConfig temp_store_config(const std::string& tag, int paths, const std::string& engine) {
  StoreConfig c;
  const std::string root = make_temp_dir(tag);
  for (int p = 0; p < paths; ++p) c.paths.push_back(root + "/ssd" + std::to_string(p));
  c.io_engine = engine;
  c.stripe_rows = 64;
  c.round_robin_levels = 3;
  c.min_segment_bytes = 4096;
  c.queue_depth = 8;
  c.request_bytes = 8192;
  c.write_request_bytes = 8192;
  c.import_buffer = 1 << 20;
  c.free_space_reserve = 0;
  return c;
}

Result<std::vector<double>> read_part_values(StripedMatrix& m, int64_t I, int64_t c0) {
  const PartLayout layout = m.part_layout(I, c0);
  STRIPESOLVE_ASSIGN_OR_RETURN(AlignedBuffer buf, AlignedBuffer::allocate(layout.buffer_bytes));
  STRIPESOLVE_RETURN_IF_ERROR(m.read_part(I, c0, buf.data()));
  std::vector<double> v(layout.data_bytes / 8);
  if (layout.data_bytes > 0)
    std::memcpy(v.data(), buf.data() + layout.data_offset, layout.data_bytes);
  return v;
}

Status write_part_values(StripedMatrix& m, int64_t I, int64_t c0, const std::vector<double>& v) {
  const PartLayout layout = m.part_layout(I, c0);
  STRIPESOLVE_ASSIGN_OR_RETURN(AlignedBuffer buf, AlignedBuffer::allocate(layout.buffer_bytes));
  if (layout.data_offset > 0) STRIPESOLVE_RETURN_IF_ERROR(m.read_part(I, c0, buf.data()));
  if (layout.data_bytes > 0)
    std::memcpy(buf.data() + layout.data_offset, v.data(), layout.data_bytes);
  return m.write_part(I, c0, buf.data());
}

Status flip_bit(const std::string& path, uint64_t offset) {
  const int fd = ::open(path.c_str(), O_RDWR);
  if (fd < 0) {
    return Status::io_error("open " + path + ": " +
                            std::strerror(errno));  // NOLINT(concurrency-mt-unsafe): tests
  }
  char byte = 0;
  bool ok = ::pread(fd, &byte, 1, static_cast<off_t>(offset)) == 1;
  byte ^= 0x10;
  ok = ok && ::pwrite(fd, &byte, 1, static_cast<off_t>(offset)) == 1;
  ::close(fd);
  return ok ? Status::ok() : Status::io_error("flipping a bit of " + path);
}

std::string store_case_name(const ::testing::TestParamInfo<StoreCase>& info) {
  return (info.param.engine == "pread" ? "pread" : "uring") + std::to_string(info.param.paths);
}

void StoreCaseTest::open_store(const std::string& tag) {
  if (GetParam().engine == "io_uring") {
    const Status usable = io_uring_usable();
    if (!usable.is_ok()) GTEST_SKIP() << "io_uring unavailable: " << usable.message();
  }
  config_ = temp_store_config(tag, GetParam().paths, GetParam().engine);
  auto s = MatrixStore::open(config_);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  store_ = std::move(s).value();
}

}  // namespace stripesolve::storage
