"""Helpers of the MCP server's tests: a tool result's data or error text, a script run against
an in-process server, and a durable hashing store."""

from __future__ import annotations

import asyncio
import json

import pytest
from mcp import Client

from hypermem import HashingEmbedder, Memory


def _data(result):
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def _error(result) -> str:
    assert result.is_error
    return " ".join(getattr(c, "text", "") for c in result.content)


@pytest.fixture(name="db")
def db_fixture(tmp_path):
    mem = Memory.open(tmp_path / "agent.db", embedder=HashingEmbedder(dim=64))
    yield mem
    mem.close()


def _call(app, script):
    async def main():
        async with Client(app) as client:
            return await script(client)
    return asyncio.run(main())
