// The optional Prometheus scrape endpoint (`daemon.metrics_listen`, off by default): plain
// HTTP/1.x on a loopback address, `GET /metrics` answered with the same text as the protocol's
// `metrics` request. Nothing else is served (404, or 405 for a method other than GET/HEAD);
// every connection gets one reply and is closed.
//
// Bounds: a request head is read up to 8 KiB within 5 s, else the connection is closed; at
// most 16 connections are served at once (others are closed at accept). Only loopback
// addresses are accepted in the configuration: the metrics name jobs and users' uids, so they
// stay on the host (a scraper elsewhere goes through a local agent or an SSH tunnel).
//
// Threads: everything runs on the server's I/O thread (the io_context passed in).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "base/status.h"

namespace stripesolve::daemon {

struct ListenAddress {
  std::string host;   // "127.0.0.1", "::1"
  uint16_t port = 0;  // 0: any free port (tests); the bound one is in MetricsHttp::url()
};

// "127.0.0.1:9464", "localhost:9464" or "[::1]:9464"; InvalidArgument naming what is wrong for
// anything else, a non-loopback host included.
Result<ListenAddress> parse_listen_address(const std::string& text);

class MetricsHttp {
 public:
  MetricsHttp(boost::asio::io_context& io, std::function<std::string()> render);
  ~MetricsHttp();
  MetricsHttp(const MetricsHttp&) = delete;
  MetricsHttp& operator=(const MetricsHttp&) = delete;

  Status listen(const ListenAddress& address);
  std::string url() const;  // "http://127.0.0.1:9464/metrics"
  void close();             // stops accepting; open exchanges end on their own

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace stripesolve::daemon
