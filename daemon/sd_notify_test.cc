#include "daemon/sd_notify.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include <gtest/gtest.h>

namespace stripesolve::daemon {
namespace {

TEST(SdNotifyTest, SendsOneDatagramToNotifySocket) {
  const std::string path = "/tmp/sdnotify-test-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  int fd = ::socket(AF_UNIX, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  ASSERT_TRUE(sd_notify("READY=1\nSTATUS=ok").is_ok());
  char buf[256] = {};
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  EXPECT_EQ(std::string(buf, n), "READY=1\nSTATUS=ok");
  ::unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(sd_notify("READY=1").is_ok());  // no systemd: no-op
  EXPECT_EQ(sd_notify_to("relative", "X").message(),
            "NOTIFY_SOCKET 'relative' is neither a path nor @abstract");
  ::close(fd);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace stripesolve::daemon
