// What was built: the project's version, the git commit of the source tree (with "-dirty" when
// it had uncommitted changes; "unknown" outside a git checkout) and the build type, for
// `--version` and the logs. The definitions are generated at build time
// (cmake/WriteBuildInfo.cmake), so the commit is current after every build.
#pragma once

namespace stripesolve {

extern const char* const kVersion;    // "0.1.0"
extern const char* const kGitCommit;  // "9621810a1b2c" or "9621810a1b2c-dirty" or "unknown"
extern const char* const kBuildType;  // "Release", "RelWithDebInfo", ...

}  // namespace stripesolve
