#include "daemon/client_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace stripesolve::daemon {
namespace {

constexpr size_t kBytes = 1 << 20;

struct TempFile {
  std::string path;
  int fd = -1;
  TempFile() {
    path = ::testing::TempDir() + "/mapping_" + std::to_string(::getpid()) + "_XXXXXX";
    fd = ::mkstemp(path.data());
    std::vector<char> bytes(kBytes, 7);
    EXPECT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  ~TempFile() {
    ::close(fd);
    ::unlink(path.c_str());
  }
};

TEST(ClientMapping, ReadsTheFileInPlace) {
  TempFile f;
  auto m = ClientMapping::map(f.fd, kBytes, false);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(m->data()[kBytes - 1], 7);
  EXPECT_FALSE(m->truncated());
}

TEST(ClientMapping, ATruncatedInputIsSeenAndTheProcessLives) {
  TempFile f;
  auto m = ClientMapping::map(f.fd, kBytes, false);
  ASSERT_TRUE(m.is_ok());
  ASSERT_EQ(::ftruncate(f.fd, 4096), 0);         // the client shortens its file during the job
  volatile char beyond = m->data()[kBytes / 2];  // SIGBUS, absorbed: reads zero
  EXPECT_EQ(beyond, 0);
  EXPECT_TRUE(m->truncated());
  EXPECT_EQ(m->data()[100], 7);  // before the new end: still the file
}

TEST(ClientMapping, ATruncatedOutputIsSeen) {
  TempFile f;
  auto m = ClientMapping::map(f.fd, kBytes, true);
  ASSERT_TRUE(m.is_ok());
  m->data()[10] = 42;
  ASSERT_EQ(::ftruncate(f.fd, 0), 0);
  m->data()[kBytes - 8] = 1;  // would have killed the daemon
  EXPECT_TRUE(m->truncated());
}

TEST(ClientMapping, AFaultOutsideClientMappingsStillEndsTheProcess) {
  TempFile f;
  auto m = ClientMapping::map(f.fd, kBytes, false);  // installs the handler
  ASSERT_TRUE(m.is_ok());
  EXPECT_DEATH(
      {
        char* p = static_cast<char*>(::mmap(nullptr, kBytes, PROT_READ, MAP_PRIVATE, f.fd, 0));
        if (::ftruncate(f.fd, 0) != 0) std::abort();
        volatile char c = p[kBytes / 2];
        (void)c;
      },
      "");
  EXPECT_DEATH(std::raise(SIGBUS), "");
}

}  // namespace
}  // namespace stripesolve::daemon
