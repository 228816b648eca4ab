#!/usr/bin/env bash
# Instructions per completed request of benchkv configurations over the UCX transport,
# 2 MPI ranks under callgrind: robust to how the ranks' threads share the CPUs (a time
# measurement on an oversubscribed machine is not), with the breakdown by stage.
#
#   usage: bench/real_kv_callgrind.sh [build-dir] -- 'LABEL=BACKEND [benchkv options]' ...
#     (a configuration whose first word is @PATH runs the benchkv binary at PATH)
#     env: TLS=sm,self SECS=4 QD=4 KEYS=1024 READ_RATIO=0.5 (1 daemon + 1 client per rank)
#          KEEP=DIR keeps the callgrind files (DIR/cg.N.RANK, N = configuration index) for
#          callgrind_annotate
#
# Each configuration runs once, both ranks under valgrind --tool=callgrind. The counts are
# the inclusive instructions of the worker threads (daemons and clients: start_thread;
# setup, MPI and the main thread are left out) summed over both ranks, divided by the
# requests completed over the whole run (both ranks); so are the call counts. Under
# valgrind the threads of a rank run one at a time, as on a single CPU: idle polls (a
# daemon loop or client step that finds nothing) are part of the counts.
# Rows (per completed request):
#   threads                 every worker thread
#   client / daemon threads everything the client / daemon threads ran
#     ipc, ring read        Delegation daemon #0: local requests (ipc), the delegation ring
#                           (DelegationDaemon0::read_ring; in builds before it, the calls
#                           of DelegationServer::recv)
#     copyrpc over UCX      the UCX transport's progress (UCX progress, the software NIC's
#                           responder, ACKs) and doorbell (the WRITE+IMMs handed to UCX)
# (copyrpc's and the backends' inline functions are not rows: the compiler inlines them
# differently from build to build, and callgrind then charges their code to the caller)
#   ucp_worker_progress     UCX progress, wherever called
#   ucp_am_send_nbx         UCX active-message sends, wherever called
# A stage row (ipc through ucp_am_send_nbx) is the inclusive cost of the calls of its
# function, read from the call edges: callgrind_annotate splits a function's entry by
# source file, and a build that mixes ccache hits names one file two ways.
#   calls/request: ucp_worker_progress, ucp_am_send_nbx, daemon loops, client steps, sched_yield
set -euo pipefail
. "$(dirname "$0")/../scripts/script_args.sh"
script_help "$0" "$@"
cd "$(dirname "$0")/.."
. bench/real_ucx_common.sh
real_ucx_configs real_kv_callgrind 1 "$@"
SECS=${SECS:-4}
real_ucx_setup real_kv_callgrind "$BUILD" valgrind callgrind_annotate
if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP"; KEEP=$(realpath "$KEEP"); fi

echo "setup: 2 ranks x (1 daemon + 1 client threads) under callgrind, QD ${QD}, ${KEYS} keys/rank, read ratio ${READ_RATIO}," \
     "${SECS} s runs, UCX_TLS=${TLS}, UCX $(real_ucx_version)"
i=0
for c in "${CONFIGS[@]}"; do
  real_ucx_config "$c"
  real_ucx_run "c$i" valgrind --tool=callgrind --callgrind-out-file="cg.$i.%q{OMPI_COMM_WORLD_RANK}" "$BIN" -- \
    -d "$SECS" --interval-ms 200 --trim 2 -r 1 --server-threads 1 --client-threads 1 "${SPEC[@]}"
  /usr/bin/python3 - "$LABEL" "${c#*=}" "$WORK/c$i.summary.json" "$WORK/cg.$i.0" "$WORK/cg.$i.1" <<'PY'
import collections, json, re, subprocess, sys
label, spec, summary, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
s = json.load(open(summary))
t = s["totals"]
if t["issued"] != t["completed"] or t["errors"] != 0:
    sys.exit(f"inconsistent run: {t}")
requests = t["completed"]

