// benchkv --transport mlx5 | verbs under MPI: the copyrpc backends over the direct mlx5
// data path (DirectTransport<HwProvider>) or the portable verbs transport, one transport
// per thread that owns a copyrpc context, all on the device chosen by --device /
// --device-index / --port / --gid-index. The device is opened before MPI starts: a
// machine without one exits here with status 2 and a message naming the problem.
//
// Not exercised on the machines this project is tested on (no RDMA device); it is the
// same MPI flow (real/mpi_run.hpp, real/data.hpp) as --transport ucx with another runtime.
// The data path of `benchkv data` over DirectTransport is tested against the NIC
// emulator (tests/data/test_data_mlx5.cpp); the verbs transport and HwProvider are not.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "apps/benchkv/node/node_runtime.hpp"
#include "apps/benchkv/real/data.hpp"
#include "apps/benchkv/real/mpi_run.hpp"
#include "apps/benchkv/real/probe_mpi.hpp"
#include "apps/benchkv/real/rpc.hpp"
#include "apps/benchkv/real/transports.hpp"
#include "transports/mlx5/device.hpp"
#include "transports/mlx5/direct_transport.hpp"
#include "transports/mlx5/hw_provider.hpp"
#include "transports/mlx5/verbs_transport.hpp"

namespace bkv::real {

namespace {

// --transport verbs: one VerbsTransport per context-owning thread.
struct MakeVerbsTransport {
  mlx5::Device* dev;
  app::OwnedTransports<mlx5::VerbsTransport> owned;
  mlx5::VerbsTransport& operator()(uint32_t /*thread*/, NullMeter& /*meter*/) {
    return owned.emplace(*dev, mlx5::VerbsOptions{});
  }
};

// --transport mlx5: per context-owning thread, its own provider (PD, CQs, SRQ, QPs on
// the device) and the direct data path over it.
struct MakeMlx5Transport {
  using Direct = mlx5::DirectTransport<mlx5::HwProvider>;
  mlx5::Device* dev;
  app::OwnedTransports<mlx5::HwProvider> providers;  // declared first: outlive the transports
  app::OwnedTransports<Direct> transports;
  Direct& operator()(uint32_t /*thread*/, NullMeter& /*meter*/) {
    return transports.emplace(providers.emplace(*dev, mlx5::HwOptions{}), mlx5::DirectOptions{});
  }
};

// `benchkv data`: run_data_mpi makes fresh transports for each value size, and a direct
// transport needs its provider to outlive it: this one owns it (a base class, so it is
// made first and destroyed last).
struct HwProviderHolder {
  explicit HwProviderHolder(mlx5::Device& dev) : provider(dev, mlx5::HwOptions{}) {}
  mlx5::HwProvider provider;
};
class OwningHwDirectTransport : private HwProviderHolder, public mlx5::DirectTransport<mlx5::HwProvider> {
 public:
  explicit OwningHwDirectTransport(mlx5::Device& dev)
      : HwProviderHolder(dev), mlx5::DirectTransport<mlx5::HwProvider>(provider, mlx5::DirectOptions{}) {}
};
static_assert(Transport<OwningHwDirectTransport>);

}  // namespace

namespace {

// Opens a real run's RDMA device into `dev`, before MPI starts. A missing or unusable
// device, or one --transport mlx5 cannot drive, is an input error: its message on stderr
// (led by `who`: "" for a run, "probe: " for the probe) and status 2. 0 once dev is open.
int open_rdma_device(std::optional<mlx5::Device>& dev, app::TransportKind kind, const char* who,
                     const std::string& name, int index, uint32_t port, int32_t gid_index) {
  const std::string transport(app::to_string(kind));
  try {
    dev.emplace(mlx5::open_device(name, index, static_cast<uint8_t>(port), gid_index));
  } catch (const mlx5::NoDeviceError& e) {
    std::fprintf(stderr, "benchkv: %s--transport %s: %s\n", who, transport.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "benchkv: %s--transport %s: the RDMA device cannot be used: %s\n", who, transport.c_str(),
                 e.what());
    return 2;
  }
  if (kind == app::TransportKind::kMlx5 && !dev->is_mlx5()) {
    std::fprintf(stderr,
                 "benchkv: %s--transport mlx5: device %s is not driven by the mlx5 provider; use --transport verbs\n",
                 who, dev->name().c_str());
    return 2;
  }
  return 0;
}

int run_rdma(const app::Options& o) {
  const std::string transport(app::to_string(o.transport));
  std::optional<mlx5::Device> dev;
  if (const int status = open_rdma_device(dev, o.transport, "", o.device, static_cast<int>(o.device_index), o.port,
                                          o.gid_index);
      status != 0)
    return status;
  mpi::Session s(nullptr, nullptr);
  if (const int status = real_ranks_checked(s, o); status != 0) return status;
  try {
    // A stopped or dead peer ends this rank too (mpi_orchestration.hpp): the longest
    // phase between two collectives is one run.
    s.start_watchdog(o.duration);
    // Every rank the same build and options, before anything sized by them is exchanged.
    check_same_run(s, o);
    // Rank 0 writes the outputs: their directories are made and each is checked writable
    // before the run, so a bad path ends every rank now (abort below), not after the run.
    if (s.rank() == 0) app::prepare_output_files(o);
    switch (o.mode) {
      case app::Mode::kData: {  // one thread per rank, left unpinned
        const nlohmann::json data_extra = {
            {"transport", transport},
            {"device", dev->name()},
            {"port", dev->port()},
            {"pinning", "unpinned (the main thread steps daemon #0 and every client in turn)"}};
        mlx5::Device& d = *dev;
        if (o.transport == app::TransportKind::kMlx5)
          return run_data_mpi<OwningHwDirectTransport>(
              s, o, [&d] { return std::make_unique<OwningHwDirectTransport>(d); }, data_extra);
        return run_data_mpi<mlx5::VerbsTransport>(
            s, o, [&d] { return std::make_unique<mlx5::VerbsTransport>(d, mlx5::VerbsOptions{}); }, data_extra);
      }
      case app::Mode::kRpc: {  // one thread per rank, left unpinned
        const nlohmann::json rpc_extra = {{"transport", transport},
                                          {"device", dev->name()},
                                          {"port", dev->port()},
                                          {"pinning", "unpinned (the rpc thread is the main thread)"}};
        if (o.transport == app::TransportKind::kMlx5) {
          app::NodeRuntime<app::RealThreads, MakeMlx5Transport> rt(1, {}, MakeMlx5Transport{&*dev, {}, {}});
          return run_rpc_mpi(s, o, rt, rpc_extra);
        }
        app::NodeRuntime<app::RealThreads, MakeVerbsTransport> rt(1, {}, MakeVerbsTransport{&*dev, {}});
        return run_rpc_mpi(s, o, rt, rpc_extra);
      }
      case app::Mode::kKv: break;
      case app::Mode::kSweep:
      case app::Mode::kCompare: throw std::logic_error("benchkv: sweep and compare are not real runs");
    }
    const RankPlan plan = plan_rank(o, s, dev->name());
    ProgressFn progress;
    if (s.rank() == 0) progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    const nlohmann::json extra = {{"transport", transport},
                                  {"device", dev->name()},
                                  {"port", dev->port()},
                                  {"ranks", s.size()},
                                  {"ranks_on_rank0_node", s.local_size()},
                                  {"idle_yield", plan.oversubscribed},
                                  {"pinning", plan.pins.warning.empty() ? "pinned" : plan.pins.warning}};
    const uint32_t threads = o.server_threads + o.client_threads;
    RealResult res;
    if (o.transport == app::TransportKind::kMlx5) {
      app::NodeRuntime<app::RealThreads, MakeMlx5Transport> rt(threads, {}, MakeMlx5Transport{&*dev, {}, {}});
      res = run_node_mpi(s, o, rt, plan, progress, extra);
    } else {
      app::NodeRuntime<app::RealThreads, MakeVerbsTransport> rt(threads, {}, MakeVerbsTransport{&*dev, {}});
      res = run_node_mpi(s, o, rt, plan, progress, extra);
    }
    return finish_mpi(s, o, res, extra, plan);
  } catch (...) {
    end_after_exception(s);
  }
}

const RegisterRealTransport kMlx5Registered{app::TransportKind::kMlx5, &run_rdma};
const RegisterRealTransport kVerbsRegistered{app::TransportKind::kVerbs, &run_rdma};

// `mpirun -np 2 benchkv probe --transport mlx5|verbs` (real/probe_mpi.hpp): the device
// (--device, else the first; --port, default 1; --gid-index, default the device's
// choice) is opened before MPI starts, as for the other modes,
// so a machine without one exits here with status 2; then one transport per rank, on the
// main thread, and one more per posting thread for the tests with several, through the
// same code as --transport ucx.
int probe_rdma(const ProbeRequest& r) {
  const std::string transport(app::to_string(r.transport));
  std::optional<mlx5::Device> dev;
  if (const int status = open_rdma_device(dev, r.transport, "probe: ", r.device, -1, r.port, r.gid_index); status != 0)
    return status;
  mpi::Session s(nullptr, nullptr);
  if (const int status = probe_ranks_checked(s); status != 0) return status;
  try {
    s.start_watchdog(kProbePhaseSecondsPerScale * std::max(1.0, r.scale));
    const nlohmann::json conditions = {{"transport", transport}, {"device", dev->name()}, {"port", dev->port()},
                                       {"gid_index", r.gid_index}};
    mlx5::Device& d = *dev;
    if (r.transport == app::TransportKind::kMlx5) {
      OwningHwDirectTransport t(d);
      return run_probe_mpi(s, t, [&d] { return std::make_unique<OwningHwDirectTransport>(d); }, r, conditions);
    }
    mlx5::VerbsTransport t(d, mlx5::VerbsOptions{});
    return run_probe_mpi(s, t, [&d] { return std::make_unique<mlx5::VerbsTransport>(d, mlx5::VerbsOptions{}); }, r,
                         conditions);
  } catch (...) {
    end_after_exception(s);
  }
}

const RegisterRealProbe kMlx5ProbeRegistered{app::TransportKind::kMlx5, &probe_rdma};
const RegisterRealProbe kVerbsProbeRegistered{app::TransportKind::kVerbs, &probe_rdma};

}  // namespace

}  // namespace bkv::real
