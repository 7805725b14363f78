#include "daemon/job_journal.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "protocol/npy.h"

namespace stripesolve::daemon {
namespace {

// The schema; docs/storage-format.md "Job journal" describes it. user_version says which.
constexpr int kSchemaVersion = 1;
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
  id INTEGER PRIMARY KEY,
  owner INTEGER NOT NULL,
  type TEXT NOT NULL,
  params TEXT NOT NULL,
  state TEXT NOT NULL,
  created REAL NOT NULL,
  started REAL,
  finished REAL,
  result TEXT,
  error_code TEXT,
  error_message TEXT,
  log TEXT,
  result_file TEXT
);
CREATE TABLE IF NOT EXISTS transitions (
  job INTEGER NOT NULL,
  state TEXT NOT NULL,
  time REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS transitions_job ON transitions (job);
INSERT OR IGNORE INTO meta (key, value) VALUES ('next_job_id', 1);
)sql";

double to_seconds(Clock::time_point t) {
  if (t == Clock::time_point{}) return 0;
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

Clock::time_point from_seconds(double s) {
  if (s <= 0) return {};
  return Clock::time_point(
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)));
}

Status sqlite_error(sqlite3* db, std::string_view what) {
  return Status::io_error(fmt::format("job journal: {}: {}", what, sqlite3_errmsg(db)));
}

// A prepared statement that finalizes itself.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return stmt_; }
  void bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void bind(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  void bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void bind_null(int i) { sqlite3_bind_null(stmt_, i); }
  // Runs a statement that returns no rows.
  Status run(std::string_view what) {
    if (!ok()) return sqlite_error(db_, what);
    return sqlite3_step(stmt_) == SQLITE_DONE ? Status::ok() : sqlite_error(db_, what);
  }
  std::string text(int col) {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

Result<StatusCode> parse_code(const std::string& name) {
  for (int c = 0; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    if (status_code_name(static_cast<StatusCode>(c)) == name) return static_cast<StatusCode>(c);
  }
  return Status::invalid_argument("unknown status code " + name);
}

JobState parse_state(const std::string& name) {
  for (JobState s : {JobState::kPending, JobState::kRunning, JobState::kCompleted,
                     JobState::kCompletedWithWarning, JobState::kFailed, JobState::kCancelled}) {
    if (job_state_name(s) == name) return s;
  }
  return JobState::kFailed;
}

Status write_all(int fd, const void* data, size_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::io_error(fmt::format("writing {}: {}", path, std::strerror(errno)));
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::ok();
}

Status fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::io_error(fmt::format("opening {}: {}", dir, std::strerror(errno)));
  const int rc = ::fsync(fd);
  ::close(fd);
  return rc == 0 ? Status::ok()
                 : Status::io_error(fmt::format("fsync {}: {}", dir, std::strerror(errno)));
}

}  // namespace

Result<std::unique_ptr<JobJournal>> JobJournal::open(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir + "/results", ec);
  if (ec)
    return Status::io_error(
        fmt::format("cannot create the state directory {}: {}", dir, ec.message()));
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all,
                               ec);  // job requests are private
  const std::string path = dir + "/state.db";
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    Status st = Status::io_error(fmt::format("job journal: cannot open {}: {}", path,
                                             db != nullptr ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return st;
  }
  std::unique_ptr<JobJournal> journal(new JobJournal(dir, db));
  sqlite3_busy_timeout(db, 5000);  // an operator's sqlite3 shell may hold a read lock briefly
  MutexLock lock(journal->mu_);    // not shared yet: for the analysis
  STRIPESOLVE_RETURN_IF_ERROR(journal->exec("PRAGMA journal_mode=WAL"));
  STRIPESOLVE_RETURN_IF_ERROR(journal->exec("PRAGMA synchronous=FULL"));
  STRIPESOLVE_RETURN_IF_ERROR(journal->exec(kSchema));
  Statement version(db, "PRAGMA user_version");
  if (!version.ok() || sqlite3_step(version.get()) != SQLITE_ROW)
    return sqlite_error(db, "reading user_version");
  const int found = sqlite3_column_int(version.get(), 0);
  if (found == 0) {
    STRIPESOLVE_RETURN_IF_ERROR(
        journal->exec(fmt::format("PRAGMA user_version={}", kSchemaVersion).c_str()));
  } else if (found != kSchemaVersion) {
    return Status::failed_precondition(fmt::format(
        "job journal {} has schema version {}, this daemon knows {}", path, found, kSchemaVersion));
  }
  return journal;
}

