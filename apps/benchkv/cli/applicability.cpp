#include "apps/benchkv/cli/applicability.hpp"

#include <fmt/format.h>

#include "apps/benchkv/cli/option_table.hpp"
#include "core/strict_json.hpp"

namespace bkv::app::option_detail {

bool is_sim(const Options& o) { return o.transport == TransportKind::kSim; }
bool is_rpc(const Options& o) { return o.mode == Mode::kRpc; }
bool is_data(const Options& o) { return o.mode == Mode::kData; }
bool is_kv(const Options& o) { return o.mode == Mode::kKv; }
bool sim_kv(const Options& o) { return is_sim(o) && is_kv(o); }

namespace {

bool is_rdma(const Options& o) {
  const TransportName* t = transport_named(o.transport);
  return t != nullptr && t->rdma_device;
}
bool has_clients(const Options& o) { return is_kv(o) || is_data(o); }
bool has_copyrpc(const Options& o) { return o.backend != BackendKind::kUcxAm; }
bool is_delegation(const Options& o) { return !o.backend || o.backend == BackendKind::kDelegation; }

constexpr Applicability kApplicability[] = {
    {"server_threads", &is_kv, "an option of the KV backends; daemon #0 alone serves data"},
    {"client_threads", &has_clients, "an option of the KV and data backends"},
    {"key_range", &has_clients, "an option of the KV and data backends"},
    {"read_ratio", &has_clients, "an option of the KV and data backends"},
    {"distribution", &is_kv, "an option of the KV backends"},
    {"zipf_s", [](const Options& o) { return is_kv(o) && o.distribution == Distribution::kZipfian; },
     "the exponent of --distribution zipfian"},
    {"pattern_len", &is_kv, "an option of the KV backends"},
    {"device", &is_rdma, "an RDMA device option of --transport mlx5|verbs"},
    {"device_index", &is_rdma, "an RDMA device option of --transport mlx5|verbs"},
    {"port", &is_rdma, "an RDMA device option of --transport mlx5|verbs"},
    {"gid_index", &is_rdma, "an RDMA device option of --transport mlx5|verbs"},
    {"ring_size", &has_copyrpc, "the copyrpc ring size; ucx-am has no copyrpc ring"},
    {"poll_budget", [](const Options& o) { return is_kv(o) && is_delegation(o); }, "a Delegation daemon loop policy"},
    {"batch_hold_us", [](const Options& o) { return is_kv(o) && is_delegation(o); }, "a Delegation daemon loop policy"},
    {"adaptive_hold", [](const Options& o) { return is_kv(o) && is_delegation(o); }, "a Delegation daemon loop policy"},
    {"hold_rtt_multiplier", [](const Options& o) { return is_kv(o) && is_delegation(o); },
     "a Delegation daemon loop policy"},
    {"adaptive_poll_budget", [](const Options& o) { return is_kv(o) && is_delegation(o); },
     "a Delegation daemon loop policy"},
    {"loop_order", [](const Options& o) { return is_kv(o) && is_delegation(o); }, "a Delegation daemon loop policy"},
    {"np", &is_sim, "the simulated node count; real runs take their ranks from mpirun"},
    {"model", &is_sim, "the simulator model"},
    {"start_mode", &sim_kv, "a client start option of the simulated KV backends"},
    {"start_stagger_us", [](const Options& o) { return sim_kv(o) && o.start_mode == StartMode::kStaggered; },
     "the spread of --start-mode staggered in the simulator"},
    {"start_burst_clients", [](const Options& o) { return sim_kv(o) && o.start_mode == StartMode::kStaggered; },
     "the first burst of --start-mode staggered in the simulator"},
    {"startup_ms", &sim_kv, "a start-up option of the simulated KV backends"},
    {"life_s", &sim_kv, "a loop statistic of the simulated KV backends"},
    {"ring_pages", [](const Options& o) { return is_sim(o) && !is_data(o); },
     "how the simulator keeps copyrpc ring pages (KV and rpc runs)"},
    {"ring_page_batch", [](const Options& o) { return is_sim(o) && !is_data(o); },
     "how many simulated copyrpc ring pages are given back at a time (KV and rpc runs)"},
    {"event_set", [](const Options& o) { return is_sim(o) && !is_data(o); }, "the simulator's event set (KV and rpc runs)"},
    {"step_log", &sim_kv, "a step recorder of the simulated KV backends"},
    {"inflight_samples", &sim_kv, "a daemon in-flight sampler of the simulated KV backends"},
    {"inflight_sample_interval_us", [](const Options& o) { return sim_kv(o) && !o.inflight_samples.empty(); },
     "the period of --inflight-samples in the simulator"},
    {"trace", &sim_kv, "a daemon loop trace of the simulated KV backends"},
    {"check_exactly_once", &sim_kv, "the exactly-once oracle of the simulated KV backends"},
    {"trace_window", [](const Options& o) { return sim_kv(o) && !o.trace.empty(); },
     "the window of --trace in the simulator"},
    {"endpoints", &is_rpc, "an option of the rpc benchmark"},
    {"message_size", &is_rpc, "an option of the rpc benchmark"},
    {"value_size", &is_data, "an option of the data benchmark"},
    {"data_backend", &is_data, "an option of the data benchmark"},
    {"repeat", &is_sim,
     "a repetition of simulated runs (--transport sim: KV, rpc and data); a real run is one execution under mpirun: "
     "repeat it by running it again with another --seed"},
};

}  // namespace

bool applies_to_mode(std::string_view key, Mode mode) {
  const Applicability* rule = nullptr;
  for (const Applicability& a : kApplicability)
    if (a.key == key) rule = &a;
  if (rule == nullptr) return key != "fault" || mode == Mode::kKv;
  for (const TransportName& t : kTransportNames) {
    Options o;
    o.mode = mode;
    o.transport = t.kind;
    o.distribution = Distribution::kZipfian;  // the options that another one turns on
    o.start_mode = StartMode::kStaggered;
    o.trace = "trace.json";
    o.inflight_samples = "inflight.csv";
    if (rule->applies(o)) return true;
  }
  return false;
}

namespace {

// What an option was judged against, for messages: "--transport ucx, backend meta" (mode
// kv), "--transport sim, mode rpc".
std::string mode_of(const Options& o) {
  std::string m = fmt::format("--transport {}", name_of(kTransportChoices, o.transport));
  if (!get_backend(o).is_null())
    m += fmt::format(", {} {}", o.mode == Mode::kKv ? "backend" : "mode", get_backend(o).get<std::string>());
  return m;
}

bool differs_from_default(const Options& o, std::string_view key) {
  static const Options defaults{};
  const Spec& s = spec_of(key);
  return s.get(o) != s.get(defaults);
}

}  // namespace

const Applicability* first_inapplicable(const Options& o) {
  for (const Applicability& a : kApplicability)
    if (!a.applies(o) && differs_from_default(o, a.key)) return &a;
  return nullptr;
}

std::string inapplicable_message(const Options& o, const Applicability& a) {
  return fmt::format("{}: {} does not apply to {} (it is {})", label(spec_of(a.key)), json_excerpt(spec_of(a.key).get(o), 200),
                     mode_of(o), a.what);
}

void drop_inapplicable(Options& o, const std::function<bool(std::string_view)>& may_drop,
                       const std::function<void(std::string)>& note) {
  const Options defaults;
  while (const Applicability* a = first_inapplicable(o)) {
    if (!may_drop(a->key)) break;
    note(inapplicable_message(o, *a));
    const Spec& s = spec_of(a->key);
    s.set(o, s.get(defaults), s, Ctx{"defaults", ""});
  }
}

}  // namespace bkv::app::option_detail
