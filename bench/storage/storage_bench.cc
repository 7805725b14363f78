// Storage throughput: whole stripe parts read and written through MatrixStore over 1..P paths
// (read_part one call per part, and read_parts streaming all parts through a ring of buffers),
// beside the raw O_DIRECT sequential throughput of the same filesystem measured in the same run by
// a plain pwrite/pread loop. Prints one JSON document with GB/s (1e9 bytes/s) and the ratios
// store/raw (target >= 0.9, issue 3). It also times reads of one column (the smallest parts)
// through read_part and as a plain pread of the store's data file: the difference is the fixed
// cost of a read_part call.
//
//   storage_bench --dir /tmp/ssbench --gib 4 --max-paths 3 --stripe-rows 1000
//                 --engine io_uring --queue-depth 32 --request-mib 16 --write-request-mib 1
//                 --reps 2   (one line; the request sizes are the store's reads' and writes')
//
// All paths are directories under --dir, so they share one disk: the figures say how close the
// store's I/O path comes to the disk, not how it scales over several disks.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/units.h"
#include "storage/checksum.h"
#include "storage/data_file.h"
#include "storage/matrix_store.h"

using namespace stripesolve;
using namespace stripesolve::storage;

namespace {

struct Options {
  std::string dir = "/tmp/storage_bench";
  double gib = 4;
  int max_paths = 3;
  int64_t stripe_rows = 1000;
  std::string engine = "io_uring";
  int64_t queue_depth = 32;
  uint64_t request_mib = 16;       // the store's default read request size
  uint64_t write_request_mib = 1;  // and write request size
  int reps = 2;
  bool verify = true;
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(const std::string& what) {
  std::cerr << "storage_bench: " << what << "\n";
  std::exit(1);
}

void check(const Status& st) {
  if (!st.is_ok()) die(st.to_string());
}

// One block of a file (8 MiB, or the store's request size), for the plain loops below.
struct RawBlock {
  int fd;
  uint64_t offset;
};
constexpr uint64_t kRawBlock = 8 * kMiB;

// Seconds to move `blocks` of `block` bytes with plain O_DIRECT pwrite/pread, one block at a time
// per thread: `streams` threads, thread k taking blocks k, k + streams, ... (streams = 1: one
// request at a time, as dd does; 4 of 8 MiB: 32 MiB in flight, as many bytes as the store's
// default queue of 32 x 1 MiB; the store's queue depth of its request size: the same requests
// in flight as the store keeps, issue 19's "raw loop with the same queue depth").
double move_raw_blocks(const std::vector<RawBlock>& blocks, int streams, bool write,
                       uint64_t block = kRawBlock) {
  std::vector<AlignedBuffer> buffers;
  for (int k = 0; k < streams; ++k) {
    auto buffer = AlignedBuffer::allocate(block);
    check(buffer.status());
    std::memset(buffer->data(), 0x5a, block);
    buffers.push_back(std::move(buffer).value());
  }
  const double t0 = now();
  std::vector<std::thread> threads;
  for (int k = 0; k < streams; ++k) {
    threads.emplace_back([&, k] {
      for (std::size_t b = k; b < blocks.size(); b += streams) {
        const auto off = static_cast<off_t>(blocks[b].offset);
        const ssize_t got = write ? ::pwrite(blocks[b].fd, buffers[k].data(), block, off)
                                  : ::pread(blocks[b].fd, buffers[k].data(), block, off);
        if (got != static_cast<ssize_t>(block)) {
          die(std::string("raw ") + (write ? "pwrite" : "pread") + " failed");
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  return now() - t0;
}

// Write then read throughput (GB/s) of a fresh preallocated file of `bytes` on the same
// filesystem as the store, in requests of `block` bytes.
std::pair<double, double> raw_throughput(const std::string& path, uint64_t bytes, int streams,
                                         uint64_t block = kRawBlock) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
  if (fd < 0) die("open " + path + " with O_DIRECT: " + std::strerror(errno));
  std::vector<RawBlock> blocks;
  for (uint64_t off = 0; off + block <= bytes; off += block) blocks.push_back({fd, off});
  const uint64_t moved = blocks.size() * block;
  if (::posix_fallocate(fd, 0, static_cast<off_t>(moved)) != 0) die("fallocate " + path);
  const double write_s = move_raw_blocks(blocks, streams, true, block);
  const double read_s = move_raw_blocks(blocks, streams, false, block);
  ::close(fd);
  ::unlink(path.c_str());
  return {moved / write_s / 1e9, moved / read_s / 1e9};
}

// Read throughput (GB/s) of the matrix's own data files, laid end to end: the same bytes from
// the same place on the disk as the store's reads, so neither side gains from data just written
// (the fresh-file loop reads what it wrote a moment before, which an SSD may still hold in its
// fast cache).
double raw_read_files(const std::vector<std::string>& paths, int streams,
                      uint64_t block = kRawBlock) {
  std::vector<int> fds;
  std::vector<RawBlock> blocks;
  for (const std::string& path : paths) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
    if (fd < 0) die("open " + path + " with O_DIRECT: " + std::strerror(errno));
    fds.push_back(fd);
    const auto size = static_cast<uint64_t>(::lseek(fd, 0, SEEK_END));
    for (uint64_t off = 0; off + block <= size; off += block) blocks.push_back({fd, off});
  }
  const double s = move_raw_blocks(blocks, streams, false, block);
  for (int fd : fds) ::close(fd);
  return static_cast<double>(blocks.size() * block) / s / 1e9;
}

struct PartRun {
  double gbps = 0;
  uint64_t bytes = 0;
};

// Reads (or writes) stripe parts [I, from column c0 of each stripe) of every stripe.
PartRun move_parts(StripedMatrix& m, int64_t c0_num, int64_t c0_den, bool write,
                   AlignedBuffer& buffer) {
  const StripeGeometry& g = m.geometry();
  PartRun run;
  const double t0 = now();
  for (int64_t I = 0; I < g.stripes; ++I) {
    const int64_t c0 = g.n * c0_num / c0_den;
    const PartLayout layout = m.part_layout(I, c0);
    check(write ? m.write_part(I, c0, buffer.data()) : m.read_part(I, c0, buffer.data()));
    run.bytes += layout.buffer_bytes;
  }
  run.gbps = static_cast<double>(run.bytes) / (now() - t0) / 1e9;
  return run;
}

// The same reads as move_parts(.., false, ..) as one read_parts stream over a ring of buffers.
PartRun read_parts_pipelined(StripedMatrix& m, int64_t c0_num, int64_t c0_den,
                             std::vector<AlignedBuffer>& ring) {
  const StripeGeometry& g = m.geometry();
  PartRun run;
  std::vector<PartRead> parts;
  for (int64_t I = 0; I < g.stripes; ++I) {
    const int64_t c0 = g.n * c0_num / c0_den;
    parts.push_back({I, c0, ring[I % ring.size()].data()});
    run.bytes += m.part_layout(I, c0).buffer_bytes;
  }
  const double t0 = now();
  check(m.read_parts(parts, PartDone()));
  run.gbps = static_cast<double>(run.bytes) / (now() - t0) / 1e9;
  return run;
}

// Mean microseconds per read of the last column of every stripe: through read_part, and as one
// plain O_DIRECT pread of as many bytes from the store's first data file (the disk's latency).
std::pair<double, double> small_read_us(StripedMatrix& m, AlignedBuffer& buffer, int calls) {
  const StripeGeometry& g = m.geometry();
  double t0 = now();
  for (int k = 0; k < calls; ++k) check(m.read_part(k % g.stripes, g.n - 1, buffer.data()));
  const double store_us = (now() - t0) / calls * 1e6;
  const uint64_t length = m.part_layout(0, g.n - 1).buffer_bytes;
  const uint64_t file_bytes = m.placement().file_bytes()[0];
  const DataFile& f = m.files()[0];
  t0 = now();
  for (int k = 0; k < calls; ++k) {
    const uint64_t off = (static_cast<uint64_t>(k) * kMiB) % (file_bytes - length) / 4096 * 4096;
    if (::pread(f.fd(), buffer.data(), length, static_cast<off_t>(off)) !=
        static_cast<ssize_t>(length)) {
      die("raw pread of " + f.path() + " failed");
    }
  }
  return {store_us, (now() - t0) / calls * 1e6};
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--dir")
      o.dir = next();
    else if (a == "--gib")
      o.gib = std::stod(next());
    else if (a == "--max-paths")
      o.max_paths = std::stoi(next());
    else if (a == "--stripe-rows")
      o.stripe_rows = std::stoll(next());
    else if (a == "--engine")
      o.engine = next();
    else if (a == "--queue-depth")
      o.queue_depth = std::stoll(next());
    else if (a == "--request-mib")
      o.request_mib = std::stoull(next());
    else if (a == "--write-request-mib")
      o.write_request_mib = std::stoull(next());
    else if (a == "--reps")
      o.reps = std::stoi(next());
    else if (a == "--no-verify")
      o.verify = false;
    else
      die("unknown argument " + a);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::filesystem::remove_all(o.dir);
  std::filesystem::create_directories(o.dir);
  const auto n = static_cast<int64_t>(std::sqrt(o.gib * static_cast<double>(kGiB) / 8.0));
  nlohmann::json out;
  out["benchmark"] = "storage";
  out["command"] = [&] {
    std::string c;
    for (int i = 0; i < argc; ++i) c += (i ? " " : "") + std::string(argv[i]);
    return c;
  }();
  out["n"] = n;
  out["stripe_rows"] = o.stripe_rows;
  out["matrix_bytes"] = 8 * n * n;
  out["engine"] = o.engine;
  out["queue_depth"] = o.queue_depth;
  out["request_bytes"] = o.request_mib * kMiB;
  out["write_request_bytes"] = o.write_request_mib * kMiB;
  out["verify_checksums"] = o.verify;
  out["crc32c_hardware"] = crc32c_uses_hardware();

  nlohmann::json rows = nlohmann::json::array();
  for (int paths = 1; paths <= o.max_paths; ++paths) {
    StoreConfig config;
    const std::string root = o.dir + "/store" + std::to_string(paths);
    for (int p = 0; p < paths; ++p) config.paths.push_back(root + "/ssd" + std::to_string(p));
    config.io_engine = o.engine;
    config.queue_depth = o.queue_depth;
    config.request_bytes = o.request_mib * kMiB;
    config.write_request_bytes = o.write_request_mib * kMiB;
    config.stripe_rows = o.stripe_rows;
    config.verify_checksums = o.verify;
    config.import_buffer = 64 * kMiB;
    auto store = MatrixStore::open(config);
    check(store.status());
    check((*store)->create_generated("A", n, {"uniform", 1}).status());
    auto a = (*store)->open_matrix("A");
    check(a.status());
    auto f = (*store)->create_factor("F", **a);
    check(f.status());
    uint64_t largest = 0;  // stripe heights differ by one (002 Eq 3)
    for (int64_t I = 0; I < (*a)->geometry().stripes; ++I) {
      largest = std::max(largest, (*a)->part_layout(I, 0).buffer_bytes);
    }
    auto buffer = AlignedBuffer::allocate(largest);
    check(buffer.status());
    // Three buffers: a part may start while the two before it are still arriving.
    std::vector<AlignedBuffer> ring;
    for (int k = 0; k < 3; ++k) {
      auto b = AlignedBuffer::allocate(largest);
      check(b.status());
      ring.push_back(std::move(b).value());
    }
    for (int rep = 0; rep < o.reps; ++rep) {
      // Raw first, on the same filesystem, then the store: same disk state within one rep. The
      // ratios use the best of one and four 8 MiB requests in flight and the store's own queue
      // depth of its request size: what the disk can do.
      const int depth = static_cast<int>(o.queue_depth);
      const uint64_t request = o.request_mib * kMiB;
      const auto [raw1_w, raw1_r] = raw_throughput(o.dir + "/raw.bin", 8 * n * n, 1);
      const auto [raw4_w, raw4_r] = raw_throughput(o.dir + "/raw.bin", 8 * n * n, 4);
      const auto [rawq_w, rawq_r] = raw_throughput(o.dir + "/raw.bin", 8 * n * n, depth, request);
      const double raw_w = std::max({raw1_w, raw4_w, rawq_w});
      const double raw_r = std::max({raw1_r, raw4_r, rawq_r});
      const PartRun w = move_parts(**f, 0, 1, true, *buffer);
      const PartRun r = move_parts(**a, 0, 1, false, *buffer);
      const PartRun rh = move_parts(**a, 1, 2, false, *buffer);  // parts from column n/2
      const PartRun rp = read_parts_pipelined(**a, 0, 1, ring);
      const PartRun rhp = read_parts_pipelined(**a, 1, 2, ring);
      std::vector<std::string> data_paths;
      for (const auto& file : (*a)->files()) data_paths.push_back(file.path());
      const double rawf1 = raw_read_files(data_paths, 1), rawf4 = raw_read_files(data_paths, 4);
      const double rawfq = raw_read_files(data_paths, depth, request);
      const double raw_same = std::max({rawf1, rawf4, rawfq});
      const auto [small_us, raw_small_us] = small_read_us(**a, *buffer, 200);
      rows.push_back({{"paths", paths},
                      {"rep", rep},
                      {"engine", (*store)->engine_name()},
                      {"direct_io", (*f)->files()[0].direct()},
                      {"raw_write_gbps", raw_w},
                      {"raw_read_gbps", raw_r},
                      {"raw_one_stream_write_gbps", raw1_w},
                      {"raw_one_stream_read_gbps", raw1_r},
                      {"raw_four_streams_write_gbps", raw4_w},
                      {"raw_four_streams_read_gbps", raw4_r},
                      {"raw_queue_depth_write_gbps", rawq_w},
                      {"raw_queue_depth_read_gbps", rawq_r},
                      {"part_write_gbps", w.gbps},
                      {"part_read_gbps", r.gbps},
                      {"half_part_read_gbps", rh.gbps},
                      {"part_read_pipelined_gbps", rp.gbps},
                      {"half_part_read_pipelined_gbps", rhp.gbps},
                      {"small_read_us", small_us},
                      {"raw_small_read_us", raw_small_us},
                      {"write_ratio", w.gbps / raw_w},
                      {"read_ratio", r.gbps / raw_r},
                      {"half_read_ratio", rh.gbps / raw_r},
                      {"read_pipelined_ratio", rp.gbps / raw_r},
                      {"half_read_pipelined_ratio", rhp.gbps / raw_r},
                      {"raw_same_files_one_stream_read_gbps", rawf1},
                      {"raw_same_files_four_streams_read_gbps", rawf4},
                      {"raw_same_files_queue_depth_read_gbps", rawfq},
                      {"read_pipelined_same_files_ratio", rp.gbps / raw_same},
                      {"half_read_pipelined_same_files_ratio", rhp.gbps / raw_same},
                      {"read_same_files_ratio", r.gbps / raw_same}});
      std::cerr << rows.back().dump() << "\n";
    }
    f->reset();
    a->reset();
    store->reset();
    std::filesystem::remove_all(root);
  }
  out["runs"] = rows;
  // Medians over the repetitions, per path count: the disk is shared, single runs are noisy.
  nlohmann::json summary = nlohmann::json::array();
  for (int paths = 1; paths <= o.max_paths; ++paths) {
    nlohmann::json s = {{"paths", paths}};
    for (const char* key : {"raw_write_gbps",
                            "raw_read_gbps",
                            "raw_one_stream_read_gbps",
                            "raw_four_streams_read_gbps",
                            "raw_queue_depth_write_gbps",
                            "raw_queue_depth_read_gbps",
                            "part_write_gbps",
                            "part_read_gbps",
                            "half_part_read_gbps",
                            "part_read_pipelined_gbps",
                            "half_part_read_pipelined_gbps",
                            "small_read_us",
                            "raw_small_read_us",
                            "write_ratio",
                            "read_ratio",
                            "half_read_ratio",
                            "read_pipelined_ratio",
                            "half_read_pipelined_ratio",
                            "raw_same_files_one_stream_read_gbps",
                            "raw_same_files_four_streams_read_gbps",
                            "raw_same_files_queue_depth_read_gbps",
                            "read_pipelined_same_files_ratio",
                            "half_read_pipelined_same_files_ratio",
                            "read_same_files_ratio"}) {
      std::vector<double> v;
      for (const auto& r : rows) {
        if (r["paths"] == paths) v.push_back(r[key].get<double>());
      }
      std::sort(v.begin(), v.end());
      s[std::string("median_") + key] =
          v.empty()
              ? 0.0
              : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
    }
    summary.push_back(s);
  }
  out["summary"] = summary;
  std::cout << out.dump(1) << "\n";
  std::filesystem::remove_all(o.dir);
  return 0;
}
