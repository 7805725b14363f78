// Crash safety (issue 18): the real stripesolved, killed with SIGKILL at random moments of a
// dense solve on a small cache, restarted each time on the same store and state directory. The
// job keeps its id, runs again after every restart, and ends with the same solution, bit for bit,
// as an uninterrupted run; `stripesolve watch` follows it across the restarts; the journal
// (state.db) holds its history. The factorization resumes from its durable progress (issue 18):
// between two kills, no stripe's progress goes back to or below what was durable at the earlier
// kill, except a stripe the restarted daemon found torn (it says so in its log). A kill during a
// matrix import leaves no half-imported matrix.
//
// Short form (CI): STRIPESOLVE_CRASH_KILLS kills, default 3. The long form of the issue:
// STRIPESOLVE_CRASH_KILLS=20.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "client/commands.h"
#include "gpu/devices.h"
#include "scheduler/factor_progress.h"
#include "storage/progress_log.h"
#include "tests/integration/npy_files.h"
#include "tests/integration/processes.h"

extern char** environ;

namespace stripesolve::testing {
namespace {

using namespace std::chrono_literals;

pid_t spawn(std::vector<std::string> args, const std::string& stderr_path = "") {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!stderr_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
  }
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// A new directory for one test's daemon (config, socket, store, state, logs).
std::string crash_dir() {
  char tmpl[] = "/tmp/ss-crash-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  // Thrown, the test fails (gtest reports the exception) before it touches any directory.
  if (dir == nullptr) {
    throw std::runtime_error(std::string("mkdtemp: ") +
                             std::strerror(errno));  // NOLINT(concurrency-mt-unsafe)
  }
  return dir;
}

// A spawned daemon on one directory's config, store and state; killed if a test fails.
class SpawnedDaemon {
 public:
  // `daemon_section`, `engine_lines`: extra lines of the config's daemon: and engine: sections.
  explicit SpawnedDaemon(std::string dir, const std::string& daemon_section = "",
                         const std::string& engine_lines = "")
      : dir_(std::move(dir)) {
    std::ofstream(config()) << "log:\n  level: warn\n"
                            << (daemon_section.empty() ? "" : "daemon:\n" + daemon_section)
                            << "store:\n  paths: [" << dir_
                            << "/store]\n  direct_io: false\n  free_space_reserve: 0\n"
                               "engine:\n  progress_interval_seconds: 0.01\n"
                            << engine_lines;
  }
  ~SpawnedDaemon() { kill(); }
  std::string config() const { return dir_ + "/d.yaml"; }
  std::string socket() const { return dir_ + "/d.sock"; }
  std::unique_ptr<client::Connection> start() {
    // A small cache: the 2000-row matrix (32 MB) goes through it in pieces.
    pid_ = spawn({STRIPESOLVE_DAEMON_BINARY, "--config", config(), "--socket", socket(),
                  "--ram-budget", "8MiB"},
                 log_path(++starts_));
    return pid_ > 0 ? wait_connect(socket(), 20s) : nullptr;
  }
  // What the daemon's k-th start (from 1) wrote to stderr (its log, at level warn).
  std::string log_path(int k) const { return dir_ + "/daemon." + std::to_string(k) + ".log"; }
  int starts() const { return starts_; }
  // SIGTERM, as systemd stops it for a reboot; returns the wait status.
  int terminate() {
    ::kill(pid_, SIGTERM);
    const int status = wait_exit(pid_, 120s);
    pid_ = -1;
    return status;
  }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  int stop(client::Connection& c) {
    (void)c.call(protocol::MessageType::kDaemonStop, {{"policy", "cancel"}});
    const int status = wait_exit(pid_, 120s);
    pid_ = -1;
    return status;
  }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  int starts_ = 0;
};

// The records of a factor's progress log, header first (read from a copy: opening the log cuts
// a torn tail off). Empty when there is no log (no factorization under way).
std::vector<scheduler::ProgressRecord> progress_records(const std::string& progress_path,
                                                        const std::string& copy) {
  std::vector<scheduler::ProgressRecord> out;
  std::error_code ec;
  if (!std::filesystem::copy_file(progress_path, copy,
                                  std::filesystem::copy_options::overwrite_existing, ec)) {
    return out;
  }
  std::vector<storage::ProgressLog::Record> records;
  if (!storage::ProgressLog::open(copy, 0600, &records).is_ok()) return out;
  for (const auto& payload : records) {
    auto r = scheduler::parse_progress_record(payload);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    if (r.is_ok()) out.push_back(*r);
  }
  return out;
}

// Stripes a daemon's log says it found torn and sent back to the matrix.
std::set<int64_t> restarted_stripes(const std::string& log) {
  std::set<int64_t> out;
  const std::string marker = "does not match its progress record";
  for (size_t at = log.find(marker); at != std::string::npos; at = log.find(marker, at + 1)) {
    const size_t begin = log.rfind("stripe ", at);
    if (begin != std::string::npos) out.insert(std::atoll(log.c_str() + begin + 7));
  }
  return out;
}

int kills_wanted() {
  const char* env = std::getenv("STRIPESOLVE_CRASH_KILLS");  // NOLINT(concurrency-mt-unsafe)
  return env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : 3;
}

// The matrix the tests solve: K, n = 2000 in 20 stripes of 100 rows (a few seconds of solve on
// the small cache, so that kills land inside the factorization).
constexpr int64_t kOrder = 2000;
void create_k(client::Connection& c) {
  auto created = client::run_job(c, {{"type", "matrix_create"},
                                     {"name", "K"},
                                     {"n", kOrder},
                                     {"generator", "uniform"},
                                     {"seed", 3},
                                     {"stripe_rows", 100}});
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  ASSERT_EQ((*created)["state"], "COMPLETED") << created->dump();
}

nlohmann::json solve_job(const std::string& matrix) {
  client::SolveRequest req;
  req.matrix = matrix;
  req.generate = "uniform";
  req.seed = 7;
  req.reuse = false;  // every run factors: the interrupted one must produce the factor itself
  return client::build_solve_job(req)->job;
}

std::vector<double> fetch_solution(client::Connection& c, uint64_t id, const std::string& path) {
  auto rows = client::fetch_result(c, id, path);
  EXPECT_TRUE(rows.is_ok()) << rows.status().to_string();
  return read_npy(path).values;
}

// The job's state changes as the journal holds them (sqlite3 state.db, as an operator reads it).
std::vector<std::string> journal_transitions(const std::string& db_path, uint64_t id) {
  sqlite3* db = nullptr;
  std::vector<std::string> out;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return out;
  }
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "SELECT state FROM transitions WHERE job = ? ORDER BY rowid", -1, &stmt,
                     nullptr);
  sqlite3_bind_int64(stmt, 1, static_cast<sqlite3_int64>(id));
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

// A test's daemon lives in `dir_`, a new directory removed after the test (kept, with the daemon's
// logs, after a failure).
class CrashIntegration : public ::testing::Test {
 protected:
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  // The CLI's `watch` of job `id`, which follows the job across the daemon's restarts (its stderr
  // in dir_/watch.err).
  pid_t spawn_watcher(const SpawnedDaemon& daemon, uint64_t id) const {
    return spawn({STRIPESOLVE_CLIENT_BINARY, "--socket", daemon.socket(), "--reconnect-timeout",
                  "120", "watch", std::to_string(id)},
                 dir_ + "/watch.err");
  }
  // Waits for the watcher, which must have followed the job to its end; returns its stderr.
  std::string expect_watcher_succeeded(pid_t watcher) const {
    const int status = wait_exit(watcher, 120s);
    std::string err = read_file(dir_ + "/watch.err");
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << err;
    return err;
  }

