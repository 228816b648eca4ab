// Which options apply to which transport and run mode (applicability.cpp): one rule per
// option, in the option table's order. An option set to anything but its default where it
// does not apply is an error naming it (validate), never silently ignored;
// parse_command_line turns the case of a value that came from a config file into a
// one-line warning and resets the option (a config file may describe several modes).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "apps/benchkv/cli/options.hpp"

namespace bkv::app::option_detail {

struct Applicability {
  std::string_view key;
  bool (*applies)(const Options&);
  std::string_view what;  // what the option is, for the message
};

bool is_sim(const Options& o);   // --transport sim
bool is_rpc(const Options& o);   // run mode rpc
bool is_data(const Options& o);  // run mode data
bool is_kv(const Options& o);    // run mode kv (no backend yet: judged as kv)
bool sim_kv(const Options& o);   // a simulated KV run

// Whether --help for `mode` lists the option: it applies to that mode under some transport
// (options that apply only once another is set, zipf_s with zipfian, count as applying).
bool applies_to_mode(std::string_view key, Mode mode);
// The first option set where it does not apply, or nullptr.
const Applicability* first_inapplicable(const Options& o);
std::string inapplicable_message(const Options& o, const Applicability& a);
// Resets to its default every option set where it does not apply and that may_drop
// accepts, telling note() about each (one line, no trailing period); stops at the first
// one may_drop refuses (validate() then reports it as an error). Dropping one option can
// make another inapplicable (trace -> trace_window), hence the loop.
void drop_inapplicable(Options& o, const std::function<bool(std::string_view)>& may_drop,
                       const std::function<void(std::string)>& note);

}  // namespace bkv::app::option_detail
