# Finds every third-party dependency the way Debian 12 ships it (scripts/install-deps.sh).
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(yaml-cpp REQUIRED)          # Debian 12: imported target is plain `yaml-cpp`
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Boost 1.74 REQUIRED)        # Asio is header-only
find_package(SQLite3 REQUIRED)          # the daemon's job journal (daemon/job_journal.h)
pkg_check_modules(URING IMPORTED_TARGET liburing>=2.0)  # optional: pread engine otherwise
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_package(LAPACK REQUIRED)
find_path(LAPACKE_INCLUDE_DIR lapacke.h REQUIRED)
find_library(LAPACKE_LIBRARY lapacke REQUIRED)
find_path(CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas REQUIRED)
if(STRIPESOLVE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
