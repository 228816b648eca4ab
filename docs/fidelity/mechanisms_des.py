#!/usr/bin/env python3
"""Small deterministic discrete-event model of the Delegation daemon loop + RDMA path,
used to test candidate physical mechanisms against calibration facts C1-C5
(see mechanisms.md beside this file). Standard library only.

Model (one daemon per node, owning NP-1 endpoints; 46 closed-loop clients x QD):
  loop cost = L0 + per-item CPU costs + c_post per WQE posted + c_cqe per CQE
  a loop snapshots its inputs at its start (ipc, delegation ring, CQ) and emits at its end:
    replies are flushed by the poll() flush (one WQE per endpoint with replies),
    new calls by the flush phase (one WQE per endpoint with calls)  -> up to 2 WQEs/endpoint/loop
  NIC send path, one of:
    none : no NIC limit (candidate 1, the original authors' explanation)
    qp   : per-QP FIFO server, s_qp per WQE (candidate 2, the per-QP model of configs/model/c1.json)
    node : per-node FIFO server, s_node per WQE, shared by all QPs of the node
    bf   : as node, but a WQE posted while the node's send path is idle costs s_fast
           (BlueFlame copy used) and one posted behind others costs s_node (WQE fetch)
  wire: one-way = base + exponential jitter; per-QP order kept.
  optional RNR: shared SRQ of `srq` receives, reposted to full at the end of a drain when
    below 2/3; a WRITE+IMM finding it empty stalls its QP for t_rnr (go-back-N).
Metrics: Mops per rank, copyrpc calls in flight (node 0, sampled per loop), hardware
CQEs per loop, RPC responses per loop, loops per s, RTT of remote calls.

Usage: python3 mechanisms_des.py            (runs the table printed in mechanisms.md)
       python3 mechanisms_des.py --quick    (fewer cases)
"""
import heapq, math, random, sys
from collections import deque


class P:  # parameters (us)
    def __init__(self, **kw):
        self.NP = 8; self.clients = 46; self.QD = 32
        self.L0 = 0.55        # empty delegation loop (ipc scan of 46 clients, ring, CQ)
        self.c_call = 0.045   # ring read + call encode
        self.c_resp = 0.040   # parse response + deliver to client slot
        self.c_req = 0.050    # parse incoming request + kv + reply encode
        self.c_local = 0.045  # local request over ipc
        self.c_cqe = 0.040    # one hardware CQE (LLC line via DDIO + QPN lookup)
        self.c_post = 0.056   # one WRITE+IMM post incl. doorbell (C4: 56.4 ns)
        self.t_client = 0.25  # response seen by client -> next request in ring/ipc
        self.base = 1.35; self.jitter = 0.25   # one-way wire+NIC latency (C4 raw RTT 2.97)
        self.nic = 'node'; self.s_node = 0.57; self.s_fast = 0.08; self.s_qp = 5.0
        self.srq = 0; self.t_rnr = 640.0       # srq=0: RNR model off
        self.ring_ns = 0.0    # serialized fetch_add on the delegation ring head per node (c1.json: 0.150)
        self.oneflush = True  # replies and calls leave in one WQE per endpoint (flush phase)
        self.start = 'sync'   # 'sync' or 'stagger' (clients start uniformly in 1 ms)
        self.T = 6000.0; self.warm = 2000.0; self.seed = 1
        for k, v in kw.items():
            assert hasattr(self, k), k
            setattr(self, k, v)


class Node:
    def __init__(s, i):
        s.i = i; s.ipc = deque(); s.ring = deque(); s.cq = deque()
        s.idle = False; s.idle_since = 0.0; s.nic_free = 0.0; s.ring_free = 0.0
        s.srq = 0; s.rnr_until = {}; s.rnr_q = {}


