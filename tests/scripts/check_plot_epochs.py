#!/usr/bin/env python3
"""scripts/plot_epochs.py: the per-epoch Mops it prints (--print) are the hand-computed
ones, for every CSV benchkv writes per epoch (KV, data and rpc's leading size column,
--repeat's leading seed: each repetition's runs their own lines), nothing is printed on stdout unless asked, the picture is written, a CSV that is not
benchkv's is refused by name, and on a real benchkv CSV its epochs add up to the
summary's Mops of each run.
usage: check_plot_epochs.py REPO_ROOT BENCHKV
"""
import json
import os
import subprocess
import sys
import tempfile

from plot_checks import probe, report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(root, *args):
    return subprocess.run([sys.executable, os.path.join(root, "scripts/plot_epochs.py"), *args],
                          capture_output=True, text=True)


def printed(stdout):
    """{(run, epoch): mops} and {(run, epoch, rank): mops} from the printed lines."""
    tot, rank = {}, {}
    for line in stdout.splitlines():
        w = line.split()
        if len(w) == 3:
            tot[(int(w[0]), int(w[1]))] = float(w[2])
        elif len(w) == 4:
            rank[(int(w[0]), int(w[1]), int(w[2]))] = float(w[3])
        else:
            raise AssertionError(f"unexpected output line {line!r}")
    return tot, rank


