// The top-level stripesolved configuration: every module's section composed into one YAML file
// (docs/config.md, daemon/stripesolved.example.yaml). Unknown keys are errors at every level.
//
//   log:     base/logging.h          LogConfig
//   daemon:  daemon/server_config.h  ServerConfig
//   store:   storage/store_config.h  storage::StoreConfig
//   engine:  scheduler/planner.h     scheduler::EngineConfig
//   tridiag: daemon/tridiag_config.h TridiagJobConfig
//
// With no file the embedded defaults apply (the defaults of each struct, plus the computed ones
// resolve_defaults() fills in: the socket path, store.paths = [$XDG_DATA_HOME/stripesolve/store]
// (else ~/.local/share/stripesolve/store), and engine.ram_budget = daemon.ram_budget_fraction of
// the memory available at start when the file does not set it).
#pragma once

#include <string>

#include "base/logging.h"
#include "daemon/server_config.h"
#include "daemon/tridiag_config.h"
#include "scheduler/planner.h"
#include "storage/store_config.h"

namespace stripesolve::daemon {

struct DaemonConfig {
  LogConfig log;
  ServerConfig server;
  storage::StoreConfig store;
  scheduler::EngineConfig engine;
  TridiagJobConfig tridiag;
  bool engine_ram_budget_set = false;          // engine.ram_budget given explicitly
  std::string source = "<embedded defaults>";  // where it was read from
};

// Parses YAML text (throws ConfigError naming source:line: key).
DaemonConfig parse_daemon_config(std::string_view text, std::string source_name);
// Reads `path`; an empty path means the embedded defaults.
DaemonConfig load_daemon_config(const std::string& path);
// Fills computed defaults that depend on the environment (see above).
void resolve_defaults(DaemonConfig& config);
// A YAML rendering of the effective configuration (for --check-config).
std::string describe_config(const DaemonConfig& config);
// ~/.local/share/stripesolve/store or $XDG_DATA_HOME/stripesolve/store.
std::string default_store_path();
// MemAvailable from /proc/meminfo (0 if unknown).
uint64_t available_memory_bytes();

}  // namespace stripesolve::daemon
