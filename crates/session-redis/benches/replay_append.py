"""Server time of the append script, replayed: where an append's EVALSHA spends it.

Captures one append of `agent-session bench` with MONITOR, then runs it
again and again against a head hash set up before each call, timing only
the EVALSHA on the server (`INFO commandstats`), in variants: the script
as sent, and cut-down scripts that stop after the arguments and after
the head check. The variants run in interleaved rounds; each line gives
the median and the range.

    pip install redis
    python crates/session-redis/benches/replay_append.py \
        --cli target/release/agent-session --rounds 5 --calls 2000
"""

import argparse
import pathlib
import shlex
import statistics
import subprocess
import time

import redis

LUA = pathlib.Path(__file__).resolve().parent.parent / "lua"


def capture(cli: str, url: str) -> list[str]:
    """One append's EVALSHA (halfway through a short W1 run), as sent (the
    append script is the one called most)."""
    monitor = subprocess.Popen(["stdbuf", "-oL", "redis-cli", "-u", url, "MONITOR"],
                               stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    subprocess.run([cli, "--store", url, "bench", "--workload", "w1", "--events", "60", "--repeat", "1"],
                   check=True, capture_output=True)
    time.sleep(2)
    monitor.terminate()
    out, _ = monitor.communicate()
    calls = [shlex.split(l.split("] ", 1)[1]) for l in out.splitlines() if '"EVALSHA"' in l]
    sha = max(set(c[1] for c in calls), key=lambda h: sum(c[1] == h for c in calls))
    appends = [c for c in calls if c[1] == sha]
    return [a.replace('\\"', '"') for a in appends[len(appends) // 2]]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--cli", default="target/release/agent-session")
    p.add_argument("--url", default="redis://127.0.0.1:6379")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=2000)
    a = p.parse_args()
    r = redis.Redis.from_url(a.url)
    call = capture(a.cli, a.url)
    nkeys = int(call[2])
    keys, argv = call[3:3 + nkeys], call[3 + nkeys:]
    # The layout of `lua/append.lua`: the clock, the three fields checked,
    # the seven head fields written, ..., then the event count and the
    # first event's seq.
    seq = int(argv[16])
    before = seq - 1
    # The head hash in the order a create writes it (`write.rs`, `session_fields`).
    head = {"version": argv[1], "created_at": argv[2], "updated_at": argv[3], "expires_at": "",
            "last_seq": before, "next_ctx_pos": before, "event_count": before, "context_tokens": 0,
            "event_bytes": 0, "status": "active", "app": "bench", "user_id": "bench", "key": "",
            "ttl_at": "", "metadata": "{}"}
    head = {k: str(v) for k, v in head.items()}
    ttl = (LUA / "ttl.lua").read_text()
    append = (LUA / "append.lua").read_text()
    check = append[:append.index("-- The new events' ids first")] + "\nreturn 1"
    variants = [
        ("arguments only", "return 1", argv),
        ("head check", check, argv),
        ("whole append", ttl + "\n" + append, argv),
    ]
    times: dict[str, list[float]] = {v[0]: [] for v in variants}
    for _ in range(a.rounds):
        for name, script, args in variants:
            sha = r.script_load(script)
            r.config_resetstat()
            pipe = r.pipeline(transaction=False)
            for i in range(a.calls):
                pipe.delete(*keys)
                pipe.hset(keys[0], mapping=head)
                pipe.evalsha(sha, nkeys, *keys, *args)
                if i % 100 == 99:
                    assert pipe.execute()[-1] == 1, f"{name}: the script refused the call"
                    pipe = r.pipeline(transaction=False)
            times[name].append(r.info("commandstats")["cmdstat_evalsha"]["usec_per_call"])
    for k in keys:
        r.delete(k)
    for name, t in times.items():
        print(f"{name:26s} {statistics.median(t):6.2f} µs per EVALSHA ({min(t):.2f}–{max(t):.2f})")


if __name__ == "__main__":
    main()
