// CRC32C (Castagnoli), the checksum of stored segments, blobs and manifests.
//
// Why CRC32C: it is the checksum storage systems already use for blocks (ext4 metadata, iSCSI,
// LevelDB/RocksDB), it detects all burst errors up to 32 bits, and x86-64 computes it in hardware
// (SSE4.2 `crc32` instruction, several GB/s per core), so verifying every read costs little next
// to SSD bandwidth. No extra dependency: the hardware path is used when the CPU has SSE4.2
// (checked at run time), a table-driven software path otherwise; both give identical results.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace stripesolve::storage {

// Extends a running CRC32C (start with 0) by `size` bytes: crc32c_extend(crc32c_extend(0, a), b)
// equals the CRC32C of a followed by b.
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);

inline uint32_t crc32c(std::span<const std::byte> bytes) {
  return crc32c_extend(0, bytes.data(), bytes.size());
}

// Whether the hardware instruction is in use (for logs and benchmarks).
bool crc32c_uses_hardware();

}  // namespace stripesolve::storage

namespace stripesolve::storage {
// The table-driven path alone (tests compare it with the hardware path).
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t size);
}  // namespace stripesolve::storage
