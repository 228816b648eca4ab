// The hand-written argument loops (benchkv probe, calibrate, sweep) take each single-valued
// option once, as the main modes' parser does: a second occurrence is an error naming the
// option, not a silent replacement of the first value (`-o a.json -o b.json` wrote b.json
// only; `--from p1.json --from p2.json` fitted p2.json alone).
#pragma once

#include <set>
#include <string>
#include <string_view>

namespace bkv::app {

class SingleOptions {
 public:
  // True the first time `name` (the option's long name, whichever spelling was given) is
  // seen; false on each later time.
  bool first(std::string_view name) { return seen_.emplace(name).second; }

  static std::string twice(std::string_view mode, std::string_view name) {
    return std::string(mode) + ": " + std::string(name) + " given more than once (it takes one value)";
  }

 private:
  std::set<std::string, std::less<>> seen_;
};

}  // namespace bkv::app
