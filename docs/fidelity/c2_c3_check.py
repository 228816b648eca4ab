#!/usr/bin/env python3
"""C2 with the node-serial send path: 2 ranks, QD=1, an idle (Meta-like) daemon loop."""
import sys; sys.path.insert(0, __import__('os').path.dirname(__import__('os').path.abspath(__file__)))
from mechanisms_des import run, P, CPU
for nic, s in (('node', 0.57), ('bf', 0.57)):
    for k in (1, 2, 4, 8, 16):
        kw = dict(CPU); kw.update(NP=2, QD=1, clients=k, L0=0.03, nic=nic, s_node=s, base=1.6, T=6000., warm=2000.)
        r = run(P(**kw))
        print(f"{nic} s={s} clients={k:2d}: remote ops/s per rank {r['mops_rank']*(1/2)*1e3:6.0f}K  total RPS {r['mops_rank']*2:5.2f}M  "
              f"RTT mean {r['rtt']:5.1f} p50 {r['rtt_p50']:5.1f} us  <8us {r['rtt_fast']*100:4.0f}%  msg/WQE {r['msgs_per_wqe']:4.2f}  busy {r['busy']*100:3.0f}%", flush=True)
