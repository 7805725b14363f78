// The protocol fuzz test's frames (protocol_fuzz_test.cc): templates of every request, mutated in
// their JSON, their frame fields or their bytes, or plain noise; and the frames of a session as
// the daemon's parser reads them, for a failed session's report.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace stripesolve::testing {

// The request ids of a burst's frames stay below this; a session's ping takes one from it up.
inline constexpr uint64_t kPingIdBase = uint64_t{1} << 62;

// A seeded generator; one a session thread, so that a seed replays a run.
class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  uint64_t next() { return g_(); }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : g_() % n; }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(g_) < p; }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

 private:
  std::mt19937_64 g_;
};

// One frame as bytes, encoded without any limit check, so that oversized headers and payloads
// reach the daemon.
std::string raw_frame(uint16_t type, uint32_t flags, uint64_t request_id, const std::string& json,
                      const std::string& payload);

// Flips, truncates or stretches `bytes`, or changes a frame field in place.
void mutate_bytes(std::string& bytes, Rng& r);

// One frame of a burst, as bytes. A `gentle` frame is well framed and not a second hello: only
// its JSON is mutated, so that the daemon processes every frame of a gentle burst; the others
// also change frame fields and bytes, which mostly end the connection. `upload_guess`: the
// highest upload id the daemon has named, so that upload frames may hit a live one.
std::string fuzz_frame(Rng& r, uint64_t upload_guess, bool gentle);

// The frames of a session's bytes as the mirror parser reads them (type, request id, header cut
// at 160 characters), and where it stopped: what a failed session prints to be replayed.
std::string describe_frames(const std::string& bytes);

}  // namespace stripesolve::testing