  void kill_and_resume(const std::string& engine_lines, const std::string& backend);

  const std::string dir_ = crash_dir();
};

// The kills of the issue on the daemon with `engine_lines` (its backend).
void CrashIntegration::kill_and_resume(const std::string& engine_lines,
                                       const std::string& backend) {
  SpawnedDaemon daemon(dir_, "", engine_lines);
  auto c = daemon.start();
  ASSERT_NE(c, nullptr);
  ASSERT_NO_FATAL_FAILURE(create_k(*c));

  // On a GPU the daemon's first solve also opens cuBLAS and cuSOLVER and makes the device's
  // context: a reference timed with that would set the kills' window past the end of the
  // interrupted run (which it then finished before the first kill: no restart, and the test
  // tested nothing). A solve first, untimed.
  if (backend == "cuda") {
    auto warm = client::run_job(*c, solve_job("K"));
    ASSERT_TRUE(warm.is_ok()) << warm.status().to_string();
  }
  // The uninterrupted reference, and how long it takes (the window the kills fall in).
  const auto t0 = std::chrono::steady_clock::now();
  auto reference_job = client::run_job(*c, solve_job("K"));
  const double reference_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(reference_job.is_ok());
  ASSERT_EQ((*reference_job)["state"], "COMPLETED") << reference_job->dump();
  const uint64_t reference_id = (*reference_job)["id"].get<uint64_t>();
  const std::vector<double> reference = fetch_solution(*c, reference_id, dir_ + "/reference.npy");
  ASSERT_EQ(reference.size(), static_cast<size_t>(kOrder));

  // The interrupted run, followed by the CLI's `watch` across the restarts.
  auto id = client::submit_job(*c, solve_job("K"));
  ASSERT_TRUE(id.is_ok());
  const pid_t watcher = spawn_watcher(daemon, *id);
  ASSERT_GT(watcher, 0);
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> moment(0.02, std::max(0.05, 0.6 * reference_seconds));
  int kills_while_running = 0;
  const std::string progress = dir_ + "/store/objects/K.lu.row/progress";
  std::vector<scheduler::ProgressRecord> before;  // the log at the previous kill
  bool last_kill_left_progress = false;
  int64_t records_checked = 0;
  for (int k = 0; k < kills_wanted(); ++k) {
    std::this_thread::sleep_for(std::chrono::duration<double>(moment(rng)));
    auto job = c->call(protocol::MessageType::kStatus, {{"job", *id}});
    if (job.is_ok() && job->value("state", std::string()) == "COMPLETED") break;
    if (job.is_ok() && job->value("state", std::string()) == "RUNNING") ++kills_while_running;
    c.reset();
    daemon.kill();
    // The run since the previous kill resumed from what was durable then: each record it added
    // moves its stripe past the stripe's durable step (no durable work done again), except for
    // stripes it found torn and sent back to the matrix.
    const std::vector<scheduler::ProgressRecord> now =
        progress_records(progress, dir_ + "/progress.copy");
    const std::set<int64_t> torn = restarted_stripes(read_file(daemon.log_path(daemon.starts())));
    // (The same log grown, not a new factorization's: one killed after its commit starts again.)
    const bool grown =
        !before.empty() && now.size() >= before.size() &&
        std::equal(before.begin(), before.end(), now.begin(), [](const auto& x, const auto& y) {
          return x.stripe == y.stripe && x.step == y.step && x.crc == y.crc;
        });
    if (grown) {
      std::map<int64_t, int64_t> durable;
      for (const auto& r : before) durable[r.stripe] = r.step;
      for (size_t i = before.size(); i < now.size(); ++i) {
        const scheduler::ProgressRecord& r = now[i];
        if (torn.count(r.stripe) != 0) continue;
        EXPECT_GT(r.step, durable[r.stripe])
            << "stripe " << r.stripe << " redone before kill " << k + 1;
        durable[r.stripe] = r.step;
        ++records_checked;
      }
    }
    before = now;
    last_kill_left_progress = !now.empty();
    c = daemon.start();
    ASSERT_NE(c, nullptr) << "the daemon did not come back after kill " << k + 1;
  }
  auto done = client::follow_job(*c, *id, "", nullptr);
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  ASSERT_EQ((*done)["state"], "COMPLETED") << done->dump();
  EXPECT_EQ((*done)["id"].get<uint64_t>(), *id);
  EXPECT_EQ((*done)["result"].value("backend", std::string()), backend) << done->dump();
  std::cout << "crash test: " << records_checked
            << " progress records written after a restart checked\n";
  ASSERT_GT(daemon.starts(), 1) << "the job ended before the first kill: nothing was tested";
  // The last run found the factorization under way and resumed it (the job's result says what it
  // did not do again).
  if (last_kill_left_progress) {
    EXPECT_TRUE(done->contains("result") && (*done)["result"].contains("resumed")) << done->dump();
  }
  const std::vector<double> resumed = fetch_solution(*c, *id, dir_ + "/resumed.npy");
  ASSERT_EQ(resumed.size(), reference.size());
  // A re-run performs the same operations in the same order: the same bits.
  EXPECT_EQ(std::memcmp(resumed.data(), reference.data(), reference.size() * sizeof(double)), 0);
  double norm = 0;
  for (double v : resumed) norm += v * v;
  EXPECT_GT(norm, 0);

  // History after the restarts: the reference job is still listed, and its solution (stored
  // before the kills) still streams.
  auto jobs = c->call(protocol::MessageType::kJobs);
  ASSERT_TRUE(jobs.is_ok());
  bool reference_listed = false;
  for (const auto& j : (*jobs)["jobs"]) reference_listed |= j["id"].get<uint64_t>() == reference_id;
  EXPECT_TRUE(reference_listed) << jobs->dump();
  EXPECT_EQ(fetch_solution(*c, reference_id, dir_ + "/reference-again.npy"), reference);
  // The journal holds every start of the job (one more than the kills that found it running).
  const auto transitions = journal_transitions(dir_ + "/state/state.db", *id);
  ASSERT_FALSE(transitions.empty());
  EXPECT_EQ(transitions.front(), "PENDING");
  EXPECT_EQ(transitions.back(), "COMPLETED");
  EXPECT_GE(std::count(transitions.begin(), transitions.end(), "RUNNING"), kills_while_running + 1);
  // The store is consistent: the matrix is whole, nothing is left half made (no progress log).
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_ + "/store/objects")) {
    EXPECT_NE(entry.path().filename(), "progress") << entry.path();
  }
  auto list = client::list_matrices(*c);
  ASSERT_TRUE(list.is_ok());
  for (const auto& m : *list) {
    EXPECT_EQ(m.value("state", std::string("complete")), "complete") << m.dump();
  }

  // The watcher followed the job to its end across the restarts.
  const std::string watch_err = expect_watcher_succeeded(watcher);
  if (kills_while_running > 0) {
    EXPECT_NE(watch_err.find("daemon restarting, job " + std::to_string(*id) + " will resume"),
              std::string::npos)
        << watch_err;
  }
  EXPECT_EQ(daemon.stop(*c), 0);
}

