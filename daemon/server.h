// The socket server: Boost.Asio on a Unix-domain stream socket (docs/protocol.md).
//
// Guarantees: the socket's directory is created 0700 (if missing), and refused unless it is a
// real directory owned by the daemon's uid (or root) that nobody else may write (another user
// could otherwise replace the socket and receive the next client's hello; issue 15 point 9). The
// socket gets the configured mode (0600 by default); a stale socket file (nobody listening) is
// replaced, a live one is an error. Each connection's peer uid comes from SO_PEERCRED and every
// request acts as that uid. One write is in flight per connection; result chunks are produced only
// when the previous write completed (pull), other frames queue up to limits.max_queued_bytes.
// Malformed input gets one error frame and that connection is closed; nothing else is affected.
//
// Draining (issue 15 point 8): drain() keeps the socket open - status, watch, result and cancel
// keep working, uploads and submits get kDrainingMessage - and finish_when_delivered() closes
// everything only once no connection is still receiving: no watch or result stream open, nothing
// left to write, no job submitted there whose end it was not yet told (unless it was cancelled),
// or the deadline passed.
//
// Threading: run() drives everything on the calling thread (one I/O thread). post(), drain(),
// finish_when_delivered() and shutdown() may be called from any thread. Asio stays inside
// server.cc.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "daemon/job_manager.h"
#include "daemon/metrics.h"
#include "daemon/server_config.h"
#include "daemon/uploads.h"

namespace stripesolve::daemon {

// What the server asks of the daemon around it.
struct ServerHooks {
  std::function<nlohmann::json()> daemon_status;  // daemon_status reply
  std::function<std::string()> metrics_text;      // Prometheus text
  // The store's matrices (a query, answered on the I/O thread: no job is made): the reply to a
  // `matrices` request with header `request`.
  std::function<Result<nlohmann::json>(const nlohmann::json& request)> matrices;
  // daemon_stop from `uid`; the server has already checked the uid is allowed.
  std::function<void(uid_t uid, std::string policy)> request_stop;
  std::function<void(int signo)> on_signal;  // SIGTERM, SIGINT, SIGHUP
  std::function<void()> on_tick;             // every progress_log_seconds
};

class Server {
 public:
  Server(ServerConfig config, std::string socket_path, JobManager& jobs, UploadStore& uploads,
         Metrics& metrics, ServerHooks hooks);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Creates the directory, binds and listens; errors name the path and errno.
  Status listen();
  // "http://127.0.0.1:9464/metrics" when daemon.metrics_listen is set and listening, else empty.
  std::string metrics_url() const;
  const std::string& socket_path() const;
  // Runs the I/O loop until shutdown().
  void run();
  // Runs `fn` on the I/O thread.
  void post(std::function<void()> fn);
  // From now on uploads and submits are refused with kDrainingMessage; all else works.
  void drain();
  // Calls shutdown() once no connection is receiving anything (see above), or at `deadline`.
  void finish_when_delivered(std::chrono::steady_clock::time_point deadline);
  // Closes the listening socket (and removes the socket file), closes every connection and
  // makes run() return.
  void shutdown();
  int64_t open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The socket directory's check (see above); errors say what is wrong and what to do.
Status check_socket_directory(const std::string& dir);

// Whether `uid` may stop a daemon running as `daemon_uid`.
inline bool may_stop_daemon(uid_t uid, uid_t daemon_uid) {
  return uid == 0 || uid == daemon_uid;
}

}  // namespace stripesolve::daemon