incl = collections.Counter()  # inclusive Ir of each function (its own entry, the one naming its object)
whole = collections.Counter()  # largest inclusive Ir among a function's entries (the inlined pieces too)
calls = collections.Counter()  # calls of each function
called = collections.Counter()  # inclusive Ir of the calls of each function (from other functions)
for f in files:
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", f],
                         capture_output=True, text=True, check=True).stdout
    seen = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+\S*?:(.*)$", line)
        if not m:
            continue
        v, name = int(m.group(1).replace(",", "")), m.group(2)
        if re.search(r" \[/[^]]*\]$", name):  # the entry naming its object (a path); not "[clone .isra.0]"
            incl[name] += v
            name = name[: name.rindex(" [")]
        seen[name] = max(seen[name], v)
    whole.update(seen)
    names, caller, callee, edge = {}, None, None, False
    for line in open(f, errors="replace"):
        if edge:  # the line after calls=: position and inclusive cost of the call
            edge = False
            if callee != caller:
                called[names.get(callee, callee)] += int(line.split()[-1])
        elif line.startswith(("fn=", "cfn=")):
            key, rest = line.rstrip("\n").split("=", 1)
            m = re.match(r"\((\d+)\)(?: (.*))?", rest)
            ident = m.group(1) if m else rest
            if m and m.group(2):
                names[ident] = m.group(2)
            elif not m:
                names[ident] = rest
            if key == "cfn":
                callee = ident
            else:
                caller = ident
        elif line.startswith("calls="):
            calls[names.get(callee, callee)] += int(line[6:].split()[0])
            edge = True

def ir(pattern):
    return sum(v for k, v in incl.items() if re.search(pattern, k)) / requests

def stage(pattern):  # a function's calls, all they ran (whatever file the compiler charged its inlined code to)
    return sum(v for k, v in called.items() if re.search(pattern, k)) / requests

def thread(pattern):  # a thread body (std::thread's _M_run of the Driver's lambda): all it ran
    return sum(v for k, v in whole.items() if re.search(pattern, k)) / requests

def n(pattern):
    return sum(v for k, v in calls.items() if re.search(pattern, k)) / requests

rows = [
    ("threads", ir(r"^start_thread ")),
    ("client threads", thread(r"^std::thread::_State_impl<.*Driver<.*>::spawn\(\)::\{lambda\(\)#2\}")),
    ("daemon threads", thread(r"^std::thread::_State_impl<.*Driver<.*>::spawn\(\)::\{lambda\(\)#1\}")),
    ("  ipc", stage(r"serve_shard_ipc<")),
    ("  ring read", stage(r"DelegationServer<.*>::recv\(\)|DelegationDaemon0<.*>::read_ring\(\)")),
    ("  copyrpc over UCX: progress", stage(r"^bkv::ucx::UcxTransport::progress\(\)$")),
    ("  copyrpc over UCX: send", stage(r"^bkv::ucx::QueuePair::ring_doorbell\(\)$")),
    ("ucp_worker_progress", stage(r"^ucp_worker_progress$")),
    ("ucp_am_send_nbx", stage(r"^ucp_am_send_nbx$")),
]
print(f"{label} ({spec}): {requests} requests")
print("  instructions/request: " + "  ".join(f"{k.strip()} {v:.0f}" for k, v in rows))
loops = n(r"DelegationDaemon0<.*>::step\(\)$|Impl::step_daemon")
steps = n(r"Client<.*>::step\(\)$|Impl::step_client")
print(f"  calls/request: ucp_worker_progress {n('^ucp_worker_progress$'):.2f}  ucp_am_send_nbx {n('^ucp_am_send_nbx$'):.2f}"
      f"  daemon loops {loops:.2f}  client steps {steps:.2f}  sched_yield {n('^sched_yield$'):.2f}")
PY
  if [ -n "${KEEP:-}" ]; then cp "$WORK/cg.$i.0" "$WORK/cg.$i.1" "$KEEP/"; fi
  i=$((i + 1))
done
