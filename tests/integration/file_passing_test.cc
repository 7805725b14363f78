// Issue 15, points 1 and 2: the daemon never opens a path a client names. The client opens its
// inputs and creates its output's temporary with the user's own rights and passes descriptors,
// so the attacks of the issue (a symlink planted at the export's temporary; a symlink swapped
// between the daemon's check and its open) find no path to redirect. Also: what the daemon does
// with passed descriptors it must not take (directories, pipes, O_PATH handles, wrong access
// modes, too many, undeclared), and that it closes every one of them.
#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "client/commands.h"
#include "client/tridiag_request.h"
#include "protocol/descriptor_test_support.h"
#include "protocol/descriptors.h"
#include "tests/integration/daemon_fixture.h"
#include "tests/integration/npy_files.h"
#include "tests/integration/other_user.h"

namespace stripesolve::testing {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;

// A daemon shared by everybody: the socket in a folder all may traverse, mode 0666.
std::unique_ptr<DaemonFixture> shared_daemon(const std::string& dir) {
  ::mkdir((dir + "/sock").c_str(), 0755);
  return std::make_unique<DaemonFixture>([&](daemon::DaemonConfig& c) {
    c.server.socket = dir + "/sock/d.sock";
    c.server.socket_mode = "0666";
  });
}

bool is_symlink(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

int open_descriptors() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

// The attack of point 1: the user plants symlinks to a root-only file at every name the export
// might write through (the old fixed temporary, the client's old '.partial', the target
// itself), then exports as that user.
TEST(FilePassing, ExportNeverWritesThroughAPlantedSymlink) {
  if (!can_switch_uid()) GTEST_SKIP() << kNeedsRoot;
  const std::string dir = make_shared_dir("export");
  const std::string secret_dir = dir + "/root-only";
  ::mkdir(secret_dir.c_str(), 0700);
  const std::string secret = secret_dir + "/secret";
  std::ofstream(secret) << "root's secret\n";
  const std::string home = make_user_dir(dir, "home", kOtherUid);
  auto d = shared_daemon(dir);
  auto c = d->connect();
  ASSERT_TRUE(client::run_job(*c, {{"type", "matrix_create"}, {"name", "M"}, {"n", 50}}).is_ok());
  const std::string target = home + "/x.npy";
  for (const std::string& name : {target + ".tmp-stripesolve", target + ".partial", target}) {
    ASSERT_EQ(::symlink(secret.c_str(), name.c_str()), 0) << name;
  }

  auto [rc, out] =
      run_client_as(kOtherUid, {"--socket", d->socket(), "matrix", "export", "M", target});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(read_file(secret), "root's secret\n");
  EXPECT_FALSE(is_symlink(target));  // the rename replaced the planted link, not its target
  const NpyArray x = read_npy(target);
  EXPECT_EQ(x.shape, (std::vector<int64_t>{50, 50}));
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kOtherUid);  // written through the user's own file
  EXPECT_TRUE(is_symlink(target + ".tmp-stripesolve"));

  // A folder the user may not write: the error comes before any job is submitted.
  const auto jobs_before = d->daemon().jobs().counts().submitted_total;
  auto [rc2, out2] = run_client_as(
      kOtherUid, {"--socket", d->socket(), "matrix", "export", "M", secret_dir + "/y.npy"});
  EXPECT_EQ(rc2, 1) << out2;
  EXPECT_NE(out2.find("cannot write output file '" + secret_dir +
                      "/y.npy': cannot create a temporary file in " + secret_dir +
                      "/: Permission denied"),
            std::string::npos)
      << out2;
  EXPECT_EQ(d->daemon().jobs().counts().submitted_total, jobs_before);
  EXPECT_EQ(read_file(secret), "root's secret\n");
  d.reset();
  std::filesystem::remove_all(dir);
}

// The attack of point 2: a symlink flipped between the user's own .npy and a root-only one
// while the user imports it. With descriptors the open happens with the user's rights, so the
// private file is never read: each import either gets the user's file or fails.
TEST(FilePassing, ImportThroughASwappedSymlinkNeverReadsAnotherUsersFile) {
  if (!can_switch_uid()) GTEST_SKIP() << kNeedsRoot;
  const std::string dir = make_shared_dir("import");
  const std::string secret_dir = dir + "/root-only";
  ::mkdir(secret_dir.c_str(), 0700);
  constexpr int64_t n = 16;
  write_npy(secret_dir + "/secret.npy", {n, n}, std::vector<double>(n * n, 7777.0));
  const std::string home = make_user_dir(dir, "home", kOtherUid);
  write_npy(home + "/own.npy", {n, n}, std::vector<double>(n * n, 1.0));
  ::chmod((home + "/own.npy").c_str(), 0644);
  auto d = shared_daemon(dir);
  const std::string link = home + "/link.npy";
  std::atomic<bool> stop{false};
  std::thread swapper([&] {
    bool to_secret = false;
    const std::string tmp = home + "/.link.tmp";
    while (!stop.load()) {
      ::unlink(tmp.c_str());
      const std::string dest = to_secret ? secret_dir + "/secret.npy" : home + "/own.npy";
      if (::symlink(dest.c_str(), tmp.c_str()) == 0) ::rename(tmp.c_str(), link.c_str());
      to_secret = !to_secret;
    }
  });
  int imported = 0, refused = 0;
  for (int k = 0; k < 25; ++k) {
    const std::string name = fmt::format("I{}", k);
    auto [rc, out] =
        run_client_as(kOtherUid, {"--socket", d->socket(), "matrix", "import", name, link});
    if (rc != 0) {
      ++refused;
      continue;
    }
    ++imported;
    auto m = d->daemon().store().open_matrix(name);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    const auto layout = (*m)->part_layout(0, 0);
    std::unique_ptr<std::byte, decltype(&std::free)> buf(
        static_cast<std::byte*>(std::aligned_alloc(4096, layout.buffer_bytes)), &std::free);
    ASSERT_TRUE((*m)->read_part(0, 0, buf.get()).is_ok());
    const double v = reinterpret_cast<const double*>(buf.get() + layout.data_offset)[0];
    EXPECT_EQ(v, 1.0) << "import " << k << " read the root-only file";
  }
  stop = true;
  swapper.join();
  EXPECT_GT(imported, 0);
  // The jobs the daemon ran never named a path.
  for (const auto& job : d->daemon().jobs().list(0, true)) {
    EXPECT_FALSE(job->params().contains("path")) << job->params().dump();
    EXPECT_TRUE(job->params()["file"].contains("fd")) << job->params().dump();
  }
  d.reset();
  std::filesystem::remove_all(dir);
}

// A raw submit with the given descriptors attached.
Result<nlohmann::json> submit_with(client::Connection& c, const nlohmann::json& job,
                                   const std::vector<int>& fds) {
  return c.call(MessageType::kSubmit, {{"job", job}, {"wait", true}}, fds);
}

TEST(FilePassing, DescriptorsAreCheckedAndAllAreClosed) {
  DaemonFixture d;
  auto c = d.connect();
  ASSERT_TRUE(client::run_job(*c, {{"type", "matrix_create"}, {"name", "M"}, {"n", 20}}).is_ok());
  const int baseline = open_descriptors();
  const nlohmann::json export_job = {
      {"type", "matrix_export"}, {"name", "M"}, {"file", {{"fd", 0}}}};

  const int dirfd = ::open(d.dir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  EXPECT_EQ(submit_with(*c, export_job, {dirfd}).status().message(),
            "field 'file': the descriptor is a directory; only regular files are read or written");
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  EXPECT_EQ(submit_with(*c, export_job, {p[1]}).status().message(),
            "field 'file': the descriptor is a pipe; only regular files are read or written");
  const std::string file = d.dir() + "/f.npy";
  std::ofstream(file) << "x";
  const int path_fd = ::open(file.c_str(), O_PATH | O_CLOEXEC);
  EXPECT_EQ(submit_with(*c, export_job, {path_fd}).status().message(),
            "field 'file': the descriptor is an O_PATH handle, not an open file");
  const int read_only = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  auto wrong_mode = submit_with(*c, export_job, {read_only});
  ASSERT_TRUE(wrong_mode.is_ok());
  EXPECT_EQ((*wrong_mode)["error"]["message"], "field 'file': the file was not opened for writing");
  const int append = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  auto appending = submit_with(*c, export_job, {append});
  ASSERT_TRUE(appending.is_ok());
  EXPECT_EQ((*appending)["error"]["message"],
            "field 'file': the file was opened with O_APPEND; the daemon writes at offsets");
  const int write_only = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  auto import = submit_with(*c, {{"type", "matrix_import"}, {"name", "N"}, {"file", {{"fd", 0}}}},
                            {write_only});
  ASSERT_TRUE(import.is_ok());
  EXPECT_EQ((*import)["error"]["message"], "field 'file': the file was not opened for reading");
  // Every descriptor passed must be named by one field, and only submits take any.
  EXPECT_EQ(submit_with(*c, export_job, {read_only, read_only}).status().message(),
            "2 descriptors were passed but the job names 1 of them; every descriptor must be named "
            "by one field");
  EXPECT_EQ(submit_with(*c, {{"type", "matrix_export"}, {"name", "M"}, {"file", {{"fd", 3}}}},
                        {read_only})
                .status()
                .message(),
            "field 'file' names descriptor 3 but 1 descriptor was passed with the request");
  EXPECT_EQ(c->call(MessageType::kPing, {}, std::vector<int>{read_only}).status().message(),
            "a ping request takes no descriptors (1 passed)");
  EXPECT_TRUE(c->call(MessageType::kPing).is_ok());  // request errors leave the connection usable
  for (int fd : {dirfd, p[0], p[1], path_fd, read_only, append, write_only}) ::close(fd);

  // Protocol errors close the connection: more than 8, or descriptors no frame declares.
  std::vector<int> nine;
  for (int i = 0; i < 9; ++i) nine.push_back(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  auto raw = d.connect();
  const std::string ping = *protocol::encode_frame(protocol::make_frame(MessageType::kPing, 5));
  ASSERT_EQ(protocol::send_unchecked(raw->fd(), ping, nine), static_cast<ssize_t>(ping.size()));
  auto reply = raw->receive();
  ASSERT_TRUE(reply.is_ok());
  EXPECT_EQ(protocol::status_from_error_frame(*reply).message(),
            "more than 8 descriptors arrived with one message");
  EXPECT_FALSE(raw->receive().is_ok());  // closed
  auto undeclared = d.connect();
  ASSERT_TRUE(protocol::send_with_descriptors(undeclared->fd(), ping, {nine.data(), 2}).is_ok());
  reply =
      undeclared->receive();  // the ping is answered, then its stray descriptors end the connection
  ASSERT_TRUE(reply.is_ok());
  EXPECT_EQ(reply->type, static_cast<uint16_t>(MessageType::kOk));
  reply = undeclared->receive();
  ASSERT_TRUE(reply.is_ok());
  EXPECT_EQ(protocol::status_from_error_frame(*reply).message(),
            "descriptors arrived that no frame declares");
  for (int fd : nine) ::close(fd);
  raw.reset();
  undeclared.reset();

  // Nothing the daemon received is still open (the daemon runs in this process).
  bool settled = false;
  for (int i = 0; i < 500 && !settled; ++i) {
    settled = open_descriptors() <= baseline;
    if (!settled) std::this_thread::sleep_for(2ms);
  }
  EXPECT_LE(open_descriptors(), baseline);
}

// Point 2's data path: a tridiagonal batch and a dense solve move their arrays through the
// passed files, not through the socket, and --out errors come before any work.
TEST(FilePassing, ArraysAndSolutionsDoNotCrossTheSocket) {
  DaemonFixture d;
  auto c = d.connect();
  constexpr int64_t m = 64, n = 4096;  // 2^18 unknowns, 2 MiB an array
  std::vector<double> dl(m * n, -1.0), diag(m * n, 4.0), du(m * n, -1.0), rhs(m * n);
  for (int64_t k = 0; k < m * n; ++k) rhs[k] = static_cast<double>(k % 97) - 48.0;
  for (const char* name : {"dl", "d", "du", "rhs"}) {
    const auto& v = std::string(name) == "dl"   ? dl
                    : std::string(name) == "d"  ? diag
                    : std::string(name) == "du" ? du
                                                : rhs;
    write_npy(d.dir() + "/" + name + ".npy", {m, n}, v);
  }
  const uint64_t in_before = d.daemon().metrics().bytes_in.load();
  const uint64_t out_before = d.daemon().metrics().bytes_out.load();
  client::TridiagRequest req;
  req.dl_path = d.dir() + "/dl.npy";
  req.d_path = d.dir() + "/d.npy";
  req.du_path = d.dir() + "/du.npy";
  req.rhs_path = d.dir() + "/rhs.npy";
  req.out_path = d.dir() + "/x.npy";
  auto request = client::build_tridiag_job(req);
  ASSERT_TRUE(request.is_ok()) << request.status().to_string();
  auto done = client::run_request(*c, *request, nullptr);
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  ASSERT_EQ((*done)["state"], "COMPLETED") << done->dump();
  EXPECT_LT((*done)["result"]["max_relative_residual"].get<double>(), 1e-14);
  EXPECT_EQ((*done)["result"]["output"]["bytes"], 128 + 8 * m * n);
  const NpyArray x = read_npy(req.out_path);
  ASSERT_EQ(x.shape, (std::vector<int64_t>{m, n}));
  double worst = 0;  // row 5 of system 3, checked by hand
  const int64_t s = 3 * n;
  for (int64_t i = 1; i + 1 < n; ++i) {
    const double r =
        -x.values[s + i - 1] + 4.0 * x.values[s + i] - x.values[s + i + 1] - rhs[s + i];
    worst = std::max(worst, std::abs(r));
  }
  EXPECT_LT(worst, 1e-12);
  // Headers and replies only: far less than one array (2 MiB) each way.
  EXPECT_LT(d.daemon().metrics().bytes_in.load() - in_before, 64u << 10);
  EXPECT_LT(d.daemon().metrics().bytes_out.load() - out_before, 64u << 10);
  EXPECT_EQ(d.daemon().metrics().result_bytes_streamed.load(), 0u);

  // Dense: right-hand sides in, solution out, through files.
  ASSERT_TRUE(
      client::run_job(
          *c,
          {{"type", "matrix_create"}, {"name", "A"}, {"n", 300}, {"generator", "diag_dominant"}})
          .is_ok());
  write_npy(d.dir() + "/b.npy", {300, 2}, std::vector<double>(600, 1.0));
  client::SolveRequest solve;
  solve.matrix = "A";
  solve.rhs_path = d.dir() + "/b.npy";
  solve.out_path = d.dir() + "/xd.npy";
  auto dense = client::build_solve_job(solve);
  ASSERT_TRUE(dense.is_ok());
  const uint64_t dense_in = d.daemon().metrics().bytes_in.load();
  auto solved = client::run_request(*c, *dense, nullptr);
  ASSERT_TRUE(solved.is_ok()) << solved.status().to_string();
  ASSERT_EQ((*solved)["state"], "COMPLETED") << solved->dump();
  EXPECT_LT((*solved)["result"]["residual"].get<double>(), 1e-13);
  EXPECT_EQ(read_npy(solve.out_path).shape, (std::vector<int64_t>{300, 2}));
  EXPECT_LT(d.daemon().metrics().bytes_in.load() - dense_in, 4u << 10);
  EXPECT_EQ(d.daemon().metrics().result_bytes_streamed.load(), 0u);

  // --out into a missing folder: refused before anything is sent.
  const auto submitted = d.daemon().jobs().counts().submitted_total;
  const std::string cli = std::string(STRIPESOLVE_CLIENT_BINARY) + " --socket " + d.socket() +
                          " tridiag --dl " + req.dl_path + " --d " + req.d_path + " --du " +
                          req.du_path + " --rhs " + req.rhs_path + " --out " + d.dir() +
                          "/missing/x.npy > " + d.dir() + "/log 2>&1";
  EXPECT_EQ(WEXITSTATUS(std::system(cli.c_str())), 1);
  EXPECT_NE(read_file(d.dir() + "/log")
                .find("cannot write --out file '" + d.dir() +
                      "/missing/x.npy': cannot create a temporary file in " + d.dir() +
                      "/missing/: No such file or directory"),
            std::string::npos)
      << read_file(d.dir() + "/log");
  EXPECT_EQ(d.daemon().jobs().counts().submitted_total, submitted);
  // A failed job leaves no temporary behind and no file under the target's name.
  req.out_path = d.dir() + "/never.npy";
  req.algorithm = "nope";
  auto failing = client::build_tridiag_job(req);
  ASSERT_TRUE(failing.is_ok());
  auto failed = client::run_request(*c, *failing, nullptr);
  ASSERT_TRUE(failed.is_ok());
  EXPECT_EQ((*failed)["state"], "FAILED");
  EXPECT_FALSE(std::filesystem::exists(req.out_path));
  for (const auto& e : std::filesystem::directory_iterator(d.dir())) {
    EXPECT_EQ(e.path().filename().string().find(".stripesolve-"), std::string::npos) << e.path();
  }
}

}  // namespace
}  // namespace stripesolve::testing
