// The top-level stripesolved configuration: every module's section composed into one YAML file
// (docs/config.md, daemon/stripesolved.example.yaml). Unknown keys are errors at every level.
//
//   log:     base/logging.h      LogConfig
//   daemon:  daemon/server_config.h ServerConfig
//
// With no file the embedded defaults apply (the defaults of each struct, plus the computed ones
// resolve_defaults() fills in).
#pragma once

#include <string>

#include "base/logging.h"
#include "daemon/server_config.h"

namespace stripesolve::daemon {

struct DaemonConfig {
  LogConfig log;
  ServerConfig server;
  std::string source = "<embedded defaults>";  // where it was read from
};

// Parses YAML text (throws ConfigError naming source:line: key).
DaemonConfig parse_daemon_config(std::string_view text, std::string source_name);
// Reads `path`; an empty path means the embedded defaults.
DaemonConfig load_daemon_config(const std::string& path);
// Fills computed defaults (socket path) that depend on the environment.
void resolve_defaults(DaemonConfig& config);
// A YAML rendering of the effective configuration (for --check-config).
std::string describe_config(const DaemonConfig& config);

}  // namespace stripesolve::daemon