// A stop for a reboot (SIGTERM with shutdown policy cancel) costs no work: the journal keeps the
// running solve, the next start runs it again (resuming its factorization when the stop came in
// the middle of it), and a waiting client follows it to its end.
TEST_F(CrashIntegration, AKilledSolveResumesWithTheSameSolution) {
  kill_and_resume("  backend: cpu\n", "cpu");
}

// The same on the GPU tier, with a device budget so small that J stripes stream through it and
// dirty stripes reach the store along the way (the GPU tier's records and resume, issue 18).
TEST_F(CrashIntegration, AKilledGpuSolveResumesWithTheSameSolution) {
  if (gpu::device_count() == 0) {
    GTEST_SKIP() << "no CUDA device on this host (or a build without CUDA): the GPU tier's crash "
                    "test runs on a GPU machine (scripts/device-check.sh)";
  }
  kill_and_resume("  backend: cuda\n  gpu_memory: 16MiB\n  gpus: 1\n", "cuda");
}

TEST_F(CrashIntegration, AStopForARebootKeepsTheRunningSolve) {
  SpawnedDaemon daemon(dir_, "  shutdown:\n    policy: cancel\n");
  auto c = daemon.start();
  ASSERT_NE(c, nullptr);
  ASSERT_NO_FATAL_FAILURE(create_k(*c));
  auto id = client::submit_job(*c, solve_job("K"));
  ASSERT_TRUE(id.is_ok());
  const pid_t watcher = spawn_watcher(daemon, *id);
  ASSERT_GT(watcher, 0);
  for (int i = 0; i < 2000; ++i) {
    auto job = c->call(protocol::MessageType::kStatus, {{"job", *id}});
    if (job.is_ok() && job->value("state", std::string()) != "PENDING") break;
    std::this_thread::sleep_for(2ms);
  }
  c.reset();
  const int status = daemon.terminate();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const bool factorization_under_way =
      std::filesystem::exists(dir_ + "/store/objects/K.lu.row/progress");
  c = daemon.start();
  ASSERT_NE(c, nullptr);
  auto done = client::follow_job(*c, *id, "", nullptr);
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_EQ((*done)["state"], "COMPLETED") << done->dump();
  if (factorization_under_way) {
    EXPECT_TRUE(done->contains("result") && (*done)["result"].contains("resumed")) << done->dump();
  }
  expect_watcher_succeeded(watcher);
  EXPECT_EQ(daemon.stop(*c), 0);
}

