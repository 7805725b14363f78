#include "storage/engine_select.h"

#include <cstdint>
#include <string>
#include <utility>

#include "base/logging.h"
#include "storage/pread_engine.h"
#if STRIPESOLVE_HAVE_URING
#include "storage/uring_engine.h"
#endif

namespace stripesolve::storage {

Status io_uring_usable() {
#if STRIPESOLVE_HAVE_URING
  return UringEngine::probe();
#else
  return Status::unimplemented("io_uring: this build has no liburing");
#endif
}

namespace {

// The bounds the YAML's parser checks (store_config.h), for a StoreConfig filled in by code: a
// request off 4 KiB would fail every O_DIRECT transfer.
Status check_requests(const StoreConfig& config) {
  if (config.queue_depth < 1 || config.queue_depth > kMaxQueueDepth) {
    return Status::invalid_argument("store queue_depth " + std::to_string(config.queue_depth) +
                                    " is outside 1.." + std::to_string(kMaxQueueDepth));
  }
  for (const auto& [key, value] :
       {std::pair<const char*, uint64_t>{"request_bytes", config.request_bytes},
        {"write_request_bytes", config.write_request_bytes}}) {
    if (value < kMinRequestBytes || value > kMaxRequestBytes || value % (4 * kKiB) != 0) {
      return Status::invalid_argument("store " + std::string(key) + " " + std::to_string(value) +
                                      " must be a multiple of 4KiB from 4KiB to 1GiB");
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::shared_ptr<IoEngine>> make_io_engine(const StoreConfig& config, Status (*probe)()) {
  if (Status s = check_requests(config); !s.is_ok()) return s;
  if (config.io_engine == "pread")
    return std::shared_ptr<IoEngine>(std::make_shared<PreadEngine>());
  if (config.io_engine != "io_uring" && config.io_engine != "auto") {
    return Status::invalid_argument("unknown io_engine '" + config.io_engine +
                                    "' (expected auto, io_uring or pread)");
  }
  Status usable = probe();
#if STRIPESOLVE_HAVE_URING
  if (usable.is_ok()) {
    return std::shared_ptr<IoEngine>(
        std::make_shared<UringEngine>(static_cast<unsigned>(config.queue_depth),
                                      config.request_bytes, config.write_request_bytes));
  }
#endif
  if (config.io_engine == "io_uring") {
    return Status::unavailable("io_engine io_uring was configured but is not usable: " +
                               usable.message());
  }
  logger("storage")->warn("io_uring is not usable ({}); using the pread engine", usable.message());
  return std::shared_ptr<IoEngine>(std::make_shared<PreadEngine>());
}

}  // namespace stripesolve::storage
