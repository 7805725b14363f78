// Configuration of the matrix store (the `store:` section of stripesolved.yaml).
//
//   store:
//     paths: [/ssd0/stripesolve, /ssd1/stripesolve]  # one directory per SSD; order matters
//     stripe_rows: 2000          # default S for new matrices (002 Table 1)
//     round_robin_levels: 0      # 0 = 002 Eq 20 from levels_q and levels_cache
//     levels_q: 4                # Q of Eq 20
//     levels_cache: 16GiB        # RAM cache size Eq 20 plans for (NV_LPC * 8 bytes)
//     segment_bytes: 0           # fixed segment length instead of levels (multiple of 4KiB)
//     min_segment_bytes: 1MiB    # lower bound of the segment length
//     io_engine: auto            # auto | io_uring | pread
//     queue_depth: 32            # io_uring requests in flight per batch
//     request_bytes: 16MiB       # io_uring cuts reads into requests of at most this size
//     write_request_bytes: 1MiB  # and writes into requests of at most this size
//     direct_io: true            # O_DIRECT (falls back to buffered where refused)
//     verify_checksums: true     # check segment CRC32C on reads of whole segments
//     import_buffer: 256MiB      # memory bound of create/import/export streaming
//     free_space_reserve: 1GiB   # space create/import leave free on each filesystem
//     group: ""                  # a group that may read the store (files 0640, folders 2750);
//                                # empty: the store is private (files 0600, folders 0700)
//
// Thread-safety: a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/units.h"

namespace stripesolve {
class ConfigMap;
}

namespace stripesolve::storage {

// The bounds of the I/O settings, whoever sets them (the YAML's parser, make_io_engine for a
// config filled in by code, the benchmarks' flags): requests a multiple of 4 KiB (O_DIRECT) from
// kMinRequestBytes to kMaxRequestBytes, 1 to kMaxQueueDepth of them in flight.
inline constexpr uint64_t kMinRequestBytes = 4 * kKiB;
inline constexpr uint64_t kMaxRequestBytes = kGiB;
inline constexpr int64_t kMaxQueueDepth = 4096;

struct StoreConfig {
  std::vector<std::string> paths;
  int64_t stripe_rows = 2000;
  int64_t round_robin_levels = 0;
  double levels_q = 4.0;
  uint64_t levels_cache = 16 * kGiB;
  uint64_t segment_bytes = 0;
  uint64_t min_segment_bytes = 1 * kMiB;
  std::string io_engine = "auto";
  int64_t queue_depth = 32;
  // 16 MiB for reads: on the GPU hosts' disks (virtio) the load of A at n = 57344 took 13.2-14.1 s
  // with 16 MiB requests against 17.1-18.8 s with 4 MiB and 18.6-19.8 s with 1 MiB, alternating on
  // one host (docs/performance.md, the forty-third session). A batch is cut finer where that fills
  // the queue (io_engine.h's chunk_bytes).
  uint64_t request_bytes = 16 * kMiB;
  // Writes keep the 1 MiB of issue 19's import / export / create figures: on the 2-core dev VM
  // `create` of 2 GiB took 2.41 s with 1 MiB against 2.73 s with 4-16 MiB (means of six
  // alternating transfer_bench runs), though a control pair with the same writes differed by 7-10%.
  uint64_t write_request_bytes = 1 * kMiB;
  bool direct_io = true;
  bool verify_checksums = true;
  uint64_t import_buffer = 256 * kMiB;
  uint64_t free_space_reserve = 1 * kGiB;
  std::string group;
};

// Reads the keys above from `map` (throws ConfigError, see base/config.h). Calls map.finish().
void parse_store_config(ConfigMap& map, StoreConfig& config);

}  // namespace stripesolve::storage
