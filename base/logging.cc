#include "base/logging.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <vector>

#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "base/config.h"
#include "base/json_escape.h"

namespace stripesolve {
namespace {

thread_local int64_t t_log_job = 0;

// "2026-11-22T05:01:02" + fraction digits of the record's time, UTC, with a Z.
std::string utc_timestamp(const spdlog::details::log_msg& msg, int digits) {
  using namespace std::chrono;
  const auto since_epoch = msg.time.time_since_epoch();
  const auto secs = duration_cast<seconds>(since_epoch);
  const auto micros = duration_cast<microseconds>(since_epoch - secs).count();
  const std::time_t t = secs.count();
  std::tm tm{};
  gmtime_r(&t, &tm);
  char ts[48];
  const long long fraction = digits == 3 ? micros / 1000 : micros;
  std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%0*lldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, digits, fraction);
  return ts;
}

// The syslog priority of a level (sd-daemon(3)'s "<N>" prefixes).
int journal_priority(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return 7;
    case spdlog::level::info:
      return 6;
    case spdlog::level::warn:
      return 4;
    case spdlog::level::err:
      return 3;
    default:
      return 2;
  }
}

// A file sink that can be reopened in place after rotation (spdlog's basic_file_sink cannot).
// Each line goes to the file in one write() on an O_APPEND descriptor, never through a stdio
// buffer: set_up_logging makes a new sink for the same file while the old one may still log, and
// a buffer flushed later in pieces would cut lines of the other in two.
class ReopenableFileSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit ReopenableFileSink(std::string path) : path_(std::move(path)) {}
  ~ReopenableFileSink() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status open() {
    std::lock_guard<std::mutex> lock(mutex_);
    return open_locked();
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (fd_ < 0) return;
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    const char* p = buf.data();
    size_t left = buf.size();
    while (left > 0) {  // a regular file takes the line whole; the loop is for signals
      const ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // a full disk loses log lines, never the daemon
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  void flush_() override {}  // nothing is buffered here

 private:
  Status open_locked() {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
    std::error_code ec;
    const auto dir = std::filesystem::path(path_).parent_path();
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0) return Status::from_errno(errno, "cannot open log file " + path_);
    return Status::ok();
  }

  std::string path_;
  int fd_ = -1;
};

// Every logger writes to one distribution sink that lives as long as the process; set_up_logging
// swaps the sinks inside it under the distribution sink's own lock. A logger's sink list is never
// changed after the logger is made: spdlog does not guard it, and a log record on a worker thread
// would read it while SIGHUP replaced it.
struct Sinks {
  std::mutex mu;                                      // orders logger creation and reconfiguration
  std::shared_ptr<spdlog::sinks::dist_sink_mt> dist;  // set once, then read-only
  std::shared_ptr<ReopenableFileSink> file;           // guarded by mu
  spdlog::level::level_enum level = spdlog::level::info;  // guarded by mu
};

Sinks& sinks() {
  static Sinks* s = [] {
    auto* p = new Sinks;
    auto err = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    err->set_formatter(std::make_unique<TextLineFormatter>(stderr_is_journal()));
    p->dist = std::make_shared<spdlog::sinks::dist_sink_mt>(std::vector<spdlog::sink_ptr>{err});
    // internal_error writes through the default logger: it reaches the configured sinks too.
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("", p->dist));
    return p;
  }();
  return *s;
}

Status parse_level(const std::string& name, spdlog::level::level_enum& out) {
  const auto level = spdlog::level::from_str(name);
  if (level == spdlog::level::off && name != "off") {
    return Status::invalid_argument("unknown log level '" + name + "'");
  }
  out = level;
  return Status::ok();
}

void set_all_levels(spdlog::level::level_enum level) {
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& l) { l->set_level(level); });
}

void get_level(ConfigMap& map, std::string_view key, std::string& out) {
  map.get_choice(key, out, {"trace", "debug", "info", "warn", "error", "critical", "off"});
}

}  // namespace

void parse_log_config(ConfigMap& map, LogConfig& config) {
  get_level(map, "level", config.level);
  map.get("file", config.file);
  get_level(map, "file_level", config.file_level);
  map.get_choice("stderr_format", config.stderr_format, {"text", "json", "off"});
  map.finish();
}

