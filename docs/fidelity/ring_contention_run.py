#!/usr/bin/env python3
"""QD=32 with the delegation-ring head serialized at 150 ns per request per node (c1.json
ring_reserve), models N and B, both starts."""
import sys; sys.path.insert(0, __import__('os').path.dirname(__import__('os').path.abspath(__file__)))
from mechanisms_des import run, P, CPU, fmt
for lab, mk in (('N', dict(nic='node', s_node=0.57)), ('B', dict(nic='bf', s_node=0.50)), ('1', dict(nic='none'))):
    for NP in (2, 8, 16):
        for st in ('sync', 'ramp'):
            a = dict(CPU); a.update(mk); a.update(NP=NP, QD=32, start=st, ring_ns=0.150, T=8000., warm=5000.)
            print(fmt(f"{lab} ring150 NP={NP} {st}", run(P(**a))), flush=True)
