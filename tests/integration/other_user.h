// A second user for the security tests: the real client binary run as another uid (fork,
// setresgid/setresuid, exec), and folders that user owns. Switching uids needs root; tests call
// GTEST_SKIP() with kNeedsRoot otherwise.
#pragma once

#include <sys/types.h>

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

// A new folder under /tmp that everybody may traverse (0755), owned by root, with `subdir`
// created inside it owned by `uid` (0755). Returns the root folder.
std::string make_shared_dir(const std::string& tag);
std::string make_user_dir(const std::string& parent, const std::string& name, uid_t uid);

}  // namespace stripesolve::testing
