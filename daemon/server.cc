#include "daemon/server.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <deque>
#include <filesystem>
#include <map>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp needs std::exchange

#include <boost/asio.hpp>
#include <fmt/format.h>

#include "base/logging.h"
#include "daemon/connection.h"
#include "daemon/metrics_http.h"

namespace stripesolve::daemon {

namespace asio = boost::asio;
using local = asio::local::stream_protocol;

struct Server::Impl {
  ServerConfig config;
  std::string path;
  JobManager& jobs;
  UploadStore& uploads;
  Metrics& metrics;
  ServerHooks hooks;
  asio::io_context io;
  std::unique_ptr<local::acceptor> acceptor;
  std::unique_ptr<MetricsHttp> http;  // daemon.metrics_listen; null when off
  asio::signal_set signals{io};
  asio::steady_timer tick{io};
  asio::steady_timer delivery{io};  // polls finish_when_delivered()
  std::atomic<bool> draining{false};
  std::map<Connection*, std::weak_ptr<Connection>> connections;  // I/O thread only
  std::map<uid_t, int64_t> per_uid;  // open connections by uid (I/O thread only)
  std::shared_ptr<spdlog::logger> log = logger("server");
  bool accepting = false;

  Impl(ServerConfig c, std::string p, JobManager& j, UploadStore& u, Metrics& m, ServerHooks h)
      : config(std::move(c)),
        path(std::move(p)),
        jobs(j),
        uploads(u),
        metrics(m),
        hooks(std::move(h)) {}

  void accept() {
    acceptor->async_accept([this](boost::system::error_code ec, local::socket socket) {
      if (ec) {
        if (ec != asio::error::operation_aborted)
          log->warn("accept on {} failed: {}", path, ec.message());
        if (accepting && ec != asio::error::operation_aborted) accept();
        return;
      }
      on_accept(std::move(socket));
      if (accepting) accept();
    });
  }

  void on_accept(local::socket socket) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      log->warn("SO_PEERCRED failed: {}; closing the connection", std::strerror(errno));
      return;
    }
    metrics.connections_total++;
    ConnectionEnv env{config, jobs, uploads, metrics, hooks, io, draining};
    auto conn = std::make_shared<Connection>(std::move(socket), cred.uid, cred.pid, env);
    if (static_cast<int64_t>(connections.size()) >= config.limits.max_connections) {
      metrics.connections_refused++;
      conn->refuse(Status::resource_exhausted(
                       fmt::format("too many connections ({}, limit daemon.limits.max_connections)",
                                   connections.size()))
                       .set_retryable(),
                   "wait for other clients to finish, or raise daemon.limits.max_connections");
      return;
    }
    // One user may not take every slot (issue 15 point 7). Root and the daemon's own uid are
    // trusted (they may stop the daemon anyway) and not counted.
    const bool counted = cred.uid != 0 && cred.uid != ::getuid();
    if (counted && per_uid[cred.uid] >= config.limits.max_connections_per_uid) {
      metrics.connections_refused++;
      conn->refuse(
          Status::resource_exhausted(fmt::format("too many connections from uid {} ({}, limit "
                                                 "daemon.limits.max_connections_per_uid)",
                                                 cred.uid, per_uid[cred.uid]))
              .set_retryable(),
          "close other stripesolve connections of this user, or raise "
          "daemon.limits.max_connections_per_uid");
      return;
    }
    connections[conn.get()] = conn;
    if (counted) per_uid[cred.uid]++;
    conn->set_on_close([this, counted](Connection* c) {
      if (counted) {
        auto it = per_uid.find(c->uid());
        if (it != per_uid.end() && --it->second <= 0) per_uid.erase(it);
      }
      connections.erase(c);
    });
    conn->start();
  }

  void poll_delivered(std::chrono::steady_clock::time_point deadline) {
    int64_t receiving = 0;
    for (auto& [ptr, weak] : connections) {
      if (auto c = weak.lock(); c && c->delivering()) ++receiving;
    }
    if (receiving == 0 || std::chrono::steady_clock::now() >= deadline) {
      if (receiving > 0) {
        log->warn(
            "delivery timeout (daemon.shutdown.delivery_timeout_seconds): closing {} "
            "connection(s) still receiving results",
            receiving);
      }
      close_everything();
      return;
    }
    delivery.expires_after(std::chrono::milliseconds(20));
    delivery.async_wait([this, deadline](boost::system::error_code ec) {
      if (!ec) poll_delivered(deadline);
    });
  }

  void close_everything() {
    if (accepting) {
      accepting = false;
      boost::system::error_code ec;
      acceptor->close(ec);
      ::unlink(path.c_str());
    }
    if (http) http->close();
    auto conns = connections;
    for (auto& [ptr, weak] : conns) {
      if (auto c = weak.lock()) c->close();
    }
    connections.clear();
    signals.cancel();
    tick.cancel();
    delivery.cancel();
    io.stop();
  }

  void schedule_tick() {
    tick.expires_after(
        std::chrono::milliseconds(static_cast<int64_t>(config.progress_log_seconds * 1000)));
    tick.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      if (hooks.on_tick) hooks.on_tick();
      schedule_tick();
    });
  }

  void wait_signal() {
    signals.async_wait([this](boost::system::error_code ec, int signo) {
      if (ec) return;
      if (hooks.on_signal) hooks.on_signal(signo);
      wait_signal();
    });
  }
};

