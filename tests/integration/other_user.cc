#include "tests/integration/other_user.h"

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "base/run_child.h"

namespace stripesolve::testing {

bool can_switch_uid() {
  return ::geteuid() == 0;
}

std::pair<int, std::string> run_client_as(uid_t uid, const std::vector<std::string>& args,
                                          const std::vector<std::string>& env) {
  std::vector<std::string> argv = {STRIPESOLVE_CLIENT_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildOptions options;
  options.extra_env = env;
  options.with_stderr = true;
  options.before_exec = [uid] { return become(uid); };
  const ChildRun run = run_child(argv, options);
  return {run.exit_code, run.output};
}

bool become(uid_t uid) {
  const gid_t gid = static_cast<gid_t>(uid);
  return ::setgroups(0, nullptr) == 0 && ::setresgid(gid, gid, gid) == 0 &&
         ::setresuid(uid, uid, uid) == 0;
}

std::string make_shared_dir(const std::string& tag) {
  std::string tmpl = "/tmp/ss-" + tag + "-XXXXXX";
  std::string dir = ::mkdtemp(tmpl.data());
  ::chmod(dir.c_str(), 0755);
  return dir;
}

std::string make_user_dir(const std::string& parent, const std::string& name, uid_t uid) {
  std::string dir = parent + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  if (::chown(dir.c_str(), uid, static_cast<gid_t>(uid)) != 0) {
    // A chown that failed is left to the tests that need the owner to check.
  }
  return dir;
}

}  // namespace stripesolve::testing
