#include "tests/integration/other_user.h"

#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "base/read_fd.h"

namespace stripesolve::testing {

bool can_switch_uid() {
  return ::geteuid() == 0;
}

std::pair<int, std::string> run_client_as(uid_t uid, const std::vector<std::string>& args,
                                          const std::vector<std::string>& env) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return {-1, "pipe failed"};
  std::vector<std::string> argv_s = {STRIPESOLVE_CLIENT_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(argv_s.size() + 1);
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
  env_s.insert(env_s.end(), env.begin(), env.end());
  std::vector<char*> envp;
  envp.reserve(env_s.size() + 1);
  for (auto& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    ::dup2(pipefd[1], 1);
    ::dup2(pipefd[1], 2);
    ::close(pipefd[0]);
    if (!become(uid)) ::_exit(99);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(98);
  }
  ::close(pipefd[1]);
  const Result<std::string> read = read_fd(pipefd[0], "the client's output");
  ::close(pipefd[0]);
  const std::string out = read.is_ok() ? *read : read.status().to_string();
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
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
