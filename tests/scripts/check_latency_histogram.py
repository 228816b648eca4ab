#!/usr/bin/env python3
"""scripts/latency_histogram.py against real benchkv summaries: the percentiles it rebuilds
from the raw histograms are exactly the ones the summary gives (KV: every class of a run and
all runs merged; rpc: a run's round trips, and one size's of two; data: a size's latency),
runs of several sizes with no size chosen are refused (exit 2, naming the sizes), so is --run
alone on a --repeat summary (it would merge that run of every repetition; --seed picks one), a p95 it computes lies
between the summary's p90 and p99, the CDF it draws is a PNG, a histogram the summary marks
saturated (planted: KV, --repeat, rpc, data) gets one warning line on stderr each when chosen
and none otherwise, and a bad input is one line on stderr with exit status 2.
usage: check_latency_histogram.py REPO_ROOT BENCHKV
"""
import json
import os
import subprocess
import sys
import tempfile

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SIM = ["--transport", "sim", "--interval-ms", "1", "--trim", "1", "--no-progress", "--report", "none"]


def script(root, *args):
    return subprocess.run([sys.executable, os.path.join(root, "scripts/latency_histogram.py"), *args],
                          capture_output=True, text=True)


def read(stdout):
    """{"p50": microseconds, ...} from the printed lines."""
    out = {}
    for line in stdout.splitlines():
        name, value, unit = line.split()
        assert unit == "us", line
        out[name] = float(value)
    return out


