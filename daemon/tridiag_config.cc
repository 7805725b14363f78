#include "daemon/tridiag_config.h"

#include "base/config.h"

namespace stripesolve::daemon {

void parse_tridiag_job_config(ConfigMap& map, TridiagJobConfig& config) {
  map.get_bytes("max_bytes", config.max_bytes, 1 * kKiB);
  map.get("threads", config.threads, 0, 4096);
  map.get_bytes("gpu_memory", config.gpu_memory);
  map.finish();
}

}  // namespace stripesolve::daemon
