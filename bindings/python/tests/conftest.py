"""Stores the binding's tests run on: SQLite in a temporary file, and
PostgreSQL in a schema of its own (dropped afterwards) when it answers on
127.0.0.1:5432 or POSTGRES_URL; under CI=true PostgreSQL must answer."""

from __future__ import annotations

import os
import socket
import subprocess
import uuid

import pytest

import agent_session

PG_URL = os.environ.get("POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")


def _postgres_up() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=1).close()
        return True
    except OSError:
        return "POSTGRES_URL" in os.environ


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path):
    """A store URL: a new SQLite file, or a new PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path}/sessions.db"
        return
    if not _postgres_up():
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true: PostgreSQL must answer on 127.0.0.1:5432")
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    schema = f"py_{uuid.uuid4().hex}"
    yield f"{PG_URL}?schema={schema}"
    subprocess.run(
        ["psql", PG_URL, "-q", "-c", f"DROP SCHEMA IF EXISTS {schema} CASCADE"],
        check=False,
        capture_output=True,
    )


@pytest.fixture
async def store(store_url):
    yield await agent_session.Store.open(store_url)
