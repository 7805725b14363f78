// The files a command names, opened by the client with the user's own rights; the daemon gets
// their descriptors and never a path (docs/protocol.md "Descriptor passing", docs/security.md).
//
// open_input(): O_RDONLY, a regular file; errors name the option and the path
//   ("cannot read --rhs file 'b.npy': No such file or directory (errno 2)").
// OutputFile: a new temporary next to the target, ".<name>.stripesolve-XXXXXX" created with
//   O_CREAT|O_EXCL (mkostemp: never an existing file, never through a symlink planted at its
//   name). Whoever writes the result (the daemon through the descriptor, or the client itself)
//   writes there; commit() syncs it, gives it the mode a new file gets (0666 & ~umask) and
//   renames it over the target (a symlink at the target is replaced, not followed); without a
//   commit the destructor removes it. Creating it before anything is sent makes --out errors (a
//   missing or read-only directory, a directory as target) show before any work is done.
//
// Threading: one thread (commit() reads the process umask).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "base/unique_fd.h"

namespace stripesolve::client {

Result<UniqueFd> open_input(const std::string& path, std::string_view option);

class OutputFile {
 public:
  // `option` names the command-line option in errors ("--out").
  static Result<OutputFile> create(const std::string& target, std::string_view option);
  OutputFile() = default;
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  ~OutputFile();  // removes the temporary unless committed

  int fd() const { return fd_.get(); }
  const std::string& target() const { return target_; }
  const std::string& temporary() const { return temp_; }
  // fsync, mode, rename over the target. On failure the temporary is removed.
  Status commit();
  // Removes the temporary (idempotent).
  void discard();

 private:
  OutputFile(UniqueFd fd, std::string target, std::string temp)
      : fd_(std::move(fd)), target_(std::move(target)), temp_(std::move(temp)) {}
  UniqueFd fd_;
  std::string target_, temp_;  // temp_ empty once committed or discarded
};

}  // namespace stripesolve::client
