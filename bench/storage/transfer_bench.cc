// Getting matrices in and out (issue 19): MatrixStore::import_npy (C and Fortran order),
// export_npy and create_generated of an n x n matrix, beside the bound the disk sets, measured in
// the same run by bench/common/disk_bandwidth (O_DIRECT, 8 threads x 16 MiB):
//   import: source bytes / read bandwidth + stripe bytes / write bandwidth (one disk does both)
//   export: stripe bytes / read bandwidth + file bytes / write bandwidth
//   create: stripe bytes / write bandwidth
// ratio = bound / time (target >= 0.8). The source is written and fsynced first, then dropped
// from the page cache (POSIX_FADV_DONTNEED), so the import reads it from the disk, as a user's
// fresh file would be. Prints one JSON document; progress on stderr.
//
//   transfer_bench --dir /var/tmp/transfer_bench --n 16384 --stripe-rows 512 --reps 2
//                  [--request-mib M] [--write-request-mib M] (the store's io_uring read and write
//                  request sizes; its defaults unless given)
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/units.h"
#include "bench/common/disk_bandwidth.h"
#include "storage/generators.h"
#include "storage/matrix_store.h"
#include "storage/npy.h"

namespace {

using namespace stripesolve;

struct Options {
  std::string dir = "/var/tmp/transfer_bench";
  int64_t n = 16384;
  int64_t stripe_rows = 512;
  int reps = 2;
  uint64_t request_mib = 0;        // store.request_bytes in MiB; 0 = the store's default
  uint64_t write_request_mib = 0;  // store.write_request_bytes in MiB; 0 = the store's default
};

[[noreturn]] void die(const std::string& what) {
  std::cerr << "transfer_bench: " << what << "\n";
  std::exit(1);
}

void check(const Status& st) {
  if (!st.is_ok()) die(st.to_string());
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// An .npy header of an n x n little-endian float64 array, padded to 64 bytes like numpy's.
std::string npy_header(int64_t n, bool fortran) {
  if (!fortran) return storage::make_npy_header({n, n});
  std::string dict = "{'descr': '<f8', 'fortran_order': True, 'shape': (" + std::to_string(n) +
                     ", " + std::to_string(n) + "), }";
  const size_t total = (10 + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - 10 - dict.size() - 1, ' ');
  dict += '\n';
  std::string h("\x93NUMPY\x01\x00", 8);
  h += static_cast<char>(dict.size() & 0xff);
  h += static_cast<char>(dict.size() >> 8);
  return h + dict;
}

// Writes the uniform generator's matrix as an .npy file, fsyncs it and drops it from the cache.
void write_source(const std::string& path, int64_t n, bool fortran) {
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) die("open " + path + ": " + std::strerror(errno));
  const std::string h = npy_header(n, fortran);
  if (::write(fd, h.data(), h.size()) != static_cast<ssize_t>(h.size())) die("write " + path);
  const storage::GeneratorSpec spec{"uniform", 42};
  std::vector<double> line(static_cast<size_t>(n));
  for (int64_t a = 0; a < n; ++a) {  // a row (C order) or a column (Fortran order)
    for (int64_t b = 0; b < n; ++b) {
      line[b] = fortran ? storage::generated_value(spec, n, b, a)
                        : storage::generated_value(spec, n, a, b);
    }
    const auto bytes = static_cast<ssize_t>(line.size() * sizeof(double));
    if (::write(fd, line.data(), static_cast<size_t>(bytes)) != bytes) die("write " + path);
  }
  if (::fsync(fd) != 0) die("fsync " + path);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void drop_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

nlohmann::json run(const Options& o, storage::MatrixStore& store, const std::string& root,
                   double read_bw, double write_bw) {
  const double stripe_bytes = 8.0 * static_cast<double>(o.n) * static_cast<double>(o.n);
  nlohmann::json out = nlohmann::json::array();
  auto record = [&](const std::string& what, double best, double bound, nlohmann::json times) {
    std::cerr << what << ": best " << best << " s, bound " << bound << " s, ratio " << bound / best
              << "\n";
    out.push_back({{"operation", what},
                   {"seconds", times},
                   {"best_seconds", best},
                   {"bound_seconds", bound},
                   {"ratio_to_bound", bound / best},
                   {"gb_per_second", stripe_bytes / best / 1e9}});
  };
  for (bool fortran : {false, true}) {
    const std::string src = root + (fortran ? "/source_f.npy" : "/source_c.npy");
    std::cerr << "writing " << src << "\n";
    write_source(src, o.n, fortran);
    const double file_bytes = static_cast<double>(std::filesystem::file_size(src));
    nlohmann::json times = nlohmann::json::array();
    double best = 1e300;
    for (int r = 0; r < o.reps; ++r) {
      drop_cache(src);
      storage::ImportOptions io;
      io.stripe_rows = o.stripe_rows;
      const auto t0 = std::chrono::steady_clock::now();
      check(store.import_npy("M", src, io).status());
      const double s = seconds_since(t0);
      times.push_back(s);
      best = std::min(best, s);
      if (r + 1 < o.reps) check(store.remove("M"));
    }
    record(fortran ? "import_fortran_order" : "import_c_order", best,
           file_bytes / read_bw + stripe_bytes / write_bw, times);
    std::filesystem::remove(src);
    if (!fortran) {
      const std::string dst = root + "/export.npy";
      times = nlohmann::json::array();
      best = 1e300;
      for (int r = 0; r < o.reps; ++r) {
        std::filesystem::remove(dst);
        const auto t0 = std::chrono::steady_clock::now();
        check(store.export_npy("M", dst));
        const double s = seconds_since(t0);
        times.push_back(s);
        best = std::min(best, s);
      }
      record("export", best, stripe_bytes / read_bw + file_bytes / write_bw, times);
      std::filesystem::remove(dst);
    }
    check(store.remove("M"));
  }
  nlohmann::json times = nlohmann::json::array();
  double best = 1e300;
  for (int r = 0; r < o.reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    check(store.create_generated("G", o.n, {"uniform", 7}, o.stripe_rows).status());
    const double s = seconds_since(t0);
    times.push_back(s);
    best = std::min(best, s);
    check(store.remove("G"));
  }
  record("create", best, stripe_bytes / write_bw, times);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--dir")
      o.dir = v;
    else if (k == "--n")
      o.n = std::stoll(v);
    else if (k == "--stripe-rows")
      o.stripe_rows = std::stoll(v);
    else if (k == "--reps")
      o.reps = std::stoi(v);
    else if (k == "--request-mib" && std::stoll(v) > 0 && std::stoll(v) <= 1024)
      o.request_mib = std::stoull(v);
    else if (k == "--write-request-mib" && std::stoll(v) > 0 && std::stoll(v) <= 1024)
      o.write_request_mib = std::stoull(v);
    else
      die("unknown option or value " + k +
          " (--dir, --n, --stripe-rows, --reps, --request-mib 1..1024, --write-request-mib "
          "1..1024)");
  }
  std::filesystem::remove_all(o.dir);
  std::filesystem::create_directories(o.dir);
  const uint64_t matrix_bytes = 8ull * static_cast<uint64_t>(o.n) * static_cast<uint64_t>(o.n);
  std::cerr << "disk bandwidth over " << format_bytes(matrix_bytes) << "\n";
  const nlohmann::json disk = bench::disk_bandwidth(o.dir, matrix_bytes);
  if (disk.contains("error")) die(disk["error"].get<std::string>());
  storage::StoreConfig c;
  c.paths = {o.dir + "/store"};
  c.stripe_rows = o.stripe_rows;
  c.free_space_reserve = 0;
  if (o.request_mib > 0) c.request_bytes = o.request_mib * kMiB;
  if (o.write_request_mib > 0) c.write_request_bytes = o.write_request_mib * kMiB;
  auto store = storage::MatrixStore::open(c);
  check(store.status());
  nlohmann::json doc = {{"benchmark", "transfer"},
                        {"n", o.n},
                        {"stripe_rows", o.stripe_rows},
                        {"matrix_bytes", matrix_bytes},
                        {"reps", o.reps},
                        {"request_bytes", c.request_bytes},
                        {"write_request_bytes", c.write_request_bytes},
                        {"nproc", std::thread::hardware_concurrency()},
                        {"import_buffer", c.import_buffer},
                        {"io_engine", c.io_engine},
                        {"disk", disk}};
  doc["runs"] = run(o, **store, o.dir, disk["read_bytes_per_second"].get<double>(),
                    disk["write_bytes_per_second"].get<double>());
  std::cout << doc.dump(1) << "\n";
  store->reset();
  std::filesystem::remove_all(o.dir);
  return 0;
}
