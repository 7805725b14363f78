// A second user for the security tests: the real client binary run as another uid (fork,
// setresgid/setresuid, exec), and folders that user owns. Switching uids needs root; tests call
// GTEST_SKIP() with kNeedsRoot otherwise.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

namespace stripesolve::testing {

inline constexpr uid_t kOtherUid = 65534;  // nobody
inline constexpr const char* kNeedsRoot = "needs root to act as a second uid (65534)";

bool can_switch_uid();

// Runs the client binary as `uid` (gid = uid) with `args`; returns its exit code and
// stdout + stderr. `env` entries ("NAME=value") are added to the environment.
std::pair<int, std::string> run_client_as(uid_t uid, const std::vector<std::string>& args,
                                          const std::vector<std::string>& env = {});

// In a forked child: drops the supplementary groups and becomes `uid` (gid = uid).
// Async-signal-safe; false when the switch failed.
bool become(uid_t uid);

// Forks a child that becomes `uid`, runs `setup()` (async-signal-safe calls only; false ends the
// child), tells the parent it is ready, then runs `serve()`, which never returns. Returns the
// child's pid once it is ready (-1 when the pipe or fork fails; the test kills the child).
template <typename Setup, typename Serve>
pid_t fork_ready_as(uid_t uid, Setup setup, Serve serve) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    if (!become(uid)) ::_exit(99);
    if (!setup()) ::_exit(97);
    const char done = 1;
    if (::write(ready[1], &done, 1) != 1) ::_exit(96);
    serve();
    ::_exit(0);
  }
  ::close(ready[1]);
  char done = 0;
  const bool ok = pid > 0 && ::read(ready[0], &done, 1) == 1;
  ::close(ready[0]);
  return ok ? pid : -1;
}

// A new folder under /tmp that everybody may traverse (0755), owned by root, with `subdir`
// created inside it owned by `uid` (0755). Returns the root folder.
std::string make_shared_dir(const std::string& tag);
std::string make_user_dir(const std::string& parent, const std::string& name, uid_t uid);

}  // namespace stripesolve::testing
