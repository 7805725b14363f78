// bench_dense_gpu's command line (bench_args.h).
#include "bench/dense_gpu/bench_args.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "base/units.h"
#include "storage/store_config.h"

namespace dense_gpu_bench {

namespace ss = stripesolve;
using nlohmann::json;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

[[noreturn]] void usage(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "bench_dense_gpu: %s\n", why.c_str());
  std::fprintf(
      stderr,
      "usage: bench_dense_gpu [--mode fits|ram|ssd] [--n N,N..] [--nrhs R] "
      "[--pivot row|local|none|gepp] [--ram-budget BYTES] [--gpu-memory BYTES] [--gpus N] "
      "[--update-k K] [--segment-columns C] "
      "[--panel-sms K] [--panel-blocks B[,B2..]] [--reps R] "
      "[--dgemm-reps R] [--persist-factors [--no-records]] [--stream-a] [--stripe-rows S] "
      "[--meta-stripes M] "
      "[--elim-j-workers K] [--lookahead-lanes L] [--early-next E] [--upward-lead L] [--io-threads "
      "T] [--dir D] "
      "[--backend cuda|auto|cpu] [--cusolver-api legacy|64] [--disk-bytes BYTES] "
      "[--queue-depth Q] [--request-bytes BYTES] [--skip engine,cusolver,dgemm,disk] [--trace "
      "PREFIX]\n"
      "BYTES: 4096, 12GiB, 1.5GiB, 500MB, ... (base/units.h)\n");
  std::exit(2);
}

namespace {

int64_t parse_int(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  try {
    size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used == v.size() && x >= lo && x <= hi) return x;
  } catch (const std::exception&) {
  }
  usage(flag + " wants an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
        "], got '" + v + "'");
}

uint64_t parse_size(const std::string& flag, const std::string& v) {
  auto b = ss::parse_bytes(v);
  if (!b) usage(flag + " wants a byte size (4096, 12GiB, 1.5GiB, 500MB), got '" + v + "'");
  return *b;
}

}  // namespace

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") usage("");
    if (arg == "--persist-factors") {
      a.persist_factors = true;
      continue;
    }
    if (arg == "--no-records") {
      a.records = false;
      continue;
    }
    if (arg == "--stream-a") {
      a.stream_a = true;
      continue;
    }
    if (i + 1 >= argc) usage(arg + " needs a value");
    const std::string v = argv[++i];
    if (arg == "--mode") {
      if (v != "fits" && v != "ram" && v != "ssd") usage("--mode is fits, ram or ssd");
      a.mode = v;
    } else if (arg == "--n") {
      a.ns.clear();
      for (const auto& s : split(v)) a.ns.push_back(parse_int("--n", s, 1, int64_t{1} << 30));
      if (a.ns.empty()) usage("--n wants a list of orders");
    } else if (arg == "--nrhs") {
      a.nrhs = parse_int(arg, v, 1, 1 << 20);
    } else if (arg == "--pivot") {
      if (v != "row" && v != "local" && v != "none" && v != "gepp") {
        usage("--pivot is row, local, none or gepp");
      }
      a.pivot = v;
    } else if (arg == "--ram-budget") {
      a.ram_budget = parse_size(arg, v);
    } else if (arg == "--gpu-memory") {
      a.gpu_memory = parse_size(arg, v);
    } else if (arg == "--gpus") {
      a.gpus = parse_int(arg, v, 0, 64);
    } else if (arg == "--panel-sms") {
      a.panel_sms = parse_int(arg, v, 0, 1024);
    } else if (arg == "--panel-blocks") {
      const std::vector<std::string> values = split(v);
      if (values.empty()) usage("--panel-blocks: no value");
      a.panel_blocks = parse_int(arg, values[0], 0, 64);
      for (size_t at = 1; at < values.size(); ++at) {
        a.panel_blocks_paired.push_back(parse_int(arg, values[at], 0, 64));
      }
    } else if (arg == "--update-k") {
      a.update_k = parse_int(arg, v, 0, int64_t{1} << 20);
    } else if (arg == "--segment-columns") {
      a.segment_columns = parse_int(arg, v, 0, int64_t{1} << 30);
    } else if (arg == "--reps") {
      a.reps = static_cast<int>(parse_int(arg, v, 1, 1000));
    } else if (arg == "--dgemm-reps") {
      a.dgemm_reps = static_cast<int>(parse_int(arg, v, 1, 1000));
    } else if (arg == "--meta-stripes") {
      a.meta_stripes = parse_int(arg, v, 0, 1 << 20);
    } else if (arg == "--elim-j-workers") {
      a.elim_j_workers = parse_int(arg, v, 0, 64);
    } else if (arg == "--lookahead-lanes") {
      a.lookahead_lanes = parse_int(arg, v, 0, 8);
    } else if (arg == "--early-next") {
      a.early_next = parse_int(arg, v, -1, 64);
    } else if (arg == "--io-threads") {
      a.io_threads = parse_int(arg, v, 1, 8);
    } else if (arg == "--upward-lead") {
      a.upward_lead = parse_int(arg, v, -1, 1 << 20);
    } else if (arg == "--stripe-rows") {
      a.stripe_rows = parse_int(arg, v, 0, 1 << 20);
    } else if (arg == "--dir") {
      if (v.empty() || v == "/") usage("--dir must name a directory other than /");
      a.dir = v;
    } else if (arg == "--backend") {
      if (v != "cuda" && v != "auto" && v != "cpu") usage("--backend is cuda, auto or cpu");
      a.backend = v;
    } else if (arg == "--cusolver-api") {
      if (v != "legacy" && v != "64") usage("--cusolver-api is legacy or 64");
      a.cusolver_api = v;
    } else if (arg == "--trace") {
      a.trace = v;
    } else if (arg == "--disk-bytes") {
      a.disk_bytes = parse_size(arg, v);
    } else if (arg == "--queue-depth") {
      a.queue_depth = parse_int(arg, v, 1, ss::storage::kMaxQueueDepth);
    } else if (arg == "--request-bytes") {
      a.request_bytes = parse_size(arg, v);
      if (a.request_bytes < ss::storage::kMinRequestBytes ||
          a.request_bytes > ss::storage::kMaxRequestBytes || a.request_bytes % 4096 != 0) {
        usage("--request-bytes is a multiple of 4 KiB from 4 KiB to 1 GiB");
      }
    } else if (arg == "--skip") {
      for (const auto& s : split(v)) {
        if (s != "engine" && s != "cusolver" && s != "dgemm" && s != "disk") {
          usage("--skip takes engine, cusolver, dgemm, disk");
        }
        a.skip.insert(s);
      }
    } else {
      usage("unknown argument " + arg);
    }
  }
  if (a.mode == "ram" && !a.gpu_memory) a.gpu_memory = 12 * ss::kGiB;
  if (a.mode == "ssd") {
    if (!a.ram_budget) a.ram_budget = 4 * ss::kGiB;
    if (!a.gpu_memory) a.gpu_memory = 8 * ss::kGiB;
    if (!a.disk_bytes) a.disk_bytes = 4 * ss::kGiB;
  }
  return a;
}