def run(p):
    rnd = random.Random(p.seed)
    NP = p.NP
    nodes = [Node(i) for i in range(NP)]
    for n in nodes: n.srq = p.srq
    ev = []; seq = [0]
    def push(t, kind, a, b=None):
        seq[0] += 1; heapq.heappush(ev, (t, seq[0], kind, a, b))
    qp_free = {}; last_arr = {}
    st = dict(done=0, loops=0, empty=0, cqes=0, resp=0, rtt_sum=0.0, rtt_n=0, infl_sum=0.0, infl_n=0,
              wqe=0, msgs=0, rnr=0, hist_resp={}, hist_cqe={}, busy=0.0)
    inflight = [0] * NP
    rtts = []

    def issue(node, client, t):
        r = rnd.randrange(NP)
        if r == node.i: node.ipc.append((t, client))
        else:
            if p.ring_ns:
                t = max(t, node.ring_free) + p.ring_ns; node.ring_free = t
            node.ring.append((t, client, r))
        if node.idle: push(t, 'wake', node.i)

    def post(node, dst, msgs, t):
        key = (node.i, dst)
        if p.nic == 'none': dep = t
        elif p.nic == 'qp':
            dep = max(t, qp_free.get(key, 0.0)) + p.s_qp; qp_free[key] = dep
        elif p.nic == 'node':
            dep = max(t, node.nic_free) + p.s_node; node.nic_free = dep
        else:  # bf
            dep = (t + p.s_fast) if t >= node.nic_free else (node.nic_free + p.s_node)
            node.nic_free = dep
        arr = dep + p.base + rnd.expovariate(1.0 / p.jitter)
        arr = max(arr, last_arr.get(key, 0.0)); last_arr[key] = arr
        push(arr, 'arr', dst, (node.i, msgs))
        if t >= p.warm: st['wqe'] += 1; st['msgs'] += len(msgs)

    # clients start
    for n in nodes:
        for c in range(p.clients):
            t0 = 0.0 if p.start == 'sync' else rnd.uniform(0, 1000.0)
            for q in range(p.QD):  # 'ramp': every slot starts at its own time in 0..3 ms
                t1 = rnd.uniform(0, 3000.0) if p.start == 'ramp' else t0 + 0.01 * q
                if t1 <= 0.0: issue(n, (c,), t1)
                else: push(t1, 'first', n.i, (c,))   # issued when its time comes (keeps queues ordered)
        push(0.0, 'loop', n.i)

    def land(dst, src, msgs, t):
        n = nodes[dst]
        if p.srq:
            key = (src, dst)
            if n.rnr_until.get(key, -1) > t or n.srq <= 0:
                if n.rnr_until.get(key, -1) <= t:  # fresh RNR NAK
                    n.rnr_until[key] = t + p.t_rnr + 2 * p.base; st['rnr'] += (t >= p.warm)
                    push(n.rnr_until[key], 'rnr_resume', dst, src)
                n.rnr_q.setdefault(key, deque()).append(msgs); return
            n.srq -= 1
        n.cq.append((t, src, msgs))
        if n.idle: push(t, 'wake', dst)

    while ev:
        t, _, kind, a, b = heapq.heappop(ev)
        if t > p.T: break
        if kind == 'arr':
            land(a, b[0], b[1], t); continue
        if kind == 'rnr_resume':
            n = nodes[a]; key = (b, a); q = n.rnr_q.get(key)
            n.rnr_until[key] = -1
            while q:
                if n.srq <= 0:
                    n.rnr_until[key] = t + p.t_rnr + 2 * p.base; st['rnr'] += (t >= p.warm)
                    push(n.rnr_until[key], 'rnr_resume', a, b); break
                n.srq -= 1; n.cq.append((t, b, q.popleft()))
            if n.idle: push(t, 'wake', a)
            continue
        n = nodes[a]
        if kind == 'first':
            issue(n, b, t); continue
        if kind == 'wake':
            if not n.idle: continue
            k = max(1, math.ceil((t - n.idle_since) / p.L0 - 1e-9))
            if t >= p.warm: st['empty'] += k - 1; st['loops'] += k - 1
            if t >= p.warm and a == 0:
                pass
            n.idle = False
            push(n.idle_since + k * p.L0, 'loop', a); continue
        # kind == 'loop'
        locs = []; calls = []; wq = []
        while n.ipc and n.ipc[0][0] <= t: locs.append(n.ipc.popleft())
        while n.ring and n.ring[0][0] <= t: calls.append(n.ring.popleft())
        while n.cq and n.cq[0][0] <= t: wq.append(n.cq.popleft())
        meas = t >= p.warm
        if not (locs or calls or wq):
            n.idle = True; n.idle_since = t
            if meas:
                st['loops'] += 1; st['empty'] += 1
                if a == 0:
                    st['hist_resp'][0] = st['hist_resp'].get(0, 0) + 1
                    st['hist_cqe'][0] = st['hist_cqe'].get(0, 0) + 1
                    st['infl_sum'] += inflight[0]; st['infl_n'] += 1
            nxt = min(q[0][0] for q in (n.ipc, n.ring) if q) if (n.ipc or n.ring) else None
            if nxt is not None: push(nxt, 'wake', a)
            continue
        resps = []; reqs = {}
        for (ta, src, msgs) in wq:
            for m in msgs:
                if m[0] == 'r': resps.append(m)
                else: reqs.setdefault(src, []).append(m)
        nreq = sum(len(v) for v in reqs.values())
        # poll phase (drain) + flush of replies
        tc = t + p.L0 * 0.5 + len(wq) * p.c_cqe + len(resps) * p.c_resp + nreq * p.c_req + len(reqs) * p.c_post
        if p.srq and n.srq * 3 < p.srq * 2: n.srq = p.srq
        # calls phase + flush phase
        bydst = {}
        for (tq, client, r) in calls: bydst.setdefault(r, []).append(('q', client, a))
        te = tc + p.L0 * 0.5 + len(locs) * p.c_local + len(calls) * p.c_call + len(bydst) * p.c_post
        if p.oneflush:
            allp = {}
            for src, ms in reqs.items(): allp.setdefault(src, []).extend(('r', m[1], m[2], m[3]) for m in ms)
            for dst, ms in bydst.items(): allp.setdefault(dst, []).extend(('q', m[1], a, te) for m in ms)
            te += (len(allp) - len(bydst) - len(reqs)) * p.c_post  # fewer posts
            for dst, ms in allp.items(): post(n, dst, ms, te)
        else:
            for src, ms in reqs.items():
                post(n, src, [('r', m[1], m[2], m[3]) for m in ms], tc)
            for dst, ms in bydst.items():
                post(n, dst, [('q', m[1], a, te) for m in ms], te)
        inflight[a] += len(calls)
        for m in resps:
            inflight[a] -= 1
            if meas:
                st['rtt_sum'] += te - m[3]; st['rtt_n'] += 1
                if len(rtts) < 200000: rtts.append(te - m[3])
            issue(n, m[1], te + p.t_client)
        for (tq, client) in locs: issue(n, client, te + p.t_client)
        if meas:
            st['done'] += len(resps) + len(locs); st['loops'] += 1; st['busy'] += te - t
            st['cqes'] += len(wq); st['resp'] += len(resps)
            if a == 0:
                hb = len(resps); st['hist_resp'][hb] = st['hist_resp'].get(hb, 0) + 1
                hc = len(wq); st['hist_cqe'][hc] = st['hist_cqe'].get(hc, 0) + 1
                st['infl_sum'] += inflight[0]; st['infl_n'] += 1
        push(te, 'loop', a)

    dur = p.T - p.warm
    def bins(h):
        tot = sum(h.values()) or 1
        g = lambda lo, hi: sum(v for k, v in h.items() if lo <= k <= hi) / tot * 100
        return (g(0, 0), g(1, 1), g(2, 10), g(11, 100), g(101, 10 ** 9))
    L = st['loops'] or 1
    return dict(mops_rank=st['done'] / dur / NP, loops_per_s=st['loops'] / NP / dur * 1e6,
                cqe_per_loop=st['cqes'] / L, resp_per_loop=st['resp'] / L,
                infl0=st['infl_sum'] / max(1, st['infl_n']), rtt=st['rtt_sum'] / max(1, st['rtt_n']),
                msgs_per_wqe=st['msgs'] / max(1, st['wqe']), wqe_per_node_s=st['wqe'] / NP / dur,
                busy=st['busy'] / NP / dur, rnr=st['rnr'], rtt_p50=(sorted(rtts)[len(rtts)//2] if rtts else 0), rtt_fast=(sum(1 for x in rtts if x < 8.0) / max(1, len(rtts))), hresp=bins(st['hist_resp']), hcqe=bins(st['hist_cqe']))


def fmt(name, r):
    return (f"{name:34s} {r['mops_rank']:6.2f} Mops/rank | loops {r['loops_per_s']/1e6:5.2f}M/s busy {r['busy']*100:4.0f}% "
            f"| CQE/loop {r['cqe_per_loop']:6.2f} resp/loop {r['resp_per_loop']:6.2f} | msg/WQE {r['msgs_per_wqe']:5.2f} "
            f"WQE/node {r['wqe_per_node_s']:5.2f}M/s | inflight0 {r['infl0']:6.0f} RTT {r['rtt']:7.1f}us"
            + (f" RNR {r['rnr']}" if r['rnr'] else "")
            + " | resp-hist 0/1/2-10/11-100/>100 %: " + "/".join(f"{x:.1f}" for x in r['hresp']))


CPU = dict(c_call=0.038, c_resp=0.034, c_req=0.042, c_local=0.038, c_cqe=0.034)
MECHS = {
    '1 CPU only': dict(nic='none'),
    '2 per-QP serial 5us': dict(nic='qp', s_qp=5.0),
    '3 RNR (srq1024,0.64ms)': dict(nic='none', srq=1024, t_rnr=640.0),
    'N node-serial 0.57us': dict(nic='node', s_node=0.57),
    'B node-serial 0.50us, BF when idle': dict(nic='bf', s_node=0.50),
}


def main():
    quick = '--quick' in sys.argv
    sel = [a for a in sys.argv[1:] if not a.startswith('--')]
    T = dict(T=4000.0, warm=2000.0) if quick else dict(T=8000.0, warm=5000.0)
    cases = [(2, 1, 'sync'), (4, 1, 'sync'), (8, 1, 'sync'), (16, 1, 'sync'), (32, 1, 'sync'),
             (2, 32, 'sync'), (2, 32, 'ramp'), (8, 32, 'sync'), (8, 32, 'ramp'), (16, 32, 'sync'), (16, 32, 'ramp')]
    if quick: cases = [(2, 1, 'sync'), (4, 1, 'sync'), (8, 1, 'sync'), (8, 32, 'ramp')]
    for mname, mk in MECHS.items():
        if sel and not any(x in mname for x in sel): continue
        for NP, QD, start in cases:
            kw = dict(CPU); kw.update(mk); kw.update(T); kw.update(NP=NP, QD=QD, start=start)
            print(fmt(f"{mname[:22]} NP={NP} QD={QD} {start}", run(P(**kw))), flush=True)


if __name__ == '__main__':
    main()
