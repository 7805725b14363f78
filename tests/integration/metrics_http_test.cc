// Integration: daemon.metrics_listen serves the metrics over HTTP on loopback, and nothing else.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "tests/integration/daemon_fixture.h"

namespace stripesolve::testing {
namespace {

// Sends `request` to host:port and reads until the daemon closes the connection (plain POSIX
// sockets: Asio's fences are not modelled by ThreadSanitizer, see daemon/CMakeLists.txt).
std::string exchange(const std::string& host, const std::string& port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(std::stoi(port)));
  EXPECT_EQ(::inet_pton(AF_INET, host.c_str(), &address.sin_addr), 1);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
    size_t sent = 0;
    while (sent < request.size()) {
      const ssize_t k = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (k <= 0) break;
      sent += static_cast<size_t>(k);
    }
    char buf[4096];
    for (ssize_t k; (k = ::read(fd, buf, sizeof buf)) > 0;)
      reply.append(buf, static_cast<size_t>(k));
  } else {
    ADD_FAILURE() << "connect to " << host << ":" << port << " failed";
  }
  ::close(fd);
  return reply;
}

TEST(MetricsHttp, ServesPrometheusTextOnLoopback) {
  DaemonFixture d([](daemon::DaemonConfig& c) { c.server.metrics_listen = "127.0.0.1:0"; });
  auto c = d.connect();
  auto status = c->call(protocol::MessageType::kDaemonStatus, nlohmann::json::object());
  ASSERT_TRUE(status.is_ok()) << status.status().to_string();
  const std::string url = (*status)["metrics_url"];
  ASSERT_EQ(url.rfind("http://127.0.0.1:", 0), 0u) << url;
  const std::string port = url.substr(17, url.find('/', 17) - 17);

  const std::string ok = exchange("127.0.0.1", port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << ok;
  EXPECT_NE(ok.find("\r\n\r\n# HELP stripesolve_build_info"), std::string::npos) << ok;
  EXPECT_NE(ok.find("\nstripesolve_connections_total "), std::string::npos) << ok;

  EXPECT_EQ(exchange("127.0.0.1", port, "GET / HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(exchange("127.0.0.1", port, "POST /metrics HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 405", 0),
            0u);
  const std::string head = exchange("127.0.0.1", port, "HEAD /metrics HTTP/1.0\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_EQ(head.find("# HELP"), std::string::npos) << head;
  // A head that never ends within 8 KiB gets no reply, and the daemon goes on serving.
  EXPECT_EQ(exchange("127.0.0.1", port, "GET /metrics HTTP/1.1\r\nX: " + std::string(9000, 'a')),
            "");
  EXPECT_EQ(exchange("127.0.0.1", port, "GET /metrics HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 200", 0),
            0u);
}

TEST(MetricsHttp, OffByDefault) {
  DaemonFixture d;
  auto c = d.connect();
  auto status = c->call(protocol::MessageType::kDaemonStatus, nlohmann::json::object());
  ASSERT_TRUE(status.is_ok());
  EXPECT_EQ((*status)["metrics_url"], "");
}

}  // namespace
}  // namespace stripesolve::testing
