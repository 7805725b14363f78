#include "base/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "base/units.h"

namespace stripesolve {

struct ConfigMap::Impl {
  YAML::Node node;  // a mapping, or null for an absent section
  std::string source;
  std::string path;  // "" for the root, else "a.b"
  int line = 0;      // 1-based line of the mapping itself (0 if absent)
  std::set<std::string, std::less<>> known;
};

namespace {

std::string join_path(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

// yaml-cpp keeps both entries of a duplicated key and lookups find the first, so a file that
// sets a key twice would silently run on one of its values (issue 15). Refused instead, naming
// the key and both lines, at any depth.
void check_duplicate_keys(const YAML::Node& node, const std::string& path,
                          const std::string& source) {
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      check_duplicate_keys(node[i], path + "[" + std::to_string(i) + "]", source);
    }
    return;
  }
  if (!node.IsMap()) return;
  std::map<std::string, int> first_line;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) continue;
    const std::string key = kv.first.Scalar();
    const int line = kv.first.Mark().line + 1;
    const std::string key_path = join_path(path, key);
    auto [it, fresh] = first_line.emplace(key, line);
    if (!fresh) {
      throw ConfigError(
          fmt::format("{}:{}: {}: duplicate key (also set at line {}); set each key once", source,
                      line, key_path, it->second));
    }
    check_duplicate_keys(kv.second, key_path, source);
  }
}

std::string scalar_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  if (node.IsSequence()) return "a sequence";
  if (node.IsMap()) return "a mapping";
  return "null";
}

// The integer `v` within [min, max], else a ConfigError whose message starts with `where`.
int64_t integer_in_range(const YAML::Node& v, const std::string& where, int64_t min, int64_t max) {
  int64_t value = 0;
  if (!v.IsScalar() || !YAML::convert<int64_t>::decode(v, value)) {
    throw ConfigError(fmt::format("{}: expected an integer, got '{}'", where, scalar_text(v)));
  }
  if (value < min || value > max) {
    throw ConfigError(fmt::format("{}: {} is out of range [{}, {}]", where, value, min, max));
  }
  return value;
}

}  // namespace

ConfigMap::ConfigMap(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ConfigMap::ConfigMap(ConfigMap&&) noexcept = default;
ConfigMap& ConfigMap::operator=(ConfigMap&&) noexcept = default;
ConfigMap::~ConfigMap() = default;

ConfigMap ConfigMap::parse(std::string_view text, std::string source_name) {
  auto impl = std::make_unique<Impl>();
  impl->source = std::move(source_name);
  try {
    impl->node = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    throw ConfigError(impl->source + ":" + std::to_string(e.mark.line + 1) +
                      ": YAML syntax error: " + e.msg);
  }
  check_duplicate_keys(impl->node, "", impl->source);
  if (impl->node.IsNull()) {
    impl->node = YAML::Node(YAML::NodeType::Map);
  } else if (!impl->node.IsMap()) {
    throw ConfigError(impl->source + ":" + std::to_string(impl->node.Mark().line + 1) +
                      ": the document must be a mapping of sections, got " +
                      scalar_text(impl->node));
  }
  impl->line = 1;
  return ConfigMap(std::move(impl));
}

ConfigMap ConfigMap::load_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open the configuration file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(path + ": cannot read the configuration file");
  return parse(text.str(), path);
}

const std::string& ConfigMap::source_name() const {
  return impl_->source;
}

bool ConfigMap::has(std::string_view key) const {
  const YAML::Node& map = impl_->node;
  return map.IsMap() && map[std::string(key)].IsDefined();
}

std::string ConfigMap::where(std::string_view key) const {
  int line = impl_->line;
  if (impl_->node.IsMap()) {
    for (const auto& kv : impl_->node) {
      if (kv.first.Scalar() == key) {
        line = kv.first.Mark().line + 1;
        break;
      }
    }
  }
  return impl_->source + ":" + std::to_string(line) + ": " + join_path(impl_->path, key);
}

namespace {

// Looks up `key`, marks it known, and returns it if present and non-null.
std::optional<YAML::Node> lookup(ConfigMap::Impl& impl, std::string_view key) {
  impl.known.emplace(key);
  const YAML::Node& map = impl.node;  // const: operator[] must not insert the key
  if (!map.IsMap()) return std::nullopt;
  YAML::Node v = map[std::string(key)];
  if (!v.IsDefined() || v.IsNull()) return std::nullopt;
  return v;
}

}  // namespace

void ConfigMap::get(std::string_view key, bool& out) {
  auto found = lookup(*impl_, key);
  if (!found) return;
  const YAML::Node& v = *found;
  if (v.IsScalar()) {
    const std::string& s = v.Scalar();
    if (s == "true" || s == "yes" || s == "on") {
      out = true;
      return;
    }
    if (s == "false" || s == "no" || s == "off") {
      out = false;
      return;
    }
  }
  throw ConfigError(where(key) + ": expected true or false, got '" + scalar_text(v) + "'");
}

