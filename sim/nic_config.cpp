#include "core/strict_json.hpp"
#include "sim/nic_config.hpp"

#include <fstream>
#include <limits>

#include "sim/json_fields.hpp"

namespace bkv::sim {

namespace {

using json_detail::ObjectReader;


// Reads a nested object if present (absent = keep defaults).
template <class F>
void nested(ObjectReader& r, const std::string& key, F&& f) {
  const nlohmann::json* v = r.get(key);
  if (v == nullptr) return;
  ObjectReader sub(*v, r.path_of(key));
  f(sub);
  sub.finish();
}

void read_cache(ObjectReader& r, NicConfig::Cache& c) {
  c.entries = static_cast<uint32_t>(r.integer("entries", c.entries));
  c.ways = static_cast<uint32_t>(r.integer("ways", c.ways, 1, 1024));
  c.miss_ns = r.number("miss_ns", c.miss_ns);
  c.page_bytes = static_cast<uint32_t>(r.integer("page_bytes", c.page_bytes, 1));
  if (c.entries % c.ways != 0)
    json_detail::fail(r.path_of("entries"), "must be a multiple of ways (" + std::to_string(c.ways) + ")");
}

nlohmann::json cache_json(const NicConfig::Cache& c) {
  return {{"entries", c.entries}, {"ways", c.ways}, {"miss_ns", c.miss_ns}, {"page_bytes", c.page_bytes}};
}

}  // namespace

NicConfig NicConfig::from_json(const nlohmann::json& j, const std::string& path) {
  NicConfig c;
  ObjectReader r(j, path);
  c.doorbell_ns = r.number("doorbell_ns", c.doorbell_ns);
  c.blueflame_max_wqes = static_cast<uint32_t>(r.integer("blueflame_max_wqes", c.blueflame_max_wqes));
  c.inline_max_bytes = static_cast<uint32_t>(r.integer("inline_max_bytes", c.inline_max_bytes));
  c.wqe_bytes = static_cast<uint32_t>(r.integer("wqe_bytes", c.wqe_bytes, 1));
  c.fetch_max_wqes = static_cast<uint32_t>(r.integer("fetch_max_wqes", c.fetch_max_wqes, 1, 64));
  nested(r, "pcie", [&](ObjectReader& s) {
    c.pcie.read_latency_ns = s.number("read_latency_ns", c.pcie.read_latency_ns);
    c.pcie.write_latency_ns = s.number("write_latency_ns", c.pcie.write_latency_ns);
    c.pcie.bandwidth_gbps = s.number("bandwidth_gbps", c.pcie.bandwidth_gbps, 1e-3);
    c.pcie.read_tags = static_cast<uint32_t>(s.integer("read_tags", c.pcie.read_tags, 0, 4096));
    c.pcie.max_payload_bytes = static_cast<uint32_t>(s.integer("max_payload_bytes", c.pcie.max_payload_bytes, 1));
    c.pcie.tlp_overhead_bytes = static_cast<uint32_t>(s.integer("tlp_overhead_bytes", c.pcie.tlp_overhead_bytes));
  });
  nested(r, "send", [&](ObjectReader& s) {
    c.send.engines = static_cast<uint32_t>(s.integer("engines", c.send.engines, 0, 4096));
    c.send.per_wqe_ns = s.number("per_wqe_ns", c.send.per_wqe_ns);
    c.send.per_byte_ns = s.number("per_byte_ns", c.send.per_byte_ns);
    c.send.qp_serial = s.boolean("qp_serial", c.send.qp_serial);
    c.send.qp_window = static_cast<uint32_t>(s.integer("qp_window", c.send.qp_window, 1));
    c.send.max_outstanding_reads =
        static_cast<uint32_t>(s.integer("max_outstanding_reads", c.send.max_outstanding_reads, 1));
  });
  nested(r, "recv", [&](ObjectReader& s) {
    c.recv.engines = static_cast<uint32_t>(s.integer("engines", c.recv.engines, 0, 4096));
    c.recv.per_packet_ns = s.number("per_packet_ns", c.recv.per_packet_ns);
    c.recv.per_byte_ns = s.number("per_byte_ns", c.recv.per_byte_ns);
    c.recv.ack_ns = s.number("ack_ns", c.recv.ack_ns);
    c.recv.qp_serial = s.boolean("qp_serial", c.recv.qp_serial);
  });
  nested(r, "link", [&](ObjectReader& s) {
    c.link.bandwidth_gbps = s.number("bandwidth_gbps", c.link.bandwidth_gbps, 1e-3);
    c.link.mtu_bytes = static_cast<uint32_t>(s.integer("mtu_bytes", c.link.mtu_bytes, 256));
    c.link.packet_overhead_bytes =
        static_cast<uint32_t>(s.integer("packet_overhead_bytes", c.link.packet_overhead_bytes));
  });
  nested(r, "latency", [&](ObjectReader& s) {
    c.latency.base_ns = s.number("base_ns", c.latency.base_ns);
    c.latency.loopback_ns = s.number("loopback_ns", c.latency.loopback_ns);
    if (const nlohmann::json* jj = s.get("jitter"); jj != nullptr) {
      c.latency.jitter = jj->is_null() ? Distribution::constant(0)
                                       : distribution_from_json(*jj, s.path_of("jitter"), 0.0);
    }
  });
  c.ack_turnaround_ns = r.number("ack_turnaround_ns", c.ack_turnaround_ns);
  c.cqe_bytes = static_cast<uint32_t>(r.integer("cqe_bytes", c.cqe_bytes));
  nested(r, "rnr", [&](ObjectReader& s) {
    c.rnr.delay_ns = s.number("delay_ns", c.rnr.delay_ns, 1.0);
    c.rnr.retry_limit = static_cast<uint32_t>(s.integer("retry_limit", c.rnr.retry_limit, 0, 7));
  });
  nested(r, "qp_cache", [&](ObjectReader& s) { read_cache(s, c.qp_cache); });
  nested(r, "mtt_cache", [&](ObjectReader& s) { read_cache(s, c.mtt_cache); });
  r.finish();
  return c;
}

NicConfig NicConfig::load_file(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw std::invalid_argument("nic config: cannot open '" + file + "'");
  nlohmann::json j;
  try {
    j = parse_json_without_duplicate_keys(in, "nic config: '" + file + "'");
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument("nic config: '" + file + "' is not valid JSON: " + e.what());
  }
  return from_json(j);
}

nlohmann::json NicConfig::to_json() const {
  nlohmann::json j;
  j["doorbell_ns"] = doorbell_ns;
  j["blueflame_max_wqes"] = blueflame_max_wqes;
  j["inline_max_bytes"] = inline_max_bytes;
  j["wqe_bytes"] = wqe_bytes;
  j["fetch_max_wqes"] = fetch_max_wqes;
  j["pcie"] = {{"read_latency_ns", pcie.read_latency_ns},
               {"write_latency_ns", pcie.write_latency_ns},
               {"bandwidth_gbps", pcie.bandwidth_gbps},
               {"read_tags", pcie.read_tags},
               {"max_payload_bytes", pcie.max_payload_bytes},
               {"tlp_overhead_bytes", pcie.tlp_overhead_bytes}};
  j["send"] = {{"engines", send.engines},         {"per_wqe_ns", send.per_wqe_ns},
               {"per_byte_ns", send.per_byte_ns}, {"qp_serial", send.qp_serial},
               {"qp_window", send.qp_window},     {"max_outstanding_reads", send.max_outstanding_reads}};
  j["recv"] = {{"engines", recv.engines},
               {"per_packet_ns", recv.per_packet_ns},
               {"per_byte_ns", recv.per_byte_ns},
               {"ack_ns", recv.ack_ns},
               {"qp_serial", recv.qp_serial}};
  j["link"] = {{"bandwidth_gbps", link.bandwidth_gbps},
               {"mtu_bytes", link.mtu_bytes},
               {"packet_overhead_bytes", link.packet_overhead_bytes}};
  j["latency"] = {{"base_ns", latency.base_ns},
                  {"loopback_ns", latency.loopback_ns},
                  {"jitter", distribution_to_json(latency.jitter)}};
  j["ack_turnaround_ns"] = ack_turnaround_ns;
  j["cqe_bytes"] = cqe_bytes;
  j["rnr"] = {{"delay_ns", rnr.delay_ns}, {"retry_limit", rnr.retry_limit}};
  j["qp_cache"] = cache_json(qp_cache);
  j["mtt_cache"] = cache_json(mtt_cache);
  return j;
}

}  // namespace bkv::sim