// A half-made factor that no queued job will resume (here the journal is gone) is removed at
// start-up instead of lingering, invisible, in the store.
TEST_F(CrashIntegration, AHalfMadeFactorNoJobResumesIsRemoved) {
  SpawnedDaemon daemon(dir_);
  auto c = daemon.start();
  ASSERT_NE(c, nullptr);
  ASSERT_NO_FATAL_FAILURE(create_k(*c));
  auto id = client::submit_job(*c, solve_job("K"));
  ASSERT_TRUE(id.is_ok());
  const std::string factor = dir_ + "/store/objects/K.lu.row";
  bool under_way = false;
  for (int i = 0; i < 4000 && !under_way; ++i) {
    under_way = std::filesystem::exists(factor + "/progress");
    if (!under_way) std::this_thread::sleep_for(1ms);
  }
  c.reset();
  daemon.kill();
  if (!under_way) GTEST_SKIP() << "the solve ended before its factorization was seen under way";
  ASSERT_TRUE(std::filesystem::exists(factor + "/progress"));
  std::filesystem::remove_all(dir_ + "/state");  // the journal is lost: no job will resume it
  c = daemon.start();
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(std::filesystem::exists(factor));
  EXPECT_NE(read_file(daemon.log_path(2)).find("removing the half-made factor 'K.lu.row'"),
            std::string::npos)
      << read_file(daemon.log_path(2));
  EXPECT_EQ(daemon.stop(*c), 0);
}