json args_json(const Args& a) {
  json j = {{"mode", a.mode},
            {"n", a.ns},
            {"nrhs", a.nrhs},
            {"pivot", a.pivot},
            {"reps", a.reps},
            {"dgemm_reps", a.dgemm_reps},
            {"persist_factors", a.persist_factors},
            {"records", a.persist_factors && a.records},
            {"stream_a", a.stream_a},
            {"stripe_rows", a.stripe_rows},
            {"dir", a.dir},
            {"backend", a.backend},
            {"cusolver_api", a.cusolver_api},
            {"skip", a.skip}};
  j["ram_budget"] = a.ram_budget ? json(*a.ram_budget) : json("1.25 x matrix");
  j["gpu_memory"] = a.gpu_memory ? json(*a.gpu_memory) : json("engine default");
  j["gpus"] = a.gpus == 0 ? json("all") : json(a.gpus);
  j["panel_sms"] = a.panel_sms;
  j["update_k"] = a.update_k;
  j["panel_blocks"] = a.panel_blocks;
  j["panel_blocks_paired"] = a.panel_blocks_paired;
  j["segment_columns"] = a.segment_columns;
  j["lookahead_lanes"] = a.lookahead_lanes;
  j["early_next"] = a.early_next;
  j["upward_lead"] = a.upward_lead;
  j["io_threads"] = a.io_threads;
  j["disk_bytes"] = a.disk_bytes ? json(*a.disk_bytes) : json(0);
  j["queue_depth"] = a.queue_depth == 0 ? json("store default") : json(a.queue_depth);
  j["request_bytes"] = a.request_bytes == 0 ? json("store default") : json(a.request_bytes);
  return j;
}

json host_json() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) name[0] = 0;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  // The kernel's transparent huge page setting, e.g. "always [madvise] never": whether the RAM
  // cache's huge pages (engine.huge_pages) were granted, which moves the load's time.
  std::string thp;
  std::getline(std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled"), thp);
  return {{"hostname", std::string(name)},
          {"nproc", sysconf(_SC_NPROCESSORS_ONLN)},
          {"hardware_concurrency", std::thread::hardware_concurrency()},
          {"ram_bytes", pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0},
          {"transparent_hugepage", thp}};
}

}  // namespace dense_gpu_bench
