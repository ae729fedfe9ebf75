"""CPU per append of the bench client and of the Redis server, store against raw engine.

Runs `agent-session bench --compare raw --workload w2` and samples, every
`--every` seconds, the CPU time of the bench process and of `redis-server`
(`/proc/<pid>/stat`) and the server's command counts (`INFO
commandstats`). A sample in which only the store's appends ran (one
`HSETNX` per event, the id's claim) counts for the store; one in which
only the raw engine's ran (one `HINCRBY` per append) for the raw engine;
samples that hold both, or the sessions' creation, are left out. The two
processes share the machine's cores, so what bounds the rate is the sum.

    pip install redis
    python crates/session-redis/benches/cpu_per_append.py \
        --cli target/release/agent-session --clients 16

Keep `--sessions` within the repository's remembered heads (4,096): past
them every append reads its head first, two round trips instead of one.
"""

import argparse
import os
import subprocess
import time

import redis

HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def counts(r: redis.Redis) -> tuple[int, int]:
    """Calls of `HSETNX` (store appends) and `HINCRBY` (raw appends) so far."""
    stats = r.info("commandstats")
    return (stats.get("cmdstat_hsetnx", {}).get("calls", 0),
            stats.get("cmdstat_hincrby", {}).get("calls", 0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--cli", default="target/release/agent-session")
    ap.add_argument("--url", default="redis://127.0.0.1:6379")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--every", type=float, default=0.02)
    args = ap.parse_args()
    r = redis.Redis.from_url(args.url)
    server = int(r.info("server")["process_id"])
    bench = subprocess.Popen(
        [args.cli, "--quiet", "--store", args.url, "bench", "--compare", "raw", "--workload", "w2",
         "--clients", str(args.clients), "--sessions", str(args.sessions)],
        stdout=subprocess.DEVNULL)
    totals = {"store": [0.0, 0.0, 0], "raw": [0.0, 0.0, 0]}
    prev = (cpu_seconds(bench.pid), cpu_seconds(server), *counts(r))
    while bench.poll() is None:
        time.sleep(args.every)
        try:
            cur = (cpu_seconds(bench.pid), cpu_seconds(server), *counts(r))
        except FileNotFoundError:
            break
        store, raw = cur[2] - prev[2], cur[3] - prev[3]
        side = "store" if store and not raw else "raw" if raw and not store else None
        if side:
            t = totals[side]
            t[0] += cur[0] - prev[0]
            t[1] += cur[1] - prev[1]
            t[2] += store or raw
        prev = cur
    if bench.wait() != 0:
        raise SystemExit(f"the bench failed ({bench.returncode})")
    for side, (client, srv, n) in totals.items():
        if n == 0:
            print(f"{side}: no sample held its appends alone (try a smaller --every)")
            continue
        print(f"{side}: {n} appends sampled; CPU per append: client {client / n * 1e6:.0f} µs, "
              f"server {srv / n * 1e6:.0f} µs, both {(client + srv) / n * 1e6:.0f} µs")


if __name__ == "__main__":
    main()
