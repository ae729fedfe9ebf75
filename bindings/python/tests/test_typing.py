"""SyncStore's calls are typed: each has its Store method's parameters and
returns what that method awaits, for mypy (and for inspect.signature)."""

from __future__ import annotations

import inspect
import re
import runpy
from pathlib import Path

import pytest

from agent_session import Store, SyncStore

BINDING = Path(__file__).resolve().parents[1]

# Store's calls: its public coroutine methods (open, a classmethod, aside).
CALLS = sorted(
    name
    for name, member in vars(Store).items()
    if not name.startswith("_") and inspect.iscoroutinefunction(member)
)


def test_the_sync_store_has_every_call_of_the_store():
    assert len(CALLS) >= 26
    for name in CALLS:
        sync = getattr(SyncStore, name, None)
        assert sync is not None, f"SyncStore has no {name}: add `{name} = _sync(Store.{name})`"
        assert sync.__wrapped__ is getattr(Store, name)
        assert inspect.signature(sync) == inspect.signature(getattr(Store, name))


def test_the_sync_store_example_runs(capsys):
    example = runpy.run_path(str(BINDING / "examples" / "sync_store.py"))
    example["main"]("memory://")
    assert "took back: ORD-58213 left the warehouse today." in capsys.readouterr().out


# Checked with the package's mypy configuration (strict). `# E: code` marks
# the lines that must be errors, with their error code; every other line
# must check clean. Were SyncStore's calls `Any` again, the returns would
# be errors (no-any-return) and the marked lines would not.
SNIPPET = """
from typing import Any, Optional

from agent_session import SyncStore


def created(store: SyncStore) -> dict[str, Any]:
    session: dict[str, Any] = store.create("app", "ada", ttl_secs=60, metadata={"k": "v"})
    backend: str = store.backend
    assert backend
    return session


def resolved(store: SyncStore) -> tuple[dict[str, Any], bool]:
    return store.resolve("app", "ada", "chat", idle_timeout_secs=60)


def history(store: SyncStore) -> list[dict[str, Any]]:
    return store.messages("app", "ada", "s", branch=None)


def popped(store: SyncStore) -> Optional[dict[str, Any]]:
    return store.pop("app", "ada", "s")


def version(store: SyncStore) -> int:
    return store.replace_context("app", "ada", "s", [], expected_version=3)


def mistakes(store: SyncStore) -> None:
    store.create("app", "ada", ttl_secs="60")  # E: arg-type
    store.get("app", "ada")  # E: call-arg
    store.list("app", "ada", pages=2)  # E: call-arg
    count: int = store.messages("app", "ada", "s")  # E: assignment
    store.no_such_call()  # E: attr-defined
"""


def test_mypy_sees_the_sync_store_calls_typed(tmp_path, monkeypatch):
    api = pytest.importorskip("mypy.api")
    # The configuration's mypy_path ("python") is relative to the directory mypy runs in.
    monkeypatch.chdir(BINDING)
    snippet = tmp_path / "sync_store_types.py"
    snippet.write_text(SNIPPET)
    stdout, stderr, status = api.run(
        [
            "--config-file",
            str(BINDING / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "mypy_cache"),
            "--no-error-summary",
            str(snippet),
        ]
    )
    expected = {
        (number, match.group(1))
        for number, line in enumerate(SNIPPET.splitlines(), start=1)
        if (match := re.search(r"# E: ([\w-]+)$", line))
    }
    found = {
        (int(m.group(1)), m.group(2))
        for m in re.finditer(r"^.*sync_store_types\.py:(\d+): error: .*\[([\w-]+)\]$", stdout, re.M)
    }
    assert found == expected, stdout + stderr
    assert status == 1, stdout + stderr
