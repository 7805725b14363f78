// Logging on spdlog: human-readable text on stderr and, optionally, JSON lines in a file.
//
// Every module logs through a named logger (`logger("storage")`) that shares the process-wide
// sinks; set_up_logging() may be called again (e.g. on SIGHUP) and re-points every logger.
// A JSON line looks like
//   {"ts":"2026-11-22T05:01:02.123456Z","level":"info","logger":"storage","thread":4242,
//    "msg":"opened store with 4 paths"}
// with the message escaped by base/json_escape.h, so any text yields valid JSON, and a "job" field
// on lines logged inside a LogJobScope. Text lines (stderr) read
//   2026-11-22T05:01:02.123Z info  [storage] job 7: opened store with 4 paths
// in UTC; a message of several lines gives one such line per line, each with the full prefix.
// Under systemd (JOURNAL_STREAM names stderr) text lines carry the journal's "<N>" priority
// prefix instead of a timestamp: the journal stamps them itself.
//
// Thread-safety: loggers and sinks are thread-safe; set_up_logging() and reopen_log_file() may be
// called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <spdlog/formatter.h>
#include <spdlog/logger.h>

#include "base/status.h"

namespace stripesolve {

class ConfigMap;

struct LogConfig {
  // Minimum level: trace, debug, info, warn, error, critical, off.
  std::string level = "info";
  // JSON-lines log file; empty = no file. Its directory is created if missing.
  std::string file;
  // Minimum level for the file (JSON lines), independent of stderr.
  std::string file_level = "debug";
  // Text on stderr: "text" (human), "json" (JSON lines, e.g. under a log collector), or "off".
  std::string stderr_format = "text";
};

// Reads a `log:` section into `config` (see ConfigMap for the error contract).
void parse_log_config(ConfigMap& map, LogConfig& config);

// Installs the sinks described by `config` for all loggers, present and future.
Status set_up_logging(const LogConfig& config);

// Closes and reopens the log file (after log rotation); no-op without a file.
Status reopen_log_file();

// The logger of a module; created on first use, sharing the configured sinks.
std::shared_ptr<spdlog::logger> logger(std::string_view name);

// Lines logged on this thread while the scope lives name the job (`job N` / "job":N). Scopes
// nest; the innermost wins. Threads a job starts need their own scope.
class LogJobScope {
 public:
  explicit LogJobScope(int64_t job);
  ~LogJobScope();
  LogJobScope(const LogJobScope&) = delete;
  LogJobScope& operator=(const LogJobScope&) = delete;

 private:
  int64_t previous_;
};

// The job of the calling thread's innermost LogJobScope, 0 outside any.
int64_t current_log_job();

// Whether stderr is the systemd journal's stream ($JOURNAL_STREAM names its device and inode).
bool stderr_is_journal();

// Formats a log record as text, one line per line of the message, each with the prefix (UTC
// timestamp, level, logger, job) or, for the journal, the "<N>" priority prefix only.
class TextLineFormatter final : public spdlog::formatter {
 public:
  explicit TextLineFormatter(bool journal = false) : journal_(journal) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;

 private:
  bool journal_;
};

// Formats a log record as one JSON object per line.
class JsonLineFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;
};

}  // namespace stripesolve