def main(root, benchkv):
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as d:
        # Hand-made: run 0 epoch 1 lasts 2000 ns (its longest client), 180 requests -> 90 Mops;
        # rank 0 has 150 of them -> 75 Mops, rank 1 30 -> 15. Epoch 2: 30 requests / 1000 ns.
        csv = os.path.join(d, "hand.csv")
        with open(csv, "w") as f:
            f.write("run,rank,client_id,epoch,requests,duration_ns\n"
                    "0,0,0,1,100,1000\n0,0,1,1,50,1000\n0,1,0,1,30,2000\n"
                    "0,0,0,2,10,1000\n0,1,0,2,20,1000\n1,0,0,1,5,500\n")
        p = run(root, csv, "--per-rank", "--print", "-o", os.path.join(d, "hand.png"))
        check(p.returncode == 0, f"hand-made CSV: exit {p.returncode}: {p.stderr}")
        tot, rank = printed(p.stdout)
        check(tot == {(0, 1): 90.0, (0, 2): 30.0, (1, 1): 10.0}, f"per-epoch totals {tot}")
        check(rank == {(0, 1, 0): 75.0, (0, 1, 1): 15.0, (0, 2, 0): 10.0, (0, 2, 1): 20.0, (1, 1, 0): 10.0},
              f"per-rank figures {rank}")
        with open(os.path.join(d, "hand.png"), "rb") as f:
            check(f.read(8) == PNG_MAGIC, "hand.png is not a PNG")
        # benchkv data's CSV leads with value_size: the same figures.
        sized = os.path.join(d, "sized.csv")
        with open(sized, "w") as f:
            f.write("value_size,run,rank,client_id,epoch,requests,duration_ns\n"
                    "64,0,0,0,1,100,1000\n64,0,0,1,1,50,1000\n64,0,1,0,1,30,2000\n"
                    "64,0,0,0,2,10,1000\n64,0,1,0,2,20,1000\n4096,1,0,0,1,5,500\n")
        p = run(root, sized, "--print", "-o", os.path.join(d, "sized.png"))
        check(p.returncode == 0, f"data CSV: exit {p.returncode}: {p.stderr}")
        check(p.returncode == 0 and printed(p.stdout)[0] == {(0, 1): 90.0, (0, 2): 30.0, (1, 1): 10.0},
              f"data CSV per-epoch totals {p.stdout}")
        # benchkv rpc's with several sizes leads with message_size (runs numbered across
        # the sizes): the same figures, each run's size in its legend label.
        msized = os.path.join(d, "msized.csv")
        with open(msized, "w") as f:
            f.write(open(sized).read().replace("value_size,", "message_size,", 1))
        p = run(root, msized, "--print", "-o", os.path.join(d, "msized.png"))
        check(p.returncode == 0 and printed(p.stdout)[0] == {(0, 1): 90.0, (0, 2): 30.0, (1, 1): 10.0},
              f"rpc CSV of two sizes: exit {p.returncode}: {p.stdout} {p.stderr}")
        got, err = probe(root, (
            "import plot_epochs\n"
            f"df = plot_epochs.load({msized!r})\n"
            "fig = plot_epochs.figure(plot_epochs.epoch_mops(df, False), None, 't', False, df.attrs['labels'])\n"
            "print(json.dumps([t.get_text() for t in fig.axes[0].get_legend().get_texts()]))\n"))
        check(got == ["run 0 (64 B messages)", "run 1 (4096 B messages)"], f"rpc CSV legend: {got} {err}")
        # --repeat's leads with seed, its runs numbered per repetition: seed 1 run 0 and
        # seed 2 run 0 are two lines, each epoch's duration its own (pooled, seed 2's
        # epoch 1 would take seed 1's 2000 ns and give 60 Mops, not 120).
        seeded = os.path.join(d, "seeded.csv")
        with open(seeded, "w") as f:
            f.write("seed,run,rank,client_id,epoch,requests,duration_ns\n"
                    "1,0,0,0,1,100,2000\n1,0,1,0,1,20,1000\n2,0,0,0,1,60,1000\n2,0,1,0,1,60,1000\n"
                    "2,1,0,0,1,5,500\n")
        p = run(root, seeded, "--print", "--per-rank", "-o", os.path.join(d, "seeded.png"))
        check(p.returncode == 0, f"--repeat CSV: exit {p.returncode}: {p.stderr}")
        lines = sorted(p.stdout.splitlines())
        check(lines == sorted(["1:0 1 60.000000", "2:0 1 120.000000", "2:1 1 10.000000", "1:0 1 0 50.000000",
                               "1:0 1 1 10.000000", "2:0 1 0 60.000000", "2:0 1 1 60.000000", "2:1 1 0 10.000000"]),
              f"--repeat CSV figures: {lines}")
        # A sized CSV with a run of two sizes is not benchkv's numbering.
        two = os.path.join(d, "two.csv")
        with open(two, "w") as f:
            f.write("message_size,run,rank,client_id,epoch,requests,duration_ns\n8,0,0,0,1,5,10\n64,0,0,0,2,5,10\n")
        p = run(root, two)
        check(p.returncode == 2 and "run 0 has several message_sizes" in p.stderr, f"two.csv: {p.stderr!r}")

        # Default output name: the CSV's with .png; nothing on stdout unless asked.
        p = run(root, csv, "--per-rank")
        check(p.returncode == 0 and os.path.exists(os.path.join(d, "hand.png")), "default output name")
        check(p.stdout == "", f"stdout without --print: {p.stdout!r}")

        # Nearly flat lines far above 0: the y axis still reaches above the top markers
        # (matplotlib's own margin, 5 % of the data's span, would cut them in half). The
        # rank maps: one per run, rows = ranks, columns = epochs, every cell the rank's
        # Mops (blank where a rank has no row for an epoch), one colour scale from 0 to the
        # largest rank figure of any run.
        flat = os.path.join(d, "flat.csv")
        with open(flat, "w") as f:
            f.write("run,rank,client_id,epoch,requests,duration_ns\n"
                    "0,0,0,1,1000,1000\n0,1,0,1,990,1000\n0,0,0,2,995,1000\n0,1,0,2,1000,1000\n"
                    "1,0,0,1,400,1000\n1,1,0,1,300,1000\n1,0,0,3,200,1000\n1,1,0,3,100,2000\n")
        got, err = probe(root, (
            "import math\n"
            "import plot_epochs\n"
            f"df = plot_epochs.load({flat!r})\n"
            "total, ranks = plot_epochs.epoch_mops(df, False), plot_epochs.epoch_mops(df, True)\n"
            "fig = plot_epochs.figure(total, ranks, 't')\n"
            "maps = [ax.images[0] for ax in fig.axes if ax.images]\n"
            "cells = lambda im: [[None if math.isnan(v) else round(float(v), 9) for v in row] for row in im.get_array().filled(float('nan'))]\n"
            "print(json.dumps({'total': list(fig.axes[0].get_ylim()), 'max_total': float(total['mops'].max()),\n"
            "                  'clims': [list(im.get_clim()) for im in maps], 'cells': [cells(im) for im in maps]}))\n"))
        check(got is not None, f"flat probe: {err}")
        if got is not None:
            lo, hi = got["total"]
            top = got["max_total"]
            check(lo == 0 and hi >= 1.05 * top, f"total panel: y from {lo} to {hi}, the largest value {top}")
            # Mops = requests / longest duration of the (run, epoch) x 1e3; run 1 epoch 3 lasts
            # 2000 ns, and it has no epoch 2 (a blank column).
            check(got["cells"] == [[[1000.0, 995.0], [990.0, 1000.0]], [[400.0, None, 100.0], [300.0, None, 50.0]]],
                  f"rank maps {got['cells']}")
            check(got["clims"] == [[0.0, 1000.0], [0.0, 1000.0]], f"rank maps' colour scales {got['clims']}")

        # Not benchkv's CSV, bad values, missing file: exit 2 naming the problem.
        bad_cases = {
            "columns.csv": ("a,b,c\n1,2,3\n", "not a benchkv per-epoch CSV"),
            "value.csv": ("run,rank,client_id,epoch,requests,duration_ns\n0,0,0,1,x,10\n", "line 2: requests is 'x'"),
            "negative.csv": ("run,rank,client_id,epoch,requests,duration_ns\n0,0,0,1,5,-10\n", "duration_ns is '-10'"),
            "twice.csv": ("run,rank,client_id,epoch,requests,duration_ns\n0,0,0,1,5,10\n0,0,0,1,6,10\n",
                          "line 3: a second row"),
            "zero.csv": ("run,rank,client_id,epoch,requests,duration_ns\n0,0,0,1,5,0\n", "duration of 0 ns"),
            "empty.csv": ("", "empty file"),
            "header.csv": ("run,rank,client_id,epoch,requests,duration_ns\n", "no rows"),
        }
        for name, (text, msg) in bad_cases.items():
            path = os.path.join(d, name)
            with open(path, "w") as f:
                f.write(text)
            p = run(root, path)
            check(p.returncode == 2 and msg in p.stderr, f"{name}: exit {p.returncode}, stderr {p.stderr!r}")
            check(not os.path.exists(path[:-4] + ".png"), f"{name}: a picture was written")
        p = run(root, os.path.join(d, "missing.csv"))
        check(p.returncode == 2 and "missing.csv: no such file" in p.stderr, f"missing file: {p.stderr!r}")

        # A real benchkv CSV: each run's epochs, weighted by their durations, give the
        # summary's total_mops of that run.
        b = subprocess.run([benchkv, "--transport", "sim", "--np", "2", "--client-threads", "2", "--queue-depth", "4",
                            "-d", "0.004", "--interval-ms", "1", "--trim", "1", "-r", "2", "--no-progress",
                            "--report", "none", "-o", "sim.csv", "meta"], cwd=d, capture_output=True, text=True)
        check(b.returncode == 0, f"benchkv: {b.stderr}")
        if b.returncode == 0:
            p = run(root, os.path.join(d, "sim.csv"), "--per-rank", "--print")
            check(p.returncode == 0, f"sim.csv: {p.stderr}")
            tot, rank = printed(p.stdout)
            longest = {}
            with open(os.path.join(d, "sim.csv")) as f:
                next(f)
                for line in f:
                    r, _, _, e, _, ns = map(int, line.split(","))
                    longest[(r, e)] = max(longest.get((r, e), 0), ns)
            with open(os.path.join(d, "sim.summary.json")) as f:
                summary = json.load(f)
            for rj in summary["runs"]:
                r = rj["run"]
                epochs = [e for (rr, e) in longest if rr == r]
                check(len(epochs) >= 2, f"run {r}: {len(epochs)} epochs")
                ns = sum(longest[(r, e)] for e in epochs)
                weighted = sum(tot[(r, e)] * longest[(r, e)] for e in epochs) / ns
                check(abs(weighted - rj["total_mops"]) <= 1e-5 * rj["total_mops"],
                      f"run {r}: epochs give {weighted} Mops, the summary {rj['total_mops']}")
                for k, rank_mops in enumerate(rj["per_rank_mops"]):
                    w = sum(rank[(r, e, k)] * longest[(r, e)] for e in epochs) / ns
                    check(abs(w - rank_mops) <= 1e-5 * rank_mops + 1e-6,
                          f"run {r} rank {k}: epochs give {w} Mops, the summary {rank_mops}")

    return report(failures)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], os.path.abspath(sys.argv[2])))