TEST_F(CrashIntegration, AKillDuringAnImportLeavesNoHalfImportedMatrix) {
  SpawnedDaemon daemon(dir_);
  auto c = daemon.start();
  ASSERT_NE(c, nullptr);
  constexpr int64_t kN = 1500;
  std::vector<double> a(static_cast<size_t>(kN * kN));
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<double>(i % 97) - 48.0 + (i % (kN + 1) == 0 ? 5e3 : 0);
  write_npy(dir_ + "/a.npy", {kN, kN}, a);
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> moment(0.0, 0.15);
  auto request = client::build_import_job("A", dir_ + "/a.npy", 100);
  ASSERT_TRUE(request.is_ok()) << request.status().to_string();
  auto id = client::submit_request(*c, *request);
  ASSERT_TRUE(id.is_ok());
  std::this_thread::sleep_for(std::chrono::duration<double>(moment(rng)));
  c.reset();
  daemon.kill();
  c = daemon.start();
  ASSERT_NE(c, nullptr);
  auto job = c->call(protocol::MessageType::kStatus, {{"job", *id}});
  ASSERT_TRUE(job.is_ok()) << job.status().to_string();
  const std::string state = job->value("state", std::string());
  auto list = client::list_matrices(*c);
  ASSERT_TRUE(list.is_ok());
  const auto& matrices = *list;
  if (state == "COMPLETED") {  // the import ended before the kill
    ASSERT_EQ(matrices.size(), 1u) << list->dump();
  } else {
    // Its file was the old process's descriptor: the job failed and says what to do.
    EXPECT_EQ(state, "FAILED") << job->dump();
    EXPECT_NE(
        (*job)["error"].value("message", std::string()).find("the daemon restarted; submit again"),
        std::string::npos)
        << job->dump();
    EXPECT_TRUE(matrices.empty()) << list->dump();
    auto again = client::build_import_job("A", dir_ + "/a.npy", 100);
    ASSERT_TRUE(again.is_ok());
    auto redone = client::wait_request(*c, *again);
    ASSERT_TRUE(redone.is_ok()) << redone.status().to_string();
    EXPECT_EQ((*redone)["state"], "COMPLETED") << redone->dump();
  }
  EXPECT_EQ(daemon.stop(*c), 0);
}

}  // namespace
}  // namespace stripesolve::testing
