// Integration: daemon.metrics_listen serves the metrics over HTTP on loopback, and nothing else.
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <string>

#include "tests/integration/daemon_fixture.h"

namespace stripesolve::testing {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// Sends `request` to host:port and reads until the daemon closes the connection.
std::string exchange(const std::string& host, const std::string& port, const std::string& request) {
  asio::io_context io;
  tcp::socket socket(io);
  asio::connect(socket, tcp::resolver(io).resolve(host, port));
  asio::write(socket, asio::buffer(request));
  std::string reply;
  boost::system::error_code ec;
  asio::read(socket, asio::dynamic_buffer(reply), ec);  // until EOF
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
  EXPECT_EQ(exchange("127.0.0.1", port, "POST /metrics HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 405", 0), 0u);
  const std::string head = exchange("127.0.0.1", port, "HEAD /metrics HTTP/1.0\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_EQ(head.find("# HELP"), std::string::npos) << head;
  // A head that never ends within 8 KiB gets no reply, and the daemon goes on serving.
  EXPECT_EQ(exchange("127.0.0.1", port, "GET /metrics HTTP/1.1\r\nX: " + std::string(9000, 'a')), "");
  EXPECT_EQ(exchange("127.0.0.1", port, "GET /metrics HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
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
