"""Restarting a completed run: time until ``userturn run`` says there is nothing to do.

A run of about 1,000 user turns (36 demo items x (1 greedy + 3 temperatures x 9 samples) by
default, small token budgets so that it is quick to build) is completed once, then the same
command is run again ``--repeats`` times; each restart is a fresh process, timed from start to
exit (wall, and CPU seconds of the child).

    python benchmarks/resume.py --repeats 5
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, load_average, median, table, write_result


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=36, help="demo items")
    parser.add_argument("--temperatures", default="0,0.7,1.0,1.3")
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="run folder (default: a temporary one)")
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/resume.json"))
    args = parser.parse_args()

    load_before = load_average()
    out = args.out or Path(tempfile.mkdtemp(prefix="userturn-resume-")) / "run"
    command = [sys.executable, "-m", "userturn", "run", "--limit", str(args.limit), "--temperatures",
               args.temperatures, "--samples", str(args.samples), "--assistant-max-new-tokens", "16",
               "--user-max-new-tokens", "8", "--threads", str(args.threads), "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    start = time.perf_counter()
    first = subprocess.run([*command, "--quiet"], env=env, capture_output=True, text=True)
    if first.returncode != 0:
        raise SystemExit(f"the first run failed:\n{first.stderr[-2000:]}")
    build = time.perf_counter() - start
    samples = sum(1 for _ in (out / "samples.jsonl").open(encoding="utf-8"))
    print(f"completed run of {samples} user turns in {build:.1f} s (load {load_average()})", flush=True)
    restarts = []
    for repeat in range(args.repeats):
        cpu_before, start = child_cpu(), time.perf_counter()
        proc = subprocess.run(command, env=env, capture_output=True, text=True)
        wall, cpu = time.perf_counter() - start, child_cpu() - cpu_before
        said = "nothing to do" in proc.stdout + proc.stderr
        restarts.append({"wall": wall, "cpu": cpu, "nothing_to_do": said, "returncode": proc.returncode,
                         "load": load_average()})
        print(f"restart {repeat + 1}: {wall:.2f} s wall, {cpu:.2f} s cpu, nothing to do: {said} "
              f"(load {load_average()})", flush=True)
    wall, cpu = median([r["wall"] for r in restarts]), median([r["cpu"] for r in restarts])
    print(f"\nrestart of a completed {samples}-sample run, median of {args.repeats}\n")
    print(table(["samples", "wall s", "cpu s", "said nothing to do"],
                [[samples, wall, cpu, all(r["nothing_to_do"] for r in restarts)]]))
    print(f"\ntarget < 2 s: {'met' if wall < 2 else 'MISSED'} on wall time, {'met' if cpu < 2 else 'MISSED'} on CPU time")
    write_result(args.json, "resume", {"settings": vars(args) | {"json": str(args.json), "out": str(out)},
                                       "samples": samples, "build_seconds": build, "restarts": restarts,
                                       "median_wall": wall, "median_cpu": cpu}, load_before)


if __name__ == "__main__":
    main()
