// Running a program in a child process and collecting what it writes: for the tests and
// benchmarks that drive the CLI binary (the daemon and the client start no programs).
// Thread-safety: a plain function; between fork and exec the child makes async-signal-safe calls
// only (before_exec's included), so a multithreaded caller may use it.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace stripesolve {

struct ChildOptions {
  std::vector<std::string> extra_env;  // "NAME=value" entries added to this process's environment
  bool with_stderr = false;            // stderr into the output too (else this process's stderr)
  // Runs in the child before exec (async-signal-safe calls only); false ends the child with exit
  // code 99.
  std::function<bool()> before_exec;
};

struct ChildRun {
  int exit_code = -1;  // -1: ended by a signal, or not started
  std::string output;  // its stdout (and stderr), or why it could not be read
};

// Runs the program at argv[0] with `argv` and waits for it to end (98: it could not be executed).
ChildRun run_child(const std::vector<std::string>& argv, const ChildOptions& options = {});

}  // namespace stripesolve
