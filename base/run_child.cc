#include "base/run_child.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/read_fd.h"

namespace stripesolve {
namespace {

// execve's view of `strings` (which must outlive it): their buffers, then a null.
std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

ChildRun run_child(const std::vector<std::string>& argv, const ChildOptions& options) {
  std::vector<std::string> args = argv;
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.insert(env.end(), options.extra_env.begin(), options.extra_env.end());
  const std::vector<char*> arg_ptrs = pointers(args);
  const std::vector<char*> env_ptrs = pointers(env);
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return {-1, "pipe failed"};
  const pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    ::dup2(pipefd[1], 1);
    if (options.with_stderr) ::dup2(pipefd[1], 2);
    if (options.before_exec && !options.before_exec()) ::_exit(99);
    ::execve(arg_ptrs[0], arg_ptrs.data(), env_ptrs.data());
    ::_exit(98);
  }
  ::close(pipefd[1]);
  if (pid < 0) {
    ::close(pipefd[0]);
    return {-1, "fork failed"};
  }
  const Result<std::string> read = read_fd(pipefd[0], "the child's output");
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1,
          read.is_ok() ? *read : read.status().to_string()};
}

}  // namespace stripesolve
