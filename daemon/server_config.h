// The daemon's own configuration section (`daemon:` in stripesolved.yaml; docs/config.md).
// Plain values with their documented defaults; parse_server_config() reads the section strictly.
#pragma once

#include <cstdint>
#include <string>

#include "base/units.h"

namespace stripesolve {
class ConfigMap;
}

namespace stripesolve::daemon {

struct ServerLimits {
  int64_t max_connections = 256;  // further connections get an error frame and are closed
  // Connections one uid may hold (root and the daemon's own uid are not counted), so that one
  // user cannot take every slot.
  int64_t max_connections_per_uid = 32;
  double handshake_timeout_seconds = 10;  // a connection that sends no hello by then is closed
  // A connection that follows no job (no watch, no result stream, nothing being written) and
  // sends nothing for this long is closed; 0: never.
  double idle_timeout_seconds = 600;
  int64_t max_job_files_per_uid = 256;  // passed files one uid's pending and running jobs hold
  uint64_t max_queued_bytes =
      64 * kMiB;  // per connection, replies and progress waiting to be written
  uint64_t max_header_bytes = 64 * kKiB;  // JSON header of one frame
  uint64_t max_payload_bytes = 4 * kMiB;  // binary payload of one frame (at most 4 MiB)
  uint64_t max_upload_bytes = 4 * kGiB;   // one uploaded .npy (right-hand sides)
  uint64_t max_upload_total = 8 * kGiB;   // every upload held by the daemon, unfinished or not
  uint64_t max_rhs_bytes = 1 * kGiB;  // n x nrhs float64 of one dense solve (it holds ~4 copies)
  int64_t max_jobs = 10000;           // job records kept until they expire
};

struct ServerConfig {
  std::string
      socket;  // empty: $STRIPESOLVE_SOCKET, $XDG_RUNTIME_DIR/..., /tmp/stripesolve-$UID/...
  std::string socket_mode = "0600";  // octal; "0660" with socket_group for shared machines
  std::string socket_group;          // group name to own the socket (empty: the daemon's group)
  // The job journal's directory (state.db, stored results; daemon/job_journal.h). Empty: "state"
  // beside the first store path (resolve_defaults()).
  std::string state_dir;
  ServerLimits limits;
  int64_t small_concurrency = 4;  // workers of the small-job lane (matrix management, queries)
  int64_t dense_concurrency =
      1;  // workers of the dense-solve lane (each solve uses the whole machine)
  int64_t tridiag_concurrency = 2;     // workers of the tridiagonal-batch lane
  int64_t result_ttl_seconds = 86400;  // finished jobs and unfetched results are dropped after this
  int64_t upload_ttl_seconds = 3600;   // uploads not used by a job are dropped after this
  double progress_log_seconds = 5.0;   // a progress log line per running job this often
  // On SIGTERM: "drain" (finish queued and running jobs; the protocol's daemon_stop says the
  // same) or "cancel" them. "finish", its old name, is read as "drain".
  std::string shutdown_policy = "drain";
  int64_t drain_timeout_seconds = 600;  // after this, what is still running is cancelled
  // Once the jobs have ended, how long the daemon still waits for clients to receive their
  // results (a slow reader, a client about to ask) before it closes the connections left.
  int64_t delivery_timeout_seconds = 60;
  // When a GPU hits a sticky CUDA error (gpu/devices.h): "keep_serving" (its jobs go to the
  // other devices or the CPU until an operator restarts the daemon) or "restart" (the daemon
  // stops as under the cancel policy, keeping its dense solves in the journal, and exits with
  // kExitGpuFailed so that systemd's Restart=on-failure starts it again with the device fresh).
  std::string on_gpu_failure = "keep_serving";
  double ram_budget_fraction = 0.5;  // engine.ram_budget default: this fraction of MemAvailable
  // "127.0.0.1:9464": serve Prometheus's scrape at http://.../metrics (daemon/metrics_http.h);
  // empty: off. Loopback addresses only.
  std::string metrics_listen;
};

// Reads a `daemon:` section (throws ConfigError, see base/config.h).
void parse_server_config(ConfigMap& map, ServerConfig& config);

// Parses "0600"-style octal permission bits (0..0777); -1 if malformed.
int parse_mode(const std::string& text);

}  // namespace stripesolve::daemon