Status check_socket_directory(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0)
    return Status::from_errno(errno, "stat socket directory " + dir);
  if (S_ISLNK(st.st_mode)) {
    return Status::failed_precondition(fmt::format(
        "socket directory {} is a symbolic link; give daemon.socket a path in a real directory",
        dir));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::failed_precondition(fmt::format("socket directory {} is not a directory", dir));
  }
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    return Status::failed_precondition(fmt::format(
        "socket directory {} belongs to uid {}, not to this daemon (uid {}) or root, so that user "
        "could replace the socket; remove the directory or choose another daemon.socket",
        dir, st.st_uid, ::geteuid()));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Status::failed_precondition(fmt::format(
        "socket directory {} has mode {:04o}: other users may write in it and replace the socket; "
        "make it writable by its owner only (chmod go-w) or choose another daemon.socket",
        dir, st.st_mode & 07777));
  }
  return Status::ok();
}

Server::Server(ServerConfig config, std::string socket_path, JobManager& jobs, UploadStore& uploads,
               Metrics& metrics, ServerHooks hooks)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(socket_path), jobs, uploads,
                                   metrics, std::move(hooks))) {}

Server::~Server() = default;

const std::string& Server::socket_path() const {
  return impl_->path;
}

Status Server::listen() {
  Impl& s = *impl_;
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(s.path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) {
      fs::create_directories(dir, ec);
      if (ec)
        return Status::io_error(
            fmt::format("cannot create socket directory {}: {}", dir.string(), ec.message()));
      if (::chmod(dir.c_str(), 0700) != 0)
        return Status::from_errno(errno, "chmod 0700 " + dir.string());
    }
    STRIPESOLVE_RETURN_IF_ERROR(check_socket_directory(dir.string()));
  }
  if (s.path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return Status::invalid_argument(fmt::format("socket path {} is longer than {} bytes", s.path,
                                                sizeof(sockaddr_un{}.sun_path) - 1));
  }
  struct stat st {};
  if (::lstat(s.path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Status::already_exists(
          fmt::format("{} exists and is not a socket; remove it or choose another path", s.path));
    }
    // A live daemon answers connect(); a stale file from a crash does not.
    local::socket probe(s.io);
    boost::system::error_code ec;
    probe.connect(local::endpoint(s.path), ec);
    if (!ec) {
      return Status::already_exists(fmt::format(
          "another stripesolved is listening on {}; stop it first (stripesolve daemon stop)",
          s.path));
    }
    ::unlink(s.path.c_str());
  }
  boost::system::error_code ec;
  s.acceptor = std::make_unique<local::acceptor>(s.io);
  s.acceptor->open(local(), ec);
  if (!ec) s.acceptor->bind(local::endpoint(s.path), ec);
  if (!ec) s.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::io_error(fmt::format("cannot listen on {}: {}", s.path, ec.message()));
  const int mode = parse_mode(s.config.socket_mode);
  if (::chmod(s.path.c_str(), static_cast<mode_t>(mode)) != 0) {
    return Status::from_errno(errno, fmt::format("chmod {} {}", s.config.socket_mode, s.path));
  }
  if (!s.config.socket_group.empty()) {
    group* g = ::getgrnam(s.config.socket_group.c_str());
    if (g == nullptr)
      return Status::not_found("socket_group '" + s.config.socket_group + "' does not exist");
    if (::chown(s.path.c_str(), static_cast<uid_t>(-1), g->gr_gid) != 0) {
      return Status::from_errno(errno, "chown :" + s.config.socket_group + " " + s.path);
    }
  }
  if (!s.config.metrics_listen.empty()) {
    STRIPESOLVE_ASSIGN_OR_RETURN(ListenAddress address,
                                 parse_listen_address(s.config.metrics_listen));
    s.http = std::make_unique<MetricsHttp>(
        s.io, [&s] { return s.hooks.metrics_text ? s.hooks.metrics_text() : std::string(); });
    STRIPESOLVE_RETURN_IF_ERROR(s.http->listen(address));
    s.log->info("metrics for Prometheus at {}", s.http->url());
  }
  s.accepting = true;
  s.accept();
  s.signals.add(SIGTERM);
  s.signals.add(SIGINT);
  s.signals.add(SIGHUP);
  s.wait_signal();
  s.schedule_tick();
  s.log->info("listening on {} (mode {})", s.path, s.config.socket_mode);
  return Status::ok();
}

void Server::run() {
  impl_->io.run();
}

void Server::post(std::function<void()> fn) {
  asio::post(impl_->io, std::move(fn));
}

void Server::drain() {
  impl_->draining = true;
  impl_->log->info(
      "draining: {} stays open for status, watch, result and cancel; new work is refused",
      impl_->path);
}

void Server::finish_when_delivered(std::chrono::steady_clock::time_point deadline) {
  asio::post(impl_->io, [s = impl_.get(), deadline] { s->poll_delivered(deadline); });
}

void Server::shutdown() {
  asio::post(impl_->io, [s = impl_.get()] { s->close_everything(); });
}

std::string Server::metrics_url() const {
  return impl_->http ? impl_->http->url() : std::string();
}

int64_t Server::open_connections() const {
  return impl_->metrics.connections_open.load();
}

}  // namespace stripesolve::daemon