JobJournal::~JobJournal() {
  sqlite3_close(db_);
}

Status JobJournal::exec(const char* sql) const {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &message) == SQLITE_OK) return Status::ok();
  Status st =
      Status::io_error(fmt::format("job journal: {}", message != nullptr ? message : "error"));
  sqlite3_free(message);
  return st;
}

uint64_t JobJournal::next_id() const {
  MutexLock lock(mu_);
  Statement s(db_,
              "SELECT max(value, (SELECT coalesce(max(id), 0) + 1 FROM jobs)) FROM meta "
              "WHERE key = 'next_job_id'");
  if (!s.ok() || sqlite3_step(s.get()) != SQLITE_ROW) return 1;
  return static_cast<uint64_t>(sqlite3_column_int64(s.get(), 0));
}

Status JobJournal::record_submit(const Job& job) {
  MutexLock lock(mu_);
  STRIPESOLVE_RETURN_IF_ERROR(exec("BEGIN IMMEDIATE"));
  Statement insert(
      db_, "INSERT INTO jobs (id, owner, type, params, state, created) VALUES (?, ?, ?, ?, ?, ?)");
  insert.bind(1, static_cast<int64_t>(job.id()));
  insert.bind(2, static_cast<int64_t>(job.owner()));
  insert.bind(3, job.type());
  insert.bind(4, job.params().dump());
  insert.bind(5, std::string(job_state_name(JobState::kPending)));
  insert.bind(6, to_seconds(job.created()));
  Status st = insert.run("recording a submit");
  Statement transition(db_, "INSERT INTO transitions (job, state, time) VALUES (?, 'PENDING', ?)");
  transition.bind(1, static_cast<int64_t>(job.id()));
  transition.bind(2, to_seconds(job.created()));
  if (st.is_ok()) st = transition.run("recording a submit");
  Statement next(db_, "UPDATE meta SET value = max(value, ?) WHERE key = 'next_job_id'");
  next.bind(1, static_cast<int64_t>(job.id() + 1));
  if (st.is_ok()) st = next.run("recording a submit");
  if (!st.is_ok()) {
    (void)exec("ROLLBACK");
    return st;
  }
  return exec("COMMIT");
}

Status JobJournal::record_state(const Job& job, const std::string& result_file) {
  const JobState state = job.state();
  const nlohmann::json result = job.result();
  const Status error = job.error();
  const nlohmann::json log = job.log_lines();
  const double now = to_seconds(Clock::now());
  MutexLock lock(mu_);
  STRIPESOLVE_RETURN_IF_ERROR(exec("BEGIN IMMEDIATE"));
  Statement update(
      db_,
      "UPDATE jobs SET state = ?, started = ?, finished = ?, result = ?, error_code = ?, "
      "error_message = ?, log = ?, result_file = coalesce(?, result_file) WHERE id = ?");
  update.bind(1, std::string(job_state_name(state)));
  update.bind(2, to_seconds(job.started()));
  update.bind(3, to_seconds(job.finished()));
  if (result.is_null())
    update.bind_null(4);
  else
    update.bind(4, result.dump());
  if (error.is_ok()) {
    update.bind_null(5);
    update.bind_null(6);
  } else {
    update.bind(5, std::string(status_code_name(error.code())));
    update.bind(6, error.message());
  }
  update.bind(7, log.dump());
  if (result_file.empty())
    update.bind_null(8);
  else
    update.bind(8, result_file);
  update.bind(9, static_cast<int64_t>(job.id()));
  Status st = update.run("recording a state change");
  Statement transition(db_, "INSERT INTO transitions (job, state, time) VALUES (?, ?, ?)");
  transition.bind(1, static_cast<int64_t>(job.id()));
  transition.bind(2, std::string(job_state_name(state)));
  transition.bind(3, now);
  if (st.is_ok()) st = transition.run("recording a state change");
  if (!st.is_ok()) {
    (void)exec("ROLLBACK");
    return st;
  }
  return exec("COMMIT");
}

