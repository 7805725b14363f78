#include "protocol/socket_path.h"

#include <stdlib.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace stripesolve::protocol {
namespace {

TEST(SocketPathTest, ResolutionOrder) {
  ::setenv("STRIPESOLVE_SOCKET", "/x/y.sock", 1);
  EXPECT_EQ(default_socket_path(), "/x/y.sock");
  EXPECT_EQ(resolve_socket_path("/flag.sock"), "/flag.sock");
  ::unsetenv("STRIPESOLVE_SOCKET");
  ::setenv("XDG_RUNTIME_DIR", "/run/user/7", 1);
  EXPECT_EQ(default_socket_path(), "/run/user/7/stripesolve/stripesolved.sock");
  ::unsetenv("XDG_RUNTIME_DIR");
  EXPECT_EQ(default_socket_path(),
            "/tmp/stripesolve-" + std::to_string(::getuid()) + "/stripesolved.sock");
}

}  // namespace
}  // namespace stripesolve::protocol
