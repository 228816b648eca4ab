#!/usr/bin/env python3
"""How busy a per-node send path would be in the measured high states (C5 NP=2/4, C1 NP=2).

Bookkeeping, no dynamics (docs/fidelity/c5_np4_second_opinion.md §2). A polling daemon's
mean loop is L = l0 + c k, where k = X L is the remote completions per loop at X remote
completions per second per node; so L = l0 / (1 - c X). l0 = 0.564 us and c = 0.135 us
are C1's time accounting (docs/bistability.md §8, scripts/c1_accounting.py), used here
for C5 (same daemon, same machines).

A loop with k calls and k incoming requests (symmetric run) over E = NP-1 endpoints posts
one WRITE+IMM per endpoint per flush that has data for it. With k uniform picks over E
endpoints, D(k) = E (1 - (1 - 1/E)^k) endpoints are hit on average:
  two flushes (the calibrated order: replies, then calls): 2 D(k) WQEs per loop
  one flush (replies and calls together; the poll-first order of the original's second
  description leaves one flush per loop too):              D(2k)  WQEs per loop
(D(k) for a mean k is an upper bound of the mean D by Jensen's inequality: the real
numbers are slightly lower; the script says by how much for a Poisson k.)

usage: c5_np4_sendpath.py [--wqe-ns 550] [--c-us 0.135]
"""
import argparse
import math

L0_US = 0.564
C_US = 0.135

# Measured high states: (label, NP, Mops per rank) from docs/calibration.md.
HIGH = [
    ("C5 NP=2 (QD=1)", 2, 6.89),
    ("C5 NP=4 (QD=1)", 4, 5.45),
    ("C1 NP=2 (QD=32)", 2, 7.63),
]


def distinct(k, e):
    return e * (1.0 - (1.0 - 1.0 / e) ** k)


def distinct_poisson(k, e):
    # E[D(K)] for K ~ Poisson(k): each endpoint is hit unless none of K picks it.
    return e * (1.0 - math.exp(-k / e))


def row(label, np_, mops, wqe_ns):
    e = np_ - 1
    x = mops * e / np_  # remote completions per us per node (M/s)
    loop = L0_US / (1.0 - C_US * x)
    k = x * loop
    two = 2 * distinct(k, e)
    one = distinct(2 * k, e)
    two_p = 2 * distinct_poisson(k, e)
    one_p = distinct_poisson(2 * k, e)
    rate_two = two / loop
    rate_one = one / loop
    print(f"{label:<18} X={x:5.2f} M/s  loop={loop:5.2f} us  k={k:5.2f}  "
          f"WQEs/loop two={two:4.2f} ({two_p:4.2f}) one={one:4.2f} ({one_p:4.2f})  "
          f"M WQEs/s two={rate_two:4.2f} one={rate_one:4.2f}  "
          f"utilisation at {wqe_ns:.0f} ns: two={rate_two * wqe_ns / 1000:4.2f} one={rate_one * wqe_ns / 1000:4.2f}  "
          f"largest per-WQE cost at 90%: two={900 / rate_two:4.0f} ns one={900 / rate_one:4.0f} ns")


def band(np_, wqe_ns, order):
    """The band of X (M/s per node) in which the order's WQE rate exceeds the send path
    (Poisson k here: at small k a loop often has no message for an endpoint at all)
    (rho > 1): below it the low state, above it a high state can be self-consistent.
    Scans X up to the daemon's own limit 1/c; returns (lo, hi) or None (no such band)."""
    e = np_ - 1
    lo = hi = None
    x = 0.01
    while x < 1.0 / C_US - 0.01:
        loop = L0_US / (1.0 - C_US * x)
        k = x * loop
        w = 2 * distinct_poisson(k, e) if order == "two" else distinct_poisson(2 * k, e)
        if w / loop * wqe_ns / 1000 > 1.0:
            lo = x if lo is None else lo
            hi = x
        x += 0.01
    return None if lo is None else (lo, hi)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wqe-ns", type=float, default=550.0, help="per-node send path cost per WQE (ns)")
    ap.add_argument("--c-us", type=float, default=C_US, help="daemon cost per remote completion (us)")
    a = ap.parse_args()
    globals()["C_US"] = a.c_us
    print(f"l0 = {L0_US} us, c = {C_US} us (C1 time accounting: 0.564 and 0.135); (values in brackets: Poisson k)")
    for label, np_, mops in HIGH:
        row(label, np_, mops, a.wqe_ns)
    print()
    print(f"rates a {a.wqe_ns:.0f} ns per-node send path cannot carry (rho > 1), per rank")
    for np_ in (2, 3, 4, 5, 8, 16):
        for order in ("two", "one"):
            b = band(np_, a.wqe_ns, order)
            if b is None:
                print(f"  NP={np_:<2} {order} flush(es): none: every rate up to the daemon's limit fits")
            else:
                f = np_ / (np_ - 1)
                print(f"  NP={np_:<2} {order} flush(es): {b[0] * f:4.2f} to {b[1] * f:4.2f} Mops per rank "
                      f"(X {b[0]:4.2f}-{b[1]:4.2f} M/s per node; daemon limit {f / C_US:4.2f})")


if __name__ == "__main__":
    main()
