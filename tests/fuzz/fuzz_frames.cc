// The protocol fuzz test's frames (fuzz_frames.h).
#include "tests/fuzz/fuzz_frames.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/frame.h"
#include "protocol/messages.h"
#include "protocol/npy.h"

namespace stripesolve::testing {

using protocol::MessageType;

namespace {

const std::vector<std::string> fuzz_names = {"f0",
                                             "f1",
                                             "f2",
                                             "f3",
                                             "f0.lu.row",
                                             "",
                                             "x",
                                             "-bad",
                                             "a/b",
                                             std::string(130, 'n'),
                                             std::string(119, 'm')};
const std::vector<std::string> fuzz_words = {
    "matrix_create", "matrix_list",  "matrix_show",   "matrix_delete", "dense_solve",
    "tridiag_solve", "uniform",      "diag_dominant", "normal",        "identity",
    "hilbert",       "gepp_growth",  "ones",          "row",           "local",
    "none",          "basic",        "zigzag",        "meta_zigzag",   "strided",
    "interleaved",   "auto",         "cpu",           "gpu",           "thomas",
    "pcr",           "spike",        "gepp",          "drain",         "cancel",
    "\xff\xfe",      "\u00e9\u4e2d", "null"};

// `deep`: may nest past the parser's limit of 32 levels (a protocol error: the connection ends).
nlohmann::json random_value(Rng& r, bool deep, int depth = 0) {
  switch (r.below(depth > 3 ? 9 : deep ? 12 : 11)) {
    case 0:
      return nullptr;
    case 1:
      return r.chance(0.5);
    case 2:
      return static_cast<int64_t>(r.below(2000)) - 5;
    case 3:
      return r.pick(std::vector<int64_t>{0, -1, 1, 2, 1 << 20, int64_t{1} << 30, int64_t{1} << 40,
                                         INT64_MAX, INT64_MIN, 4194304, 1000000});
    case 4:
      return UINT64_MAX - r.below(3);
    case 5:
      return r.pick(std::vector<double>{0.5, -0.0, 1e308, -1e308, 3.7, 1e-320});
    case 6:
      return r.pick(fuzz_words);
    case 7:
      return r.pick(fuzz_names);
    case 8: {
      std::string s(r.below(40), ' ');
      for (char& c : s) c = static_cast<char>(r.below(256));
      return s;
    }
    case 9: {
      nlohmann::json a = nlohmann::json::array();
      for (uint64_t k = r.below(4); k > 0; --k) a.push_back(random_value(r, deep, depth + 1));
      return a;
    }
    case 10: {
      nlohmann::json o = nlohmann::json::object();
      for (uint64_t k = r.below(4); k > 0; --k)
        o[r.pick(fuzz_words)] = random_value(r, deep, depth + 1);
      return o;
    }
    default: {  // deep nesting, around the parser's limit of 32 levels
      nlohmann::json v = 1;
      for (uint64_t k = 25 + r.below(15); k > 0; --k) v = nlohmann::json::array({v});
      return v;
    }
  }
}

std::string small_npy(Rng& r, int64_t rows, int64_t cols) {
  std::string out = protocol::make_npy_header(
      cols > 0 ? std::vector<int64_t>{rows, cols} : std::vector<int64_t>{rows}, false);
  for (int64_t k = 0; k < rows * std::max<int64_t>(1, cols); ++k) {
    const double v = 4.0 + static_cast<double>(r.below(1000)) / 1000.0;
    out.append(reinterpret_cast<const char*>(&v), 8);
  }
  return out;
}

struct Template {
  MessageType type = MessageType::kPing;
  nlohmann::json header = nlohmann::json::object();
  std::string payload;
  uint32_t flags = 0;
};

// A valid request of any kind (its fields plausible, or on their limits).
Template make_template(Rng& r, uint64_t upload_guess) {
  Template t;
  const auto job_id = [&] { return static_cast<int64_t>(1 + r.below(300)); };
  const auto upload_id = [&] {
    return static_cast<int64_t>(upload_guess > 4 ? upload_guess - r.below(4) : 1 + r.below(5));
  };
  const auto submit = [&](nlohmann::json job) {
    t.type = MessageType::kSubmit;
    t.header = {{"job", std::move(job)}};
    if (r.chance(0.2)) t.header["wait"] = true;
  };
  switch (r.below(16)) {
    case 0:
      t.type = MessageType::kPing;
      break;
    case 1:
      t.type = MessageType::kJobs;
      if (r.chance(0.5)) t.header = {{"all", r.chance(0.5)}};
      break;
    case 2:
      t.type = r.pick(std::vector<MessageType>{MessageType::kStatus, MessageType::kWatch,
                                               MessageType::kCancel, MessageType::kResult,
                                               MessageType::kLogs, MessageType::kTrace});
      t.header = {{"job", job_id()}};
      break;
    case 3:
      t.type = r.chance(0.5) ? MessageType::kMetrics : MessageType::kDaemonStatus;
      break;
    case 4: {  // one piece of an upload, often a whole small .npy
      t.type = MessageType::kUpload;
      if (r.chance(0.6)) {
        t.payload = small_npy(r, 1 + static_cast<int64_t>(r.below(64)), r.chance(0.3) ? 2 : 0);
        t.flags = protocol::kFlagFinal;
      } else {
        t.payload.assign(r.chance(0.1) ? r.below(2u << 20) : r.below(4096), 'u');
        t.flags = r.chance(0.5) ? protocol::kFlagFinal : 0;
      }
      break;
    }
    case 5:
    case 6:
      submit(
          {{"type", "matrix_create"},
           {"name", r.pick(fuzz_names)},
           {"n", r.chance(0.9) ? static_cast<int64_t>(1 + r.below(200))
                               : r.pick(std::vector<int64_t>{1000000, int64_t{1} << 30, 100000})},
           {"seed", static_cast<int64_t>(r.below(10))},
           {"generator", r.pick(std::vector<std::string>{"uniform", "diag_dominant", "identity",
                                                         "hilbert", "nope"})},
           {"stripe_rows", static_cast<int64_t>(r.below(80))}});
      break;
    case 7:
      submit({{"type", "matrix_list"}});
      break;
    case 8:
      submit({{"type", r.chance(0.5) ? "matrix_show" : "matrix_delete"},
              {"name", r.pick(fuzz_names)}});
      break;
    case 9:
    case 10: {
      nlohmann::json job = {
          {"type", "dense_solve"},
          {"matrix", r.pick(fuzz_names)},
          {"pivot", r.pick(std::vector<std::string>{"row", "local", "none"})},
          {"strategy", r.pick(std::vector<std::string>{"basic", "zigzag", "meta_zigzag"})},
          {"refinement", static_cast<int64_t>(r.below(3))},
          {"in_place", r.chance(0.1)},
          {"reuse", r.chance(0.8)},
          {"store", r.chance(0.8)}};
      if (r.chance(0.7)) {
        job["rhs"] = {
            {"generate", r.chance(0.5) ? "ones" : "uniform"},
            {"nrhs", r.chance(0.9) ? static_cast<int64_t>(1 + r.below(4)) : int64_t{1} << 22},
            {"seed", static_cast<int64_t>(r.below(5))}};
      } else {
        job["rhs"] = {{"upload", upload_id()}};
      }
      submit(std::move(job));
      break;
    }
    case 11: {
      nlohmann::json job = {{"type", "tridiag_solve"}};
      for (const char* a : {"dl", "d", "du", "rhs"}) job[a] = {{"upload", upload_id()}};
      if (r.chance(0.3)) job["sizes"] = nlohmann::json::array({1, 2, 3});
      if (r.chance(0.5))
        job["algorithm"] =
            r.pick(std::vector<std::string>{"auto", "thomas", "pcr", "spike", "gepp"});
      if (r.chance(0.3)) job["device"] = "cpu";
      submit(std::move(job));
      break;
    }
    case 12:
      t.type = MessageType::kHello;
      t.header = protocol::make_hello("fuzz-again").header;
      break;
    default:
      t.type = MessageType::kPing;
      break;
  }
  return t;
}

// Every node of a JSON document, for picking one to change.
void collect(nlohmann::json& j, std::vector<nlohmann::json*>& out) {
  out.push_back(&j);
  if (j.is_structured()) {
    for (auto& child : j) collect(child, out);
  }
}

// Changes one node of `header`; `gentle` keeps it an object nesting within the parser's limit.
void mutate_json(nlohmann::json& header, Rng& r, bool gentle) {
  std::vector<nlohmann::json*> nodes;
  collect(header, nodes);
  nlohmann::json& node = *nodes[r.below(nodes.size())];
  if (&node == &header && header.is_object() && r.chance(0.7)) {  // mostly keep an object on top
    if (!header.empty() && r.chance(0.5)) {
      auto it = header.begin();
      std::advance(it, static_cast<long>(r.below(header.size())));
      header.erase(it);
    } else {
      header[r.pick(fuzz_words)] = random_value(r, !gentle);
    }
    return;
  }
  if (&node == &header && gentle) {
    header = {{r.pick(fuzz_words), random_value(r, false)}};
    return;
  }
  if (node.is_object() && r.chance(0.5)) {
    if (!node.empty() && r.chance(0.5)) {
      auto it = node.begin();
      std::advance(it, static_cast<long>(r.below(node.size())));
      node.erase(it);
    } else {
      node[r.pick(fuzz_words)] = random_value(r, !gentle);
    }
    return;
  }
  node = random_value(r, !gentle);
}

}  // namespace

std::string raw_frame(uint16_t type, uint32_t flags, uint64_t request_id, const std::string& json,
                      const std::string& payload) {
  std::string out(protocol::kFixedHeaderBytes, '\0');
  const auto put = [&out](size_t at, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put(0, protocol::kMagic, 4);
  put(4, protocol::kProtocolVersion, 2);
  put(6, type, 2);
  put(8, flags, 4);
  put(12, json.size(), 4);
  put(16, request_id, 8);
  put(24, payload.size(), 4);
  return out + json + payload;
}

void mutate_bytes(std::string& bytes, Rng& r) {
  for (uint64_t k = 1 + r.below(4); k > 0 && !bytes.empty(); --k) {
    const size_t at = r.below(bytes.size());
    switch (r.below(7)) {
      case 0:
        bytes[at] = static_cast<char>(bytes[at] ^ (1 << r.below(8)));
        break;
      case 1:
        bytes[at] = static_cast<char>(r.below(256));
        break;
      case 2:
        bytes.resize(at);
        break;  // truncated
      case 3:
        bytes.insert(at, std::string(1 + r.below(16), static_cast<char>(r.below(256))));
        break;
      case 4:
        bytes.erase(at, 1 + r.below(16));
        break;
      default: {  // a length field of the fixed header
        if (bytes.size() < protocol::kFixedHeaderBytes) break;
        const size_t field = r.chance(0.5) ? 12 : 24;
        const uint32_t v =
            r.chance(0.5) ? static_cast<uint32_t>(r.next()) : static_cast<uint32_t>(r.below(80000));
        for (int i = 0; i < 4; ++i) bytes[field + i] = static_cast<char>((v >> (8 * i)) & 0xff);
        break;
      }
    }
  }
  // Never daemon_stop: the fuzzer may stop its daemon (same uid).
  if (bytes.size() >= 8 && static_cast<uint8_t>(bytes[6]) == 20 && bytes[7] == 0) bytes[6] = 2;
}

std::string fuzz_frame(Rng& r, uint64_t upload_guess, bool gentle) {
  if (!gentle && r.chance(0.04)) {  // plain noise
    std::string noise(1 + r.below(200), '\0');
    for (char& c : noise) c = static_cast<char>(r.below(256));
    return noise;
  }
  Template t = make_template(r, upload_guess);
  while (gentle && t.type == MessageType::kHello) t = make_template(r, upload_guess);
  uint64_t request_id = 1 + r.below(64);
  uint16_t type = static_cast<uint16_t>(t.type);
  uint32_t flags = t.flags;
  const double p = static_cast<double>(r.below(1000)) / 1000.0;
  if (p < 0.35) {
    mutate_json(t.header, r, gentle);
    if (r.chance(0.3)) mutate_json(t.header, r, gentle);
  } else if (p < 0.45 && !gentle) {
    switch (r.below(4)) {
      case 0:
        type = static_cast<uint16_t>(r.below(30));
        break;
      case 1:
        type = static_cast<uint16_t>(r.next());
        break;
      case 2:
        flags = static_cast<uint32_t>(r.next());
        break;
      default:
        request_id = r.next() % kPingIdBase;
        break;
    }
    if (type == static_cast<uint16_t>(MessageType::kDaemonStop))
      type = static_cast<uint16_t>(MessageType::kPing);
  }
  std::string json = t.header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (!gentle && r.chance(0.01))
    json = std::string("{\"a\": \"").append(70000, 'a') + "\"}";  // too large
  std::string bytes = raw_frame(type, flags, request_id, json, t.payload);
  if (!gentle && p >= 0.45 && p < 0.6) mutate_bytes(bytes, r);
  return bytes;
}

std::string describe_frames(const std::string& bytes) {
  protocol::FrameParser parser;
  const auto st = parser.feed(bytes);
  std::string text;
  while (auto f = parser.next()) {
    std::string header = f->header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (header.size() > 160) header = header.substr(0, 160) + "...";
    text += "  type " + std::to_string(f->type) + " id " + std::to_string(f->request_id) + " " +
            header + " (" + std::to_string(f->payload.size()) + " payload bytes)\n";
  }
  text += st.is_ok() ? (parser.at_frame_boundary() ? "  (ends at a frame boundary)\n"
                                                   : "  (ends inside a frame)\n")
                     : "  (the parser stops: " + st.message() + ")\n";
  return text;
}

}  // namespace stripesolve::testing