void ConfigMap::get(std::string_view key, std::string& out) {
  auto found = lookup(*impl_, key);
  if (!found) return;
  const YAML::Node& v = *found;
  if (!v.IsScalar()) throw ConfigError(where(key) + ": expected a string, got " + scalar_text(v));
  out = v.Scalar();
}

void ConfigMap::get(std::string_view key, std::vector<std::string>& out) {
  auto found = lookup(*impl_, key);
  if (!found) return;
  const YAML::Node& v = *found;
  if (!v.IsSequence()) {
    throw ConfigError(where(key) + ": expected a sequence of strings, got '" + scalar_text(v) +
                      "'");
  }
  std::vector<std::string> items;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].IsScalar()) {
      throw ConfigError(impl_->source + ":" + std::to_string(v[i].Mark().line + 1) + ": " +
                        join_path(impl_->path, key) + "[" + std::to_string(i) +
                        "]: expected a string, got " + scalar_text(v[i]));
    }
    items.push_back(v[i].Scalar());
  }
  out = std::move(items);
}

void ConfigMap::get(std::string_view key, int64_t& out, int64_t min, int64_t max) {
  auto found = lookup(*impl_, key);
  if (!found) return;
  out = integer_in_range(*found, where(key), min, max);
}

void ConfigMap::get(std::string_view key, std::vector<int64_t>& out, int64_t min, int64_t max) {
  auto found = lookup(*impl_, key);
  if (!found) return;
  const YAML::Node& v = *found;
  if (!v.IsSequence()) {
    throw ConfigError(where(key) + ": expected a sequence of integers such as [0, 2], got '" +
                      scalar_text(v) + "'");
  }
  std::vector<int64_t> items;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string item = fmt::format("{}:{}: {}[{}]", impl_->source, v[i].Mark().line + 1,
                                         join_path(impl_->path, key), i);
    const int64_t value = integer_in_range(v[i], item, min, max);
    if (std::find(items.begin(), items.end(), value) != items.end()) {
      throw ConfigError(fmt::format("{}: {} is listed twice", item, value));
    }
    items.push_back(value);
  }
  out = std::move(items);
}

void ConfigMap::get(std::string_view key, double& out, double min, double max) {
  auto found = lookup(*impl_, key);
  if (!found) return;
  const YAML::Node& v = *found;
  double value = 0;
  if (!v.IsScalar() || !YAML::convert<double>::decode(v, value) || !std::isfinite(value)) {
    throw ConfigError(where(key) + ": expected a number, got '" + scalar_text(v) + "'");
  }
  if (value < min || value > max) {
    std::ostringstream msg;
    msg << where(key) << ": " << v.Scalar() << " is out of range [" << min << ", " << max << "]";
    throw ConfigError(msg.str());
  }
  out = value;
}

void ConfigMap::get_bytes(std::string_view key, uint64_t& out, uint64_t min, uint64_t max) {
  auto found = lookup(*impl_, key);
  if (!found) return;
  const YAML::Node& v = *found;
  std::optional<uint64_t> value;
  if (v.IsScalar()) value = parse_bytes(v.Scalar());
  if (!value) {
    throw ConfigError(where(key) + ": expected a byte size such as 64GiB, got '" + scalar_text(v) +
                      "'");
  }
  if (*value < min || *value > max) {
    throw ConfigError(where(key) + ": " + v.Scalar() + " is out of range [" + format_bytes(min) +
                      ", " + format_bytes(max) + "]");
  }
  out = *value;
}

void ConfigMap::get_choice(std::string_view key, std::string& out,
                           std::initializer_list<std::string_view> choices) {
  std::string value = out;
  get(key, value);
  if (std::find(choices.begin(), choices.end(), value) == choices.end()) {
    std::string list;
    for (std::string_view c : choices) list += (list.empty() ? "" : ", ") + std::string(c);
    throw ConfigError(where(key) + ": '" + value + "' is not one of " + list);
  }
  out = value;
}

ConfigMap ConfigMap::section(std::string_view key) {
  auto found = lookup(*impl_, key);
  auto impl = std::make_unique<Impl>();
  impl->source = impl_->source;
  impl->path = join_path(impl_->path, key);
  if (!found) {
    impl->node = YAML::Node(YAML::NodeType::Map);
    impl->line = impl_->line;
  } else if (!found->IsMap()) {
    throw ConfigError(where(key) + ": expected a mapping, got '" + scalar_text(*found) + "'");
  } else {
    impl->node = *found;
    impl->line = found->Mark().line + 1;
  }
  return ConfigMap(std::move(impl));
}

void ConfigMap::finish() const {
  if (!impl_->node.IsMap()) return;
  for (const auto& kv : impl_->node) {
    const std::string key = kv.first.Scalar();
    if (impl_->known.count(key) != 0) continue;
    std::string list;
    for (const std::string& k : impl_->known) list += (list.empty() ? "" : ", ") + k;
    throw ConfigError(impl_->source + ":" + std::to_string(kv.first.Mark().line + 1) + ": " +
                      join_path(impl_->path, key) + ": unknown key" +
                      (list.empty() ? std::string() : " (expected one of: " + list + ")"));
  }
}

}  // namespace stripesolve