def main(root, benchkv):
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    def expect(args, figures, what):
        """The script's p50/p90/p95/p99/p99.9 equal `figures` (microseconds), where given."""
        p = script(root, *args)
        if p.returncode != 0:
            failures.append(f"{what}: exit {p.returncode}: {p.stderr}")
            return {}
        got = read(p.stdout)
        for name, value in figures.items():
            check(abs(got[name] - value) < 5e-4, f"{what}: {name} {got[name]} us, the summary says {value} us")
        return got

    with tempfile.TemporaryDirectory() as d:
        # KV: 2 runs of a Delegation run, local and remote, gets and puts.
        kv = subprocess.run([benchkv, *SIM, "--np", "2", "--client-threads", "2", "--queue-depth", "4", "-d", "0.004",
                             "-r", "2", "-o", os.path.join(d, "kv.csv"), "delegation"], capture_output=True, text=True)
        check(kv.returncode == 0, f"benchkv kv: {kv.stderr}")
        s = json.load(open(os.path.join(d, "kv.summary.json")))
        keys = {"p50": "p50_ns", "p90": "p90_ns", "p99": "p99_ns", "p99.9": "p999_ns"}
        for cls in ["get_local", "get_remote", "put_local", "put_remote"]:
            h = s["runs"][1]["latency"][cls]
            if h["count"] == 0:
                continue
            got = expect([os.path.join(d, "kv.summary.json"), "--class", cls, "--run", "1"],
                         {k: h[v] / 1000 for k, v in keys.items()} | {"p95": h["p95_ns"] / 1000}, f"kv run 1 {cls}")
        overall = s["overall"]["latency"]["all"]
        got = expect([os.path.join(d, "kv.summary.json")], {k: overall[v] / 1000 for k, v in keys.items()}, "kv overall")
        if got:
            check(overall["p90_ns"] / 1000 <= got["p95"] <= overall["p99_ns"] / 1000, f"kv p95 {got['p95']}")
        expect([os.path.join(d, "kv.summary.json"), "--percentiles", "100"], {"p100": overall["max_ns"] / 1000},
               "kv maximum")
        cdf = os.path.join(d, "cdf.png")
        p = script(root, os.path.join(d, "kv.summary.json"), "--cdf", cdf)
        check(p.returncode == 0 and p.stdout == "", f"--cdf: exit {p.returncode}, stdout {p.stdout!r}: {p.stderr}")
        check(os.path.exists(cdf) and open(cdf, "rb").read(8) == PNG_MAGIC, "cdf.png is not a PNG")

        # rpc: the caller's round trips.
        rpc = subprocess.run([benchkv, *SIM, "--np", "2", "--endpoints", "2", "--queue-depth", "2", "-d", "0.004",
                              "-r", "1", "-o", os.path.join(d, "rpc.csv"), "rpc"], capture_output=True, text=True)
        check(rpc.returncode == 0, f"benchkv rpc: {rpc.stderr}")
        r = json.load(open(os.path.join(d, "rpc.summary.json")))["rpc"]["runs"][0]
        expect([os.path.join(d, "rpc.summary.json")],
               {"p50": r["rtt_p50_us"], "p90": r["rtt_p90_us"], "p95": r["rtt_p95_us"], "p99": r["rtt_p99_us"],
                "p99.9": r["rtt_p999_us"]}, "rpc run 0")

        # data: one value size of two.
        data = subprocess.run([benchkv, *SIM, "--np", "2", "--client-threads", "2", "--queue-depth", "2",
                               "--key-range", "16", "--value-size", "64,4096", "-d", "0.004", "-r", "1",
                               "-o", os.path.join(d, "data.csv"), "data"], capture_output=True, text=True)
        check(data.returncode == 0, f"benchkv data: {data.stderr}")
        dr = [x for x in json.load(open(os.path.join(d, "data.summary.json")))["data"]["runs"] if x["value_size"] == 4096][0]
        expect([os.path.join(d, "data.summary.json"), "--value-size", "4096"],
               {"p50": dr["latency_p50_us"], "p99": dr["latency_p99_us"], "p99.9": dr["latency_p999_us"]}, "data 4096")

        # Several sizes in one summary: pooled they describe no size, so the size must be
        # chosen (benchkv gives no aggregate over sizes either); chosen, it is that size's.
        rpc2 = subprocess.run([benchkv, *SIM, "--np", "2", "--endpoints", "1", "--queue-depth", "1", "-d", "0.004",
                               "-r", "1", "--message-size", "8,4096", "-o", os.path.join(d, "rpc2.csv"), "rpc"],
                              capture_output=True, text=True)
        check(rpc2.returncode == 0, f"benchkv rpc, two sizes: {rpc2.stderr}")
        r2 = [x for x in json.load(open(os.path.join(d, "rpc2.summary.json")))["rpc"]["runs"] if x["message_size"] == 4096]
        check(len(r2) == 1, f"rpc runs of 4096 B: {r2}")
        expect([os.path.join(d, "rpc2.summary.json"), "--message-size", "4096"],
               {"p50": r2[0]["rtt_p50_us"], "p99": r2[0]["rtt_p99_us"], "p99.9": r2[0]["rtt_p999_us"]}, "rpc 4096")
        for args, option, sizes in [([os.path.join(d, "rpc2.summary.json")], "--message-size", "(8, 4096 B)"),
                                    ([os.path.join(d, "rpc2.summary.json"), "--cdf", os.path.join(d, "x.png")],
                                     "--message-size", "(8, 4096 B)"),
                                    ([os.path.join(d, "data.summary.json")], "--value-size", "(64, 4096 B)")]:
            p = script(root, *args)
            lines = p.stderr.strip().splitlines()
            check(p.returncode == 2 and p.stdout == "" and len(lines) == 1 and sizes in lines[0] and
                  lines[0].endswith(f"choose one with {option}"), f"sizes pooled {args}: {p.returncode} {p.stderr!r}")
        check(not os.path.exists(os.path.join(d, "x.png")), "a CDF over two message sizes was drawn")

        # --repeat: each repetition counts its runs from 0, so --run alone names one run
        # of each and is refused; --seed picks a repetition, whose merged runs are the
        # summary's repetition figures, and --seed with --run one run of it.
        rep = subprocess.run([benchkv, *SIM, "--np", "2", "--client-threads", "2", "--queue-depth", "2", "-d", "0.004",
                              "-r", "2", "--repeat", "2", "-o", os.path.join(d, "rep.csv"), "meta"],
                             capture_output=True, text=True)
        check(rep.returncode == 0, f"benchkv --repeat: {rep.stderr}")
        rs = json.load(open(os.path.join(d, "rep.summary.json")))
        rep_path = os.path.join(d, "rep.summary.json")
        second = [x for x in rs["repetitions"] if x["seed"] == 2][0]["latency"]
        expect([rep_path, "--seed", "2"], {k: second[v] / 1000 for k, v in keys.items()}, "repetition of seed 2")
        run0 = [x for x in rs["runs"] if x["seed"] == 2 and x["run"] == 0][0]["latency"]["get_remote"]
        expect([rep_path, "--seed", "2", "--run", "0", "--class", "get_remote"],
               {k: run0[v] / 1000 for k, v in keys.items()}, "seed 2 run 0 get_remote")
        for args, says in [(["--run", "0"], "2 repetitions (seeds 1, 2)"), (["--seed", "3"], "--seed 3"),
                           (["--seed", "1", "--cdf", os.path.join(d, "y.png"), "--run", "0", "--seed", "4"], "--seed 4")]:
            p = script(root, rep_path, *args)
            check(p.returncode == 2 and p.stdout == "" and says in p.stderr, f"--repeat {args}: {p.returncode} {p.stderr!r}")
        p = script(root, os.path.join(d, "kv.summary.json"), "--seed", "1")
        check(p.returncode == 2 and "no repetitions" in p.stderr, f"--seed without --repeat: {p.returncode} {p.stderr!r}")

        # A histogram marked saturated (a bucket of a client's 32-bit recorder stopped
        # counting at 2^32 - 1; no test run records 4 x 10^9 values into one bucket, so the
        # marks are planted): one warning line per such histogram chosen, on stderr, naming
        # it; the figures still printed. None for a summary without marks.
        def warnings(args, what, code=0):
            p = script(root, *args)
            check(p.returncode == code, f"{what}: exit {p.returncode}: {p.stderr}")
            return p, [x for x in p.stderr.splitlines() if "warning:" in x]

        for args in [[os.path.join(d, "kv.summary.json")], [os.path.join(d, "rpc.summary.json")],
                     [rep_path, "--seed", "2"], [os.path.join(d, "data.summary.json"), "--value-size", "4096"]]:
            p, w = warnings(args, f"unmarked {args}")
            check(w == [] and "saturated" not in p.stderr, f"unmarked {args}: {p.stderr!r}")

        def plant(path, name, edit):
            with open(path) as f:
                summary = json.load(f)
            edit(summary)
            out = os.path.join(d, name)
            with open(out, "w") as f:
                json.dump(summary, f)
            return out

        meaning = ("the histogram is marked saturated (a bucket of a client's recorder reached 2^32 - 1 and stopped "
                   "counting): its counts are too low, so the percentiles printed are off by an amount the summary "
                   "does not record, in either direction")
        counted = [c for c in ["get_local", "get_remote", "put_local", "put_remote"] if s["runs"][1]["latency"][c]["count"]]
        check(len(counted) >= 2, f"kv run 1 has requests of {counted} only")
        sat = plant(os.path.join(d, "kv.summary.json"), "kv_sat.json",
                    lambda x: [x["runs"][1]["latency"][c].update(saturated=True) for c in counted[:2]])
        p, w = warnings([sat], "kv marked")
        check(w == [f"latency_histogram.py: {sat}: warning: run 1 {c}: {meaning}" for c in counted[:2]],
              f"kv marked: {p.stderr!r}")
        check(read(p.stdout) == read(script(root, os.path.join(d, "kv.summary.json")).stdout),
              f"kv marked: the percentiles changed: {p.stdout!r}")
        p, w = warnings([sat, "--class", counted[1]], "kv marked, one class")
        check(len(w) == 1 and w[0].endswith(f"warning: run 1 {counted[1]}: {meaning}"), f"one class: {p.stderr!r}")
        p, w = warnings([sat, "--run", "0"], "kv marked, another run")
        check(w == [], f"kv run 0 is not marked: {p.stderr!r}")
        p, w = warnings([sat, "--class", counted[0], "--cdf", os.path.join(d, "sat.png")], "kv marked, --cdf")
        check(len(w) == 1 and "so the CDF drawn is off" in w[0] and p.stdout == "", f"--cdf: {p.stderr!r}")
        rsat = plant(rep_path, "rep_sat.json",
                     lambda x: [r["latency"]["get_remote"].update(saturated=True) for r in x["runs"]
                                if r["seed"] == 2 and r["run"] == 0])
        p, w = warnings([rsat, "--seed", "2", "--class", "get_remote"], "--repeat marked")
        check(len(w) == 1 and f"warning: seed 2 run 0 get_remote: {meaning}" in w[0], f"--repeat: {p.stderr!r}")
        p, w = warnings([rsat, "--seed", "1"], "--repeat marked, the other seed")
        check(w == [], f"seed 1 is not marked: {p.stderr!r}")
        psat = plant(os.path.join(d, "rpc.summary.json"), "rpc_sat.json",
                     lambda x: x["rpc"]["runs"][0].update(rtt_saturated=True))
        p, w = warnings([psat], "rpc marked")
        check(len(w) == 1 and f"warning: rpc run 0: {meaning}" in w[0], f"rpc: {p.stderr!r}")
        dsat = plant(os.path.join(d, "data.summary.json"), "data_sat.json",
                     lambda x: [r.update(latency_saturated=True) for r in x["data"]["runs"] if r["value_size"] == 4096])
        p, w = warnings([dsat, "--value-size", "4096"], "data marked")
        check(len(w) == 1 and f"warning: data run {dr['run']}: {meaning}" in w[0], f"data: {p.stderr!r}")
        p, w = warnings([dsat, "--value-size", "64"], "data marked, the other size")
        check(w == [], f"data 64 B is not marked: {p.stderr!r}")
        bad = plant(os.path.join(d, "rpc.summary.json"), "rpc_bad.json",
                    lambda x: x["rpc"]["runs"][0].update(rtt_saturated="yes"))
        p, w = warnings([bad], "a mark that is not a boolean", 2)
        check(p.stdout == "" and p.stderr.strip().splitlines() == [f"latency_histogram.py: {bad}: rpc run 0: "
                                                                      f"\"rtt_saturated\" is \"yes\", not true or false"],
              f"a mark that is not a boolean: {p.stderr!r}")

        # Bad input: one line, status 2.
        for args, name in [([os.path.join(d, "absent.json")], "absent.json"),
                           ([os.path.join(d, "kv.summary.json"), "--class", "gets"], "gets"),
                           ([os.path.join(d, "kv.summary.json"), "--percentiles", "101"], "--percentiles")]:
            p = script(root, *args)
            lines = p.stderr.strip().splitlines()
            check(p.returncode == 2 and len(lines) == 1 and name in lines[0], f"bad input {args}: {p.returncode} {p.stderr!r}")

    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
