// Dispatch of real runs to the transport's registered entry, or a message naming what
// this build lacks (the transport's `needs` in apps/benchkv/cli/transport_kind.hpp).
#include "apps/benchkv/real/transports.hpp"

#include <array>
#include <cstdio>
#include <string>

namespace bkv {

namespace real {

namespace {

std::array<RealEntry, app::kTransportNames.size()>& entries() {
  static std::array<RealEntry, app::kTransportNames.size()> e{};  // by TransportKind
  return e;
}

std::array<ProbeEntry, app::kTransportNames.size()>& probe_entries() {
  static std::array<ProbeEntry, app::kTransportNames.size()> e{};  // by TransportKind
  return e;
}

}  // namespace

RegisterRealProbe::RegisterRealProbe(app::TransportKind kind, ProbeEntry run) {
  probe_entries().at(static_cast<size_t>(kind)) = run;
}

RegisterRealTransport::RegisterRealTransport(app::TransportKind kind, RealEntry run) {
  entries().at(static_cast<size_t>(kind)) = run;
}

RealEntry real_entry(app::TransportKind kind) {
  const size_t i = static_cast<size_t>(kind);
  return i < entries().size() ? entries()[i] : nullptr;
}

}  // namespace real

int run_real(const app::Options& o) {
  const std::string name(app::to_string(o.transport));
  if (o.backend == backend::BackendKind::kUcxAm && o.transport != app::TransportKind::kUcx) {
    std::fprintf(stderr, "benchkv: the ucx-am backend runs over --transport ucx only (got --transport %s)\n",
                 name.c_str());
    return 2;
  }
  const app::TransportName* t = app::transport_named(o.transport);
  if (t == nullptr || t->needs.empty()) {
    std::fprintf(stderr, "benchkv: --transport %s is not a real transport\n", name.c_str());
    return 2;
  }
  if (const real::RealEntry run = real::real_entry(o.transport)) return run(o);
  std::fprintf(stderr, "benchkv: --transport %s is not available in this build: %s was not found at configure time\n",
               name.c_str(), std::string(t->needs).c_str());
  return 2;
}

int run_real_probe(const real::ProbeRequest& r) {
  const std::string name(app::to_string(r.transport));
  const app::TransportName* t = app::transport_named(r.transport);
  if (t == nullptr || t->needs.empty()) {
    std::fprintf(stderr, "benchkv: probe: --transport %s is not a real transport\n", name.c_str());
    return 2;
  }
  const size_t i = static_cast<size_t>(r.transport);
  if (i < real::probe_entries().size() && real::probe_entries()[i] != nullptr) return real::probe_entries()[i](r);
  std::fprintf(stderr,
               "benchkv: probe: --transport %s between two ranks is not available in this build: %s was not found at "
               "configure time\n",
               name.c_str(), std::string(t->needs).c_str());
  return 2;
}

}  // namespace bkv