Status set_up_logging(const LogConfig& config) {
  spdlog::level::level_enum level{}, file_level{};
  STRIPESOLVE_RETURN_IF_ERROR(parse_level(config.level, level));
  STRIPESOLVE_RETURN_IF_ERROR(parse_level(config.file_level, file_level));

  std::vector<spdlog::sink_ptr> next;
  if (config.stderr_format != "off") {
    auto err = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    if (config.stderr_format == "json") {
      err->set_formatter(std::make_unique<JsonLineFormatter>());
    } else {
      err->set_formatter(std::make_unique<TextLineFormatter>(stderr_is_journal()));
    }
    err->set_level(level);
    next.push_back(err);
  }
  std::shared_ptr<ReopenableFileSink> file;
  if (!config.file.empty()) {
    file = std::make_shared<ReopenableFileSink>(config.file);
    STRIPESOLVE_RETURN_IF_ERROR(file->open());
    file->set_formatter(std::make_unique<JsonLineFormatter>());
    file->set_level(file_level);
    next.push_back(file);
  }
  // Loggers pass everything either sink wants; each sink filters to its own level.
  const auto logger_level = file ? std::min(level, file_level) : level;

  Sinks& s = sinks();
  std::lock_guard<std::mutex> lock(s.mu);
  s.dist->set_sinks(std::move(next));
  s.file = file;
  s.level = logger_level;
  set_all_levels(s.level);
  spdlog::flush_on(spdlog::level::warn);
  return Status::ok();
}

Status reopen_log_file() {
  Sinks& s = sinks();
  std::shared_ptr<ReopenableFileSink> file;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    file = s.file;
  }
  return file ? file->open() : Status::ok();
}

std::shared_ptr<spdlog::logger> logger(std::string_view name) {
  const std::string key(name);
  if (auto existing = spdlog::get(key)) return existing;
  Sinks& s = sinks();
  std::lock_guard<std::mutex> lock(s.mu);
  if (auto existing = spdlog::get(key)) return existing;  // created while we waited
  auto l = std::make_shared<spdlog::logger>(key, s.dist);
  l->set_level(s.level);
  spdlog::register_logger(l);
  return l;
}

LogJobScope::LogJobScope(int64_t job) : previous_(t_log_job) {
  t_log_job = job;
}
LogJobScope::~LogJobScope() {
  t_log_job = previous_;
}
int64_t current_log_job() {
  return t_log_job;
}

bool stderr_is_journal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(stream, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  if (::fstat(2, &st) != 0) return false;
  return static_cast<unsigned long long>(st.st_dev) == dev &&
         static_cast<unsigned long long>(st.st_ino) == ino;
}

void TextLineFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  std::string prefix;
  size_t color_begin = 0, color_end = 0;
  if (journal_) {
    prefix = fmt::format("<{}>", journal_priority(msg.level));
  } else {
    prefix = utc_timestamp(msg, 3) + " ";
    color_begin = prefix.size();
    const auto name = spdlog::level::to_string_view(msg.level);
    prefix.append(name.data(), name.size());
    color_end = prefix.size();
    prefix.append(name.size() < 5 ? 5 - name.size() : 0, ' ');
  }
  prefix += " [";
  prefix.append(msg.logger_name.data(), msg.logger_name.size());
  prefix += "] ";
  if (t_log_job != 0) prefix += fmt::format("job {}: ", t_log_job);
  const std::string_view payload(msg.payload.data(), msg.payload.size());
  size_t begin = 0;
  do {
    size_t end = payload.find('\n', begin);
    if (end == std::string_view::npos) end = payload.size();
    if (begin == 0) {  // the color codes of a terminal go around the first line's level
      msg.color_range_start = dest.size() + color_begin;
      msg.color_range_end = dest.size() + color_end;
    }
    dest.append(prefix.data(), prefix.data() + prefix.size());
    dest.append(payload.data() + begin, payload.data() + end);
    dest.push_back('\n');
    begin = end + 1;
  } while (begin < payload.size());
}

std::unique_ptr<spdlog::formatter> TextLineFormatter::clone() const {
  return std::make_unique<TextLineFormatter>(journal_);
}

void JsonLineFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  const std::string ts = utc_timestamp(msg, 6);
  std::string line;
  line.reserve(96 + msg.payload.size());
  line += "{\"ts\":\"";
  line += ts;
  line += "\",\"level\":\"";
  const auto level_name = spdlog::level::to_string_view(msg.level);
  line.append(level_name.data(), level_name.size());
  line += "\",\"logger\":\"";
  append_json_escaped(line, std::string_view(msg.logger_name.data(), msg.logger_name.size()));
  line += "\",\"thread\":";
  line += std::to_string(msg.thread_id);
  if (t_log_job != 0) {
    line += ",\"job\":";
    line += std::to_string(t_log_job);
  }
  line += ",\"msg\":\"";
  append_json_escaped(line, std::string_view(msg.payload.data(), msg.payload.size()));
  line += "\"}\n";
  dest.append(line.data(), line.data() + line.size());
}

std::unique_ptr<spdlog::formatter> JsonLineFormatter::clone() const {
  return std::make_unique<JsonLineFormatter>();
}

}  // namespace stripesolve
