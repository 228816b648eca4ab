// Options from JSON: an object (options_from_json), a config file (options_from_file);
// the command line applies a config file the same way before its own options.
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "apps/benchkv/cli/applicability.hpp"
#include "apps/benchkv/cli/option_table.hpp"
#include "apps/benchkv/cli/options.hpp"
#include "core/strict_json.hpp"

namespace bkv::app::option_detail {

namespace fs = std::filesystem;

namespace {

std::string suggestion(std::string_view key) {
  std::string_view best;
  size_t best_d = 4;  // suggest only close matches
  for (const auto& s : specs()) {
    const size_t d = edit_distance(key, s.key);
    if (d < best_d) {
      best_d = d;
      best = s.key;
    }
  }
  return best.empty() ? std::string() : fmt::format(" (did you mean \"{}\"?)", best);
}

}  // namespace

// Applies the keys present in a JSON object; no range checks (validate() runs on the
// merged result, so a config value overridden on the command line may be out of range).
void apply_object(Options& o, const json& j, const Ctx& c, bool& summary_given) {
  if (!j.is_object()) {
    throw OptionError("config", fmt::format("config: expected a JSON object of options, got {} ({})",
                                            j.type_name(), c.source));
  }
  for (const auto& [key, value] : j.items()) {
    if (key == "config" || key == "print_config" || key == "version") {
      throw OptionError(key, fmt::format("{}: only valid on the command line, not as a JSON key ({})", key,
                                         c.source));
    }
    const Spec* spec = nullptr;
    for (const auto& s : specs()) {
      if (s.key == key) spec = &s;
    }
    if (spec == nullptr) {
      throw OptionError(key, fmt::format("unknown key \"{}\"{} ({})", key, suggestion(key), c.source));
    }
    spec->set(o, value, *spec, c);
    if (key == "summary") summary_given = true;
  }
}

void finish(Options& o, bool summary_given) {
  if (!summary_given) o.summary = default_summary_path(o.output);
  // "auto" follows --output, so that a config's samples are not shared by runs that were
  // given other outputs on the command line.
  if (o.inflight_samples == kAutoPath) o.inflight_samples = default_inflight_path(o.output);
}

json read_config_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw OptionError("config", fmt::format("config: \"{}\" is not a regular file{}", path,
                                            fs::exists(path, ec) ? "" : " (it does not exist)"));
  }
  std::ifstream in(path);
  if (!in) {
    throw OptionError("config", fmt::format("config: cannot open \"{}\": {}", path, std::strerror(errno)));
  }
  try {
    return parse_json_without_duplicate_keys(in, fmt::format("config: \"{}\"", path));
  } catch (const json::parse_error& e) {
    throw OptionError("config", fmt::format("config: \"{}\" is not valid JSON: {}", path, e.what()));
  } catch (const std::runtime_error& e) {
    throw OptionError("config", e.what());
  }
}

std::string parent_dir(const std::string& path) { return fs::path(path).parent_path().string(); }

}  // namespace bkv::app::option_detail

namespace bkv::app {

using namespace option_detail;
namespace fs = std::filesystem;

std::string default_summary_path(const std::string& output) {
  fs::path p(output);
  p.replace_extension(".summary.json");
  return p.string();
}
std::string default_inflight_path(const std::string& output) {
  return fs::path(output).replace_extension(".inflight.csv").string();
}

Options options_from_json(const json& j, const std::string& base_dir) {
  Options o;
  bool summary_given = false;
  apply_object(o, j, Ctx{"JSON configuration", base_dir}, summary_given);
  finish(o, summary_given);
  validate(o, /*require_backend=*/false);
  return o;
}

Options options_from_json(const json& j, const std::string& base_dir, const std::vector<std::string>& strict_keys,
                          std::vector<std::string>& dropped) {
  Options o;
  bool summary_given = false;
  apply_object(o, j, Ctx{"JSON configuration", base_dir}, summary_given);
  finish(o, summary_given);
  drop_inapplicable(o, [&](std::string_view key) {
    return std::find(strict_keys.begin(), strict_keys.end(), key) == strict_keys.end();
  }, [&](std::string line) { dropped.push_back(std::move(line)); });
  validate(o, /*require_backend=*/false);
  return o;
}

Options options_from_file(const std::string& path) {
  const json j = read_config_file(path);
  Options o;
  bool summary_given = false;
  apply_object(o, j, Ctx{fmt::format("config file \"{}\"", path), parent_dir(path)}, summary_given);
  finish(o, summary_given);
  validate(o, /*require_backend=*/false);
  return o;
}

}  // namespace bkv::app
