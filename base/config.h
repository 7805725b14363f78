// Reading typed configuration from YAML (yaml-cpp).
//
// Each module owns a plain config struct whose members carry their documented defaults, and a
// `parse_*` function that reads its section through a ConfigMap. The reader is strict: a key that
// no parse function asked for, a value of the wrong type, or a value out of range throws a
// ConfigError whose message names the file, the 1-based line and the full key path, e.g.
//
//   stripesolved.yaml:7: cache.ram_budget: expected a byte size such as 64GiB, got 'lots'
//   stripesolved.yaml:3: log.levle: unknown key (expected one of: level, file, format)
//
// Exceptions are used here because configuration errors happen at start-up or on reload, where
// the caller reports them and stops (STYLE.md: errors are values below, exceptions at the edge).
//
// Thread-safety: a ConfigMap is used by one thread while parsing; the resulting structs are
// plain values.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace YAML {
class Node;
}

namespace stripesolve {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A YAML mapping being read, with the path from the document root ("" for the root).
class ConfigMap {
 public:
  // Parses `text` as a YAML document whose root must be a mapping (an empty document is an empty
  // mapping). `source_name` is used in messages (a file path, or e.g. "<embedded defaults>").
  static ConfigMap parse(std::string_view text, std::string source_name);
  // Reads and parses a file; a missing or unreadable file is a ConfigError naming it.
  static ConfigMap load_file(const std::string& path);

  ConfigMap(ConfigMap&&) noexcept;
  ConfigMap& operator=(ConfigMap&&) noexcept;
  ~ConfigMap();

  // Each getter leaves `out` unchanged (the default) when the key is absent, and marks the key as
  // known. A present key with a null value (`key:` or `key: ~`) also keeps the default.
  void get(std::string_view key, bool& out);
  void get(std::string_view key, std::string& out);
  void get(std::string_view key, std::vector<std::string>& out);  // a sequence of strings
  void get(std::string_view key, int64_t& out, int64_t min, int64_t max);
  // A sequence of integers, each within [min, max] and none twice (`[0, 2]`).
  void get(std::string_view key, std::vector<int64_t>& out, int64_t min, int64_t max);
  void get(std::string_view key, double& out, double min, double max);
  // A byte size: an integer or a string with a unit (base/units.h), within [min, max].
  void get_bytes(std::string_view key, uint64_t& out, uint64_t min = 0, uint64_t max = UINT64_MAX);
  // A string that must be one of `choices`.
  void get_choice(std::string_view key, std::string& out,
                  std::initializer_list<std::string_view> choices);

  // A nested mapping; absent -> an empty mapping (all defaults). Its keys are checked by its own
  // finish(), which the caller must call.
  ConfigMap section(std::string_view key);

  bool has(std::string_view key) const;

  // Throws for the first key of this mapping that no getter asked for.
  void finish() const;

  // "file:line: path.key" prefix for messages about `key` (line of the key if present).
  std::string where(std::string_view key) const;
  const std::string& source_name() const;

  struct Impl;  // opaque

 private:
  explicit ConfigMap(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stripesolve
