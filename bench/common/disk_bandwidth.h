// The disk bound of the benchmarks (bench_dense_gpu's SSD tier, storage's transfer_bench): the
// raw bandwidth of a folder's disk. A file of `total` bytes is written with O_DIRECT (plain I/O
// where the file system refuses it) and read back twice, 8 threads each with one 16 MiB transfer
// in flight; the better read counts. The file is removed.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace stripesolve::bench {

// {"path", "bytes", "request_bytes", "threads", "direct_io", "write_bytes_per_second",
// "read_bytes_per_second", "read_passes_bytes_per_second"}, or "error" naming what failed.
nlohmann::json disk_bandwidth(const std::string& dir, uint64_t total);

}  // namespace stripesolve::bench