Status JobJournal::forget(uint64_t id) {
  std::string file;
  {
    MutexLock lock(mu_);
    Statement q(db_, "SELECT result_file FROM jobs WHERE id = ?");
    q.bind(1, static_cast<int64_t>(id));
    if (q.ok() && sqlite3_step(q.get()) == SQLITE_ROW) file = q.text(0);
    STRIPESOLVE_RETURN_IF_ERROR(exec("BEGIN IMMEDIATE"));
    Statement del(db_, "DELETE FROM jobs WHERE id = ?");
    del.bind(1, static_cast<int64_t>(id));
    Status st = del.run("forgetting a job");
    Statement del_t(db_, "DELETE FROM transitions WHERE job = ?");
    del_t.bind(1, static_cast<int64_t>(id));
    if (st.is_ok()) st = del_t.run("forgetting a job");
    if (!st.is_ok()) {
      (void)exec("ROLLBACK");
      return st;
    }
    STRIPESOLVE_RETURN_IF_ERROR(exec("COMMIT"));
  }
  if (!file.empty())
    ::unlink(file.c_str());  // after the row: a crash leaves a stray file, never a dangling row
  return Status::ok();
}

Result<std::vector<JournalRecord>> JobJournal::load() const {
  MutexLock lock(mu_);
  Statement q(
      db_,
      "SELECT id, owner, type, params, state, created, started, finished, result, error_code, "
      "error_message, log, result_file FROM jobs ORDER BY id");
  if (!q.ok()) return sqlite_error(db_, "loading jobs");
  std::vector<JournalRecord> out;
  int rc;
  while ((rc = sqlite3_step(q.get())) == SQLITE_ROW) {
    JournalRecord r;
    r.id = static_cast<uint64_t>(sqlite3_column_int64(q.get(), 0));
    r.owner = static_cast<uid_t>(sqlite3_column_int64(q.get(), 1));
    r.type = q.text(2);
    r.params = nlohmann::json::parse(q.text(3), nullptr, false);
    r.state = parse_state(q.text(4));
    r.created = from_seconds(sqlite3_column_double(q.get(), 5));
    r.started = from_seconds(sqlite3_column_double(q.get(), 6));
    r.finished = from_seconds(sqlite3_column_double(q.get(), 7));
    if (const std::string result = q.text(8); !result.empty()) {
      r.result = nlohmann::json::parse(result, nullptr, false);
    }
    if (const std::string code = q.text(9); !code.empty()) {
      auto parsed = parse_code(code);
      r.error = Status(parsed.is_ok() ? *parsed : StatusCode::kInternal, q.text(10));
    }
    const auto log = nlohmann::json::parse(q.text(11), nullptr, false);
    if (log.is_array()) {
      for (const auto& line : log) {
        if (line.is_string()) r.log.push_back(line.get<std::string>());
      }
    }
    r.result_file = q.text(12);
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return sqlite_error(db_, "loading jobs");
  return out;
}

Result<std::string> JobJournal::store_solution(const Job& job) const {
  int64_t n = 0, nrhs = 0;
  (void)job.published_since(0, &n, &nrhs);
  const auto buffer = job.solution_buffer();
  if (buffer == nullptr || n <= 0) return Status::failed_precondition("the job kept no solution");
  const std::string path = fmt::format("{}/results/job-{}.npy", dir_, job.id());
  const std::string tmp = path + ".tmp";
  const std::string header =
      protocol::make_npy_header({n, nrhs}, false, protocol::NpyDtype::kFloat64);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::io_error(fmt::format("creating {}: {}", tmp, std::strerror(errno)));
  Status st = write_all(fd, header.data(), header.size(), tmp);
  if (st.is_ok()) st = write_all(fd, buffer->data(), buffer->size() * sizeof(double), tmp);
  if (st.is_ok() && ::fdatasync(fd) != 0)
    st = Status::io_error(fmt::format("fdatasync {}: {}", tmp, std::strerror(errno)));
  ::close(fd);
  if (st.is_ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = Status::io_error(fmt::format("renaming {}: {}", tmp, std::strerror(errno)));
  }
  if (st.is_ok()) st = fsync_dir(dir_ + "/results");
  if (!st.is_ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return path;
}

Status JobJournal::load_solution(const std::string& path, Job& job) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::not_found(
        fmt::format("the stored solution {} is gone: {}", path, std::strerror(errno)));
  std::string bytes;
  char buf[1 << 16];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (n < 0) return Status::io_error(fmt::format("reading {}: {}", path, std::strerror(errno)));
  int64_t rows = 0, cols = 0;
  STRIPESOLVE_ASSIGN_OR_RETURN(std::vector<double> x,
                               protocol::npy_to_column_major(bytes, &rows, &cols));
  STRIPESOLVE_RETURN_IF_ERROR(job.begin_solution(rows, cols));
  return job.publish_rows(0, rows, x.data());
}

}  // namespace stripesolve::daemon
