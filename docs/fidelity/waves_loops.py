"""Daemon #0's loop texture from a simulator trace made with waves_probe.patch applied.

Usage: python3 waves_loops.py TRACE.json A_US B_US [RANK]
Rebuilds loops from the traced steps (a loop ends at the step where the daemon's loop count
moves), keeps those that start in [A, B) us, and prints over all ranks: loops per rank, mean
loop, completions (responses handed back) per loop, remote completions per second per node,
and the share of loops with 0, 1, 2-10, 11-100 and >100 completions (calibration.md C1's
bins). With RANK, also lists that rank's loops: start, duration, responses, incoming
requests, calls issued, hardware CQEs. See bistability.md, "Three candidates for what keeps
the NP=16 wave together". When the trace carries the calls in flight at each step's end
(waves_poll_first.patch adds it), also prints them averaged per loop (as C1's 833 was)
and weighted by time (the value at a loop's end held until the next loop's end), which is
what Little's law needs.
"""
import json,sys,collections
f=sys.argv[1]; a=float(sys.argv[2]); b=float(sys.argv[3]); show=len(sys.argv)>4
t=json.load(open(f))
steps=collections.defaultdict(list)
for e in t['traceEvents']:
    if e.get('name')=='loop' and e.get('tid')==0: steps[e['pid']].append(e)
H=collections.Counter(); loops=0; comp=0; busy=0.0; span=0.0; ranks=0; bigs=[]
inf_loop=0.0; inf_n=0; inf_time=0.0; inf_dt=0.0
for r,ev in sorted(steps.items()):
    ev.sort(key=lambda e:e['ts']); prev=None; start=None; L=[]
    for e in ev:
        g=e['args']
        if start is None: start=e['ts']
        if prev is not None and g['nloop']!=prev:
            L.append((start,e['ts']+e['dur']-start,g['resp'],g['reqin'],g['callsout'],g['cqes'],g.get('inflight'))); start=None
        prev=g['nloop']
    L=[x for x in L if a<=x[0]<b]
    ranks+=1
    for i,x in enumerate(L):
        if x[6] is None: continue
        inf_loop+=x[6]; inf_n+=1
        if i+1<len(L): inf_time+=x[6]*L[i+1][1]; inf_dt+=L[i+1][1]
    for s,d,resp,rq,co,cq,_ in L:
        loops+=1; comp+=resp; busy+=d
        H['0' if resp==0 else '1' if resp==1 else '2-10' if resp<=10 else '11-100' if resp<=100 else '>100']+=1
        if resp>100: bigs.append((r,s,resp))
    if show and r==int(sys.argv[4]):
        for x in L: print("%9.2f %7.2f resp %4d reqin %4d out %4d cqe %3d"%x[:6]+("" if x[6] is None else " inflight %4d"%x[6]))
n=sum(H.values())
print(f"{f.split('/')[-1]:24s} [{a:.0f},{b:.0f}) loops/rank {loops/ranks:.0f} mean loop {busy/loops:.2f}us compl/loop {comp/loops:.1f} remote compl/s/node {comp/ranks/(b-a):.2f}M  "+' '.join(f"{k}:{100*H[k]/n:.1f}%" for k in ['0','1','2-10','11-100','>100']), f" big-loop mean {sum(x[2] for x in bigs)/max(1,len(bigs)):.0f}")
if inf_n: print(f"calls in flight: per-loop mean {inf_loop/inf_n:.0f}, time-weighted mean {inf_time/max(inf_dt,1e-9):.0f}")
