"""The real judge server on 127.0.0.1 and an LLM judge talking to it over HTTP
(a pytest plugin: ``pytest_plugins = ["scoring_fixtures"]``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from monitor.judge import OpenAIJudge
from tests.support.judge_server import JudgeServer

TEST_MODEL = "gpt-4o-mini"
TEST_EMBEDDING_MODEL = "text-embedding-3-small"


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    with JudgeServer() as server:
        yield server


def http_judge_for(server: JudgeServer, *, max_retries: int = 0) -> OpenAIJudge:
    return OpenAIJudge(
        base_url=server.base_url,
        model=TEST_MODEL,
        embedding_model=TEST_EMBEDDING_MODEL,
        timeout_seconds=10.0,
        max_retries=max_retries,
        concurrency=8,
    )


@pytest.fixture
async def http_judge(judge_server: JudgeServer) -> AsyncIterator[OpenAIJudge]:
    judge = http_judge_for(judge_server)
    try:
        yield judge
    finally:
        await judge.aclose()
