#!/usr/bin/env python3
"""Predictions of model B (node-serial 0.50 us/WQE, BlueFlame fast path when idle) for
setups that are not in the calibration data. Run: python3 predictions_run.py"""
import sys; sys.path.insert(0, __import__('os').path.dirname(__import__('os').path.abspath(__file__)))
from mechanisms_des import run, P, CPU, fmt
B = dict(nic='bf', s_node=0.50)
T = dict(T=8000.0, warm=5000.0)
def go(name, **kw):
    a = dict(CPU); a.update(B); a.update(T); a.update(kw)
    print(fmt(name, run(P(**a)))[:215], flush=True)
for NP in (3, 5, 6, 12, 64):
    go(f"QD=1 NP={NP}", NP=NP, QD=1)
for QD in (2, 4, 8, 16):
    for st in ('sync', 'ramp'):
        go(f"NP=8 QD={QD} {st}", NP=8, QD=QD, start=st)
for NP in (4, 32):
    for st in ('sync', 'ramp'):
        go(f"NP={NP} QD=32 {st}", NP=NP, QD=32, start=st)
go("NP=8 QD=1 s=0.25 (2 doorbell streams)", NP=8, QD=1, s_node=0.25)
go("NP=8 QD=32 ramp s=0.25", NP=8, QD=32, start='ramp', s_node=0.25)
