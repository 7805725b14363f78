#include "daemon/metrics_http.h"

#include <charconv>
#include <chrono>
#include <istream>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "base/logging.h"

namespace stripesolve::daemon {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

constexpr size_t kMaxHeadBytes = 8 * 1024;
constexpr auto kHeadTimeout = std::chrono::seconds(5);
constexpr int kMaxExchanges = 16;

std::string response(int code, std::string_view reason, std::string_view content_type,
                     const std::string& body, bool head_only) {
  std::string out = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", code,
      reason, content_type, body.size());
  if (!head_only) out += body;
  return out;
}

}  // namespace

Result<ListenAddress> parse_listen_address(const std::string& text) {
  const auto bad = [&](std::string_view why) {
    return Status::invalid_argument(fmt::format(
        "metrics_listen '{}': {} (expected 127.0.0.1:PORT, localhost:PORT or [::1]:PORT)", text,
        why));
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 >= text.size()) return bad("no port");
  std::string host = text.substr(0, colon);
  const std::string port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535) {
    return bad("the port is not a number in [0, 65535]");
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  boost::system::error_code error;
  const auto address = asio::ip::make_address(host, error);
  if (error) return bad("the host is not an IP address or localhost");
  if (!address.is_loopback()) return bad("only a loopback address may serve the metrics");
  return ListenAddress{address.to_string(), static_cast<uint16_t>(port)};
}

struct MetricsHttp::Impl : std::enable_shared_from_this<MetricsHttp::Impl> {
  asio::io_context& io;
  std::function<std::string()> render;
  tcp::acceptor acceptor{io};
  int exchanges = 0;  // open connections (I/O thread only)
  std::shared_ptr<spdlog::logger> log = logger("server");

  Impl(asio::io_context& i, std::function<std::string()> r) : io(i), render(std::move(r)) {}

  // One request and its reply on one connection.
  struct Exchange : std::enable_shared_from_this<Exchange> {
    std::shared_ptr<Impl> owner;
    tcp::socket socket;
    asio::streambuf head{kMaxHeadBytes};
    asio::steady_timer timer;
    std::string reply;

    Exchange(std::shared_ptr<Impl> o, tcp::socket s)
        : owner(std::move(o)), socket(std::move(s)), timer(owner->io) {}
    ~Exchange() { owner->exchanges--; }

    void start() {
      timer.expires_after(kHeadTimeout);
      timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (!ec) {
          boost::system::error_code ignored;
          self->socket.close(ignored);
        }
      });
      asio::async_read_until(socket, head, "\r\n\r\n",
                             [self = shared_from_this()](boost::system::error_code ec, size_t) {
                               if (ec)
                                 return self->end();  // closed, timed out, or a head over 8 KiB
                               self->answer();
                             });
    }

    void answer() {
      std::istream in(&head);
      std::string method, target, version;
      in >> method >> target >> version;
      const bool head_only = method == "HEAD";
      const std::string path = target.substr(0, target.find('?'));
      if (method != "GET" && !head_only) {
        reply = response(405, "Method Not Allowed", "text/plain", "only GET and HEAD\n", false);
      } else if (path != "/metrics") {
        reply =
            response(404, "Not Found", "text/plain", "the metrics are at /metrics\n", head_only);
      } else {
        reply = response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", owner->render(),
                         head_only);
      }
      asio::async_write(
          socket, asio::buffer(reply),
          [self = shared_from_this()](boost::system::error_code, size_t) { self->end(); });
    }

    void end() {
      boost::system::error_code ignored;
      timer.cancel();
      socket.shutdown(tcp::socket::shutdown_both, ignored);
      socket.close(ignored);
    }
  };

  void accept() {
    acceptor.async_accept(
        [self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
          if (ec) {
            if (ec != asio::error::operation_aborted && self->acceptor.is_open()) self->accept();
            return;
          }
          if (self->exchanges >= kMaxExchanges) {
            boost::system::error_code ignored;
            socket.close(ignored);
          } else {
            self->exchanges++;
            std::make_shared<Exchange>(self, std::move(socket))->start();
          }
          self->accept();
        });
  }
};

MetricsHttp::MetricsHttp(asio::io_context& io, std::function<std::string()> render)
    : impl_(std::make_shared<Impl>(io, std::move(render))) {}

MetricsHttp::~MetricsHttp() {
  close();
}

Status MetricsHttp::listen(const ListenAddress& address) {
  boost::system::error_code ec;
  const tcp::endpoint endpoint(asio::ip::make_address(address.host, ec), address.port);
  if (!ec) impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::io_error(
        fmt::format("cannot serve metrics on {}:{}: {}", address.host, address.port, ec.message()));
  }
  impl_->accept();
  return Status::ok();
}

std::string MetricsHttp::url() const {
  boost::system::error_code ec;
  const auto endpoint = impl_->acceptor.local_endpoint(ec);
  if (ec) return std::string();
  const std::string host = endpoint.address().to_string();
  return fmt::format("http://{}:{}/metrics", endpoint.address().is_v6() ? "[" + host + "]" : host,
                     endpoint.port());
}

void MetricsHttp::close() {
  boost::system::error_code ignored;
  impl_->acceptor.close(ignored);
}

}  // namespace stripesolve::daemon
