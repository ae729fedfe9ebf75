"""The interpreter exits cleanly whatever the package was doing: every
store kind, async and blocking calls, calls left running, daemon threads
calling while the interpreter exits, a fork. Each script runs in a fresh
interpreter that must exit 0 with nothing on stderr."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import PG_URL, _postgres_up

SCRIPTS = Path(__file__).parent / "scripts"
REDIS = ("127.0.0.1", 6379)


def _redis_up() -> bool:
    try:
        socket.create_connection(REDIS, timeout=1).close()
        return True
    except OSError:
        return False


@pytest.fixture
def server_urls() -> Iterator[list[str]]:
    """PostgreSQL and Redis, which CI runs; skipped elsewhere when absent.
    The PostgreSQL schema is dropped after the test."""
    schema = f"py_exit_{uuid.uuid4().hex[:12]}"
    urls = []
    for name, up, url in (
        ("PostgreSQL", _postgres_up(), f"{PG_URL}?schema={schema}"),
        ("Redis", _redis_up(), f"redis://{REDIS[0]}:{REDIS[1]}?prefix=py-exit-{uuid.uuid4().hex[:12]}"),
    ):
        if up:
            urls.append(url)
        elif os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {name} must answer")
    yield urls
    subprocess.run(
        ["psql", PG_URL, "-q", "-c", f"DROP SCHEMA IF EXISTS {schema} CASCADE"],
        check=False,
        capture_output=True,
    )


def _run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def _assert_clean(run: subprocess.CompletedProcess[str], what: str) -> None:
    assert run.returncode == 0, f"{what}: exit {run.returncode}\n{run.stderr[-3000:]}"
    assert run.stderr == "", f"{what}: wrote to stderr\n{run.stderr[-3000:]}"


def test_the_interpreter_exits_cleanly_after_every_call_path(
    tmp_path: Path, server_urls: list[str]
) -> None:
    urls = server_urls
    for i in range(30):
        scratch = tmp_path / f"run{i}"
        scratch.mkdir()
        run = _run([str(SCRIPTS / "every_call.py"), str(scratch), *urls])
        _assert_clean(run, f"run {i}")
        assert run.stdout.strip() == "done"


@pytest.mark.parametrize(
    "flags,env",
    [(["-X", "dev"], {}), ([], {"PYTHONMALLOC": "debug"})],
    ids=["dev-mode", "debug-malloc"],
)
def test_the_interpreter_exits_cleanly_under_checks(
    tmp_path: Path, flags, env, server_urls: list[str]
) -> None:
    run = _run([*flags, str(SCRIPTS / "every_call.py"), str(tmp_path), *server_urls], env)
    _assert_clean(run, " ".join(flags) or str(env))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_opens_its_own_store(store_url: str) -> None:
    for i in range(3):
        run = _run([str(SCRIPTS / "fork.py"), store_url])
        _assert_clean(run, f"fork run {i}")
        assert sorted(run.stdout.split("\n")[:2]) == ["child ok", "parent ok"], run.stdout
