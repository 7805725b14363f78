// Issue 15, point 10 (store permissions): the store's files are 0600 and its folders 0700, or,
// with store.group, 0640 and 2750 with that group; a store made before (0644 files in 0755
// folders) is closed when the daemon opens it.
#include <grp.h>
#include <sys/stat.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "client/commands.h"
#include "tests/integration/daemon_fixture.h"

namespace stripesolve::testing {
namespace {

namespace fs = std::filesystem;

// Every file and folder of the tree at `root` (root included) with its mode and group.
struct Entry {
  std::string path;
  mode_t mode;
  gid_t gid;
  bool dir;
};
std::vector<Entry> walk(const std::string& root) {
  std::vector<Entry> out;
  struct stat st {};
  ::lstat(root.c_str(), &st);
  out.push_back({root, st.st_mode & 07777, st.st_gid, true});
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    ::lstat(e.path().c_str(), &st);
    out.push_back({e.path().string(), st.st_mode & 07777, st.st_gid, S_ISDIR(st.st_mode)});
  }
  return out;
}

// A matrix, its factors and their blobs: every kind of file the store writes.
void fill_store(DaemonFixture& d) {
  auto c = d.connect();
  auto created = client::run_job(*c, {{"type", "matrix_create"},
                                      {"name", "M"},
                                      {"n", 200},
                                      {"generator", "diag_dominant"},
                                      {"stripe_rows", 64}});
  ASSERT_EQ((*created)["state"], "COMPLETED") << created->dump();
  auto solved = client::run_job(*c, {{"type", "dense_solve"}, {"matrix", "M"}});
  ASSERT_EQ((*solved)["state"], "COMPLETED") << solved->dump();
}

TEST(StorePermissions, StoreFilesArePrivate) {
  DaemonFixture d;
  fill_store(d);
  const auto entries = walk(d.dir() + "/store");
  ASSERT_GT(entries.size(), 6u);
  for (const Entry& e : entries) {
    EXPECT_EQ(e.mode, e.dir ? 0700u : 0600u) << e.path;
  }
}

TEST(StorePermissions, AConfiguredGroupMayRead) {
  const group* g = ::getgrnam("nogroup");
  if (g == nullptr) GTEST_SKIP() << "no group 'nogroup' on this machine";
  const gid_t gid = g->gr_gid;
  DaemonFixture d([](daemon::DaemonConfig& c) { c.store.group = "nogroup"; });
  fill_store(d);
  for (const Entry& e : walk(d.dir() + "/store")) {
    EXPECT_EQ(e.mode, e.dir ? 02750u : 0640u) << e.path;
    EXPECT_EQ(e.gid, gid) << e.path;
  }
}

TEST(StorePermissions, AStoreMadeBeforeIsClosedWhenOpened) {
  char tmpl[] = "/tmp/ss-oldstore-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  {
    DaemonFixture first([&](daemon::DaemonConfig& c) { c.store.paths = {dir + "/store"}; });
    fill_store(first);
  }
  for (const Entry& e : walk(dir + "/store")) ::chmod(e.path.c_str(), e.dir ? 0755 : 0644);
  DaemonFixture again([&](daemon::DaemonConfig& c) { c.store.paths = {dir + "/store"}; });
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/store").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat((dir + "/store/objects").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  again.stop();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stripesolve::testing
