// Which transports UCX selected for a run's endpoints (the summary's
// provenance.ucx_transports, printed in the report's configuration header): read from
// ucp_ep_print_info's text, which the UCX transport and the ucx-am nodes keep for every
// endpoint they make (UCX 1.13 has no query for it). Two runs compared over different
// transports (shared memory against TCP, as UCX picks with and without peer error
// handling) measure the transports, not the backends: `benchkv compare` refuses them.
//
//   {"am": ["sysv/memory"],                 transports/devices of the lanes that carry
//                                            active messages: every backend's messages
//    "lanes": ["am,am_bw sysv/memory",       every lane seen: what it carries, transport/device
//              "rma_bw cma/memory", ...],
//    "endpoints": 8}                         endpoints described, over every rank
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/benchkv/real/mpi_orchestration.hpp"

namespace bkv::real {

struct UcxTransportsSeen {
  std::set<std::string> am, lanes;
  uint64_t endpoints = 0;

  // One endpoint's ucp_ep_print_info text: its "lane[i]: N:tl/dev.k md[m] -> ... uses"
  // lines. A lane that names no use carries RMA (put/get lines point at it).
  void add_description(std::string_view text) {
    ++endpoints;
    std::istringstream in{std::string(text)};
    std::string line;
    while (std::getline(in, line)) {
      const size_t lane = line.find("lane[");
      if (lane == std::string::npos) continue;
      std::istringstream words(line.substr(lane));
      std::string word, resource;
      words >> word >> resource;  // "lane[0]:", "3:sysv/memory.0"
      const size_t colon = resource.find(':'), dot = resource.rfind('.');
      if (colon == std::string::npos) continue;
      const std::string tl = resource.substr(colon + 1, dot != std::string::npos && dot > colon ? dot - colon - 1 : std::string::npos);
      bool past_arrow = false, seen_sysdev = false;
      std::string uses;
      while (words >> word) {
        if (word == "->") {
          past_arrow = true;
          continue;
        }
        if (!past_arrow) continue;
        if (!seen_sysdev) {  // "md[2]/sysv/sysdev[255]" comes first
          seen_sysdev = word.find("sysdev[") != std::string::npos;
          continue;
        }
        const std::string use = word.substr(0, word.find('#'));  // "am_bw#0" -> "am_bw"
        if (use == "am") this->am.insert(tl);
        uses += (uses.empty() ? "" : ",") + use;
      }
      lanes.insert((uses.empty() ? std::string("rma") : uses) + " " + tl);
    }
  }

  // A text form for gathering over ranks ("am X", "lane Y", "endpoints N" lines), and back.
  std::string to_text() const {
    std::string t = "endpoints " + std::to_string(endpoints) + "\n";
    for (const auto& a : am) t += "am " + a + "\n";
    for (const auto& l : lanes) t += "lane " + l + "\n";
    return t;
  }
  void merge_text(std::string_view text) {
    std::istringstream in{std::string(text)};
    std::string line;
    while (std::getline(in, line)) {
      const size_t space = line.find(' ');
      if (space == std::string::npos) continue;
      const std::string kind = line.substr(0, space), rest = line.substr(space + 1);
      if (kind == "endpoints") endpoints += std::stoull(rest);
      else if (kind == "am") am.insert(rest);
      else if (kind == "lane") lanes.insert(rest);
    }
  }

  nlohmann::json to_json() const {
    return {{"am", std::vector<std::string>(am.begin(), am.end())},
            {"lanes", std::vector<std::string>(lanes.begin(), lanes.end())},
            {"endpoints", endpoints}};
  }
};

inline UcxTransportsSeen ucx_transports_of(const std::vector<std::string>& descriptions) {
  UcxTransportsSeen seen;
  for (const std::string& d : descriptions) seen.add_description(d);
  return seen;
}

// The transports of this rank's own endpoints (to_json(), no exchange: for a rank that
// ends without MPI), over the transports of node runtime `rt`; null when they keep no
// endpoint descriptions (not UCX's).
template <class R>
nlohmann::json own_ucx_transports(const R& rt) {
  if constexpr (requires(const typename R::Transport& t) { t.endpoint_descriptions(); }) {
    std::vector<std::string> descriptions;
    rt.for_each_transport([&](const typename R::Transport& t) {
      descriptions.insert(descriptions.end(), t.endpoint_descriptions().begin(), t.endpoint_descriptions().end());
    });
    return ucx_transports_of(descriptions).to_json();
  } else {
    return nullptr;
  }
}

// Collective: every rank's endpoint descriptions, summarized on rank 0 (to_json(); null
// on the other ranks).
inline nlohmann::json gather_ucx_transports(const mpi::Session& s, const std::vector<std::string>& descriptions) {
  const std::string mine = ucx_transports_of(descriptions).to_text();
  const std::vector<char> all = s.gather_to_root(std::span<const char>(mine.data(), mine.size()));
  if (s.rank() != 0) return nullptr;
  UcxTransportsSeen seen;
  seen.merge_text(std::string_view(all.data(), all.size()));
  return seen.to_json();
}

}  // namespace bkv::real
