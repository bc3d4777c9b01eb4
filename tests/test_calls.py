"""Guarded model calls: retries on transient errors, per-call timeout, usage, providers."""
from __future__ import annotations

import asyncio
import importlib.util
from types import SimpleNamespace

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from engine import ConfigError, Seat, get_model, run_debate
from engine.llm.calls import RunContext, describe_error
from engine.llm.failures import is_transient

HELLO = [{"role": "user", "content": "Say hello."}]


class RateLimitError(Exception):
    """Like the provider SDKs' rate-limit errors: it carries the 429 status."""

    status_code = 429


class UpstreamError(Exception):
    status_code = 503


class BadRequest(Exception):
    status_code = 400


class WrappedHTTPError(Exception):
    def __init__(self, status):
        super().__init__(f"HTTP {status}")
        self.response = SimpleNamespace(status_code=status)


class SleepyModel(BaseChatModel):
    """Answers after `delay` seconds (an awaitable sleep, so a timeout can cancel it)."""

    delay: float = 30.0
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "sleepy"

    def _generate(self, messages, stop=None, run_manager=None, **kw):
        raise NotImplementedError("async only")

    async def _agenerate(self, messages, stop=None, run_manager=None, **kw):
        object.__setattr__(self, "calls", self.calls + 1)
        await asyncio.sleep(self.delay)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="late"))])


def call(model, *, retries=2, timeout=None, **kw):
    """One guarded call through a fresh run context, with no backoff sleeps."""
    ctx = RunContext("test", retries=retries, timeout=timeout, backoff=0)
    turn = asyncio.run(ctx.call(Seat("seat", model), HELLO, phase="test", **kw))
    assert ctx.turns == [turn]
    return turn


# --------------------------------------------------------------------------- classification
def _sdk_errors():
    """The openai SDK's own connection, time-out and server errors, and httpx's."""
    import httpx
    import openai
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    return [openai.APIConnectionError(request=request), openai.APITimeoutError(request),
            openai.InternalServerError("500", response=httpx.Response(500, request=request),
                                       body=None),
            openai.RateLimitError("429", response=httpx.Response(429, request=request),
                                  body=None),
            httpx.ConnectError("refused"), httpx.ReadTimeout("slow")]


@pytest.mark.parametrize("exc", [
    RateLimitError("slow down"), UpstreamError("unavailable"), WrappedHTTPError(502),
    WrappedHTTPError(429), TimeoutError(), asyncio.TimeoutError(), ConnectionError("reset"),
    *_sdk_errors()])
def test_transient_errors(exc):
    assert is_transient(exc)


@pytest.mark.parametrize("name", ["APIConnectionError", "InternalServerError", "RateLimitError",
                                  "ServiceUnavailableError", "TemporaryFailure"])
def test_a_class_named_like_a_transient_error_is_not_one(name):
    """Errors are told apart by their class (and the status they carry), never its name."""
    assert not is_transient(type(name, (Exception,), {})("connection timeout, rate limit"))


@pytest.mark.parametrize("exc", [ValueError("bad"), BadRequest("400"), WrappedHTTPError(401),
                                 KeyError("x"), type("AuthenticationError", (Exception,),
                                                     {})("no key")])
def test_non_transient_errors(exc):
    assert not is_transient(exc)


def test_describe_error_is_one_line_naming_the_type():
    assert describe_error(ValueError("bad thing\nmore detail")) == "ValueError: bad thing"
    assert describe_error(TimeoutError()) == "TimeoutError: the model did not answer in time"


# --------------------------------------------------------------------------- retries
@pytest.mark.parametrize("transient", [RateLimitError("slow down"), UpstreamError("busy"),
                                       WrappedHTTPError(500)])
def test_transient_error_is_retried_then_succeeds(recording_model, transient):
    model = recording_model([transient, "hello"])
    turn = call(model)
    assert turn.status == "ok" and turn.reply == "hello"
    assert turn.attempts == 2 and turn.error == ""
    assert len(model.received) == 2


def test_two_transient_errors_then_success_within_two_retries(recording_model):
    model = recording_model([RateLimitError("a"), UpstreamError("b"), "hello"])
    turn = call(model, retries=2)
    assert turn.ok and turn.attempts == 3 and len(model.received) == 3


@pytest.mark.parametrize("error", [ValueError("bad prompt"), BadRequest("invalid request")])
def test_non_transient_error_is_not_retried(recording_model, error):
    model = recording_model([error, "never used"])
    turn = call(model, retries=3)
    assert turn.status == "degraded"
    assert turn.attempts == 1 and len(model.received) == 1
    assert type(error).__name__ in turn.error
    assert turn.reply == ""


def test_exhausted_retries_record_the_error_and_attempts(recording_model):
    model = recording_model([RateLimitError("quota exceeded")])
    turn = call(model, retries=2)
    assert turn.status == "degraded"
    assert turn.attempts == 3 and len(model.received) == 3
    assert turn.error == "RateLimitError: quota exceeded"
    assert turn.reply == ""


def test_zero_retries_means_one_attempt(recording_model):
    model = recording_model([RateLimitError("x"), "hello"])
    turn = call(model, retries=0)
    assert turn.status == "degraded" and turn.attempts == 1 and len(model.received) == 1


def test_retries_option_reaches_the_run(recording_model):
    pro = recording_model([UpstreamError("busy"), "pro"])
    con, judge = recording_model(["con"]), recording_model(["VERDICT: x\nCONFIDENCE: 0.5"])
    result = run_debate("T?", proponent=pro, opponent=con, judge=judge, max_rounds=1,
                        retries=1)
    assert result.turns[0].ok and result.turns[0].attempts == 2
    assert result.rounds[0].proponent_argument == "pro"


# --------------------------------------------------------------------------- timeout, empty
def test_per_call_timeout_gives_a_degraded_turn():
    model = SleepyModel(delay=30)
    turn = call(model, retries=0, timeout=0.2)
    assert turn.status == "degraded"
    assert "TimeoutError" in turn.error and "did not answer in time" in turn.error
    assert turn.reply == "" and model.calls == 1


def test_timeout_is_transient_so_it_is_retried():
    model = SleepyModel(delay=30)
    turn = call(model, retries=1, timeout=0.1)
    assert turn.status == "degraded" and turn.attempts == 2 and model.calls == 2


def test_timeout_per_call_option_in_a_run(recording_model):
    con, judge = recording_model(["con"]), recording_model(["VERDICT: x\nCONFIDENCE: 0.5"])
    result = run_debate("T?", proponent=SleepyModel(delay=30), opponent=con, judge=judge,
                        max_rounds=1, retries=0, timeout_per_call=0.2)
    assert result.rounds[0].proponent_argument == "Error: Unable to generate argument."
    assert "TimeoutError" in result.turns[0].error
    assert result.turns[1].ok and result.turns[2].ok


@pytest.mark.parametrize("reply", ["", "   \n  "])
def test_empty_reply_is_degraded(recording_model, reply):
    turn = call(recording_model([reply]))
    assert turn.status == "degraded" and turn.error == "empty reply"
    assert turn.attempts == 1


def test_parse_fills_fields_only_for_a_usable_reply(recording_model):
    parse = lambda text: ({"length": len(text)}, ["a warning"])  # noqa: E731
    ok = call(recording_model(["hello"]), parse=parse)
    assert ok.parsed == {"length": 5} and ok.warnings == ["a warning"]
    bad = call(recording_model([ValueError("x")]), parse=parse)
    assert bad.parsed == {} and bad.warnings == []


# --------------------------------------------------------------------------- what a turn records
def test_tokens_come_from_usage_metadata():
    model = GenericFakeChatModel(messages=iter([AIMessage(
        content="hi there", usage_metadata={"input_tokens": 12, "output_tokens": 5,
                                            "total_tokens": 17})]))
    turn = call(model)
    assert (turn.tokens_in, turn.tokens_out) == (12, 5)
    assert turn.simulated is False
    assert turn.latency >= 0 and turn.finished_at >= turn.started_at


def test_missing_usage_metadata_records_an_estimate_flagged_so(recording_model):
    """No usage reported: the tokens are estimated from the text (about four characters a
    token, DESIGN 2.11) and the turn says so; a reported usage is never flagged."""
    turn = call(recording_model(["hi"]))
    assert turn.usage_estimated and turn.tokens_in >= 1 and turn.tokens_out == 1
    assert turn.cost_usd is None  # a fake model is unpriced: unknown, never 0


def test_turn_records_messages_seat_and_model(recording_model):
    ctx = RunContext("test", retries=0, backoff=0)
    seat = Seat("Ada", recording_model(["hi"]), persona="Be brief.", role="critic")
    turn = asyncio.run(ctx.call(seat, HELLO, phase="p", round=2))
    assert turn.messages == [{"role": "system", "content": "Be brief."}, HELLO[0]]
    assert (turn.seat, turn.role, turn.phase, turn.round, turn.index) == \
        ("Ada", "critic", "p", 2, 0)
    assert turn.model == "RecordingModel"


def test_simulated_model_labels_turns_and_reports_usage():
    turn = call(get_model("simulated"))
    assert turn.status == "ok" and turn.reply.strip()
    assert turn.simulated is True
    assert turn.tokens_in > 0 and turn.tokens_out > 0
    assert turn.model == "simulated"


def test_simulated_model_is_deterministic():
    first = call(get_model("simulated?seed=3"))
    second = call(get_model("simulated?seed=3"))
    assert first.reply == second.reply


# --------------------------------------------------------------------------- fault injection
def test_injected_failures_produce_degraded_turns():
    model = get_model("simulated?latency=0&fail=1")
    result = run_debate("Should we?", proponent=model, opponent=model, judge=model,
                        max_rounds=2)
    assert len(result.turns) == 5
    assert all(t.status == "degraded" and "SimulatedFault" in t.error for t in result.turns)
    assert all(t.attempts == 1 for t in result.turns)  # an injected failure is not transient
    assert all(r.proponent_argument == "Error: Unable to generate argument." and
               r.opponent_argument == "Error: Unable to generate counter-argument."
               for r in result.rounds)
    assert result.verdict.startswith("Unable to reach verdict due to error:")
    assert result.confidence == 0


def test_injected_rate_limits_are_retried():
    turn = call(get_model("simulated?ratelimit=1"), retries=2)
    assert turn.status == "degraded" and turn.attempts == 3
    assert "SimulatedRateLimitError" in turn.error


def test_injected_empty_replies():
    turn = call(get_model("simulated?empty=1"))
    assert turn.status == "degraded" and turn.error == "empty reply"


def test_fault_options_as_keyword_arguments():
    turn = call(get_model("simulated", fail=1.0))
    assert turn.status == "degraded" and "SimulatedFault" in turn.error


@pytest.mark.parametrize("spec, fragment", [
    ("simulated?bogus=1", "bogus"),
    ("simulated?latency=abc", "latency"),
    ("simulated?fail=lots", "fail"),
    ("simulated?fail=2", "fail"),
])
def test_bad_simulated_options_raise_config_error(spec, fragment):
    with pytest.raises(ConfigError) as info:
        get_model(spec)
    assert info.value.code == "no_model"
    assert fragment in str(info.value)


# --------------------------------------------------------------------------- providers
@pytest.mark.parametrize("spec", ["nosuchvendor:model", "gpt-4o", "", "openai:"])
def test_unknown_or_incomplete_model_spec(spec):
    with pytest.raises(ConfigError) as info:
        get_model(spec)
    assert info.value.code == "no_model"


def test_anthropic_without_the_package_names_the_install(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError) as info:
        get_model("anthropic:claude-x")
    assert info.value.code == "no_model"
    if importlib.util.find_spec("langchain_anthropic") is None:
        assert "pip install langchain-anthropic" in str(info.value)
    else:  # installed here: the next thing missing is the key
        assert "ANTHROPIC_API_KEY" in str(info.value)


def test_ollama_without_the_package_names_the_install():
    if importlib.util.find_spec("langchain_ollama") is not None:
        pytest.skip("langchain-ollama is installed here")
    with pytest.raises(ConfigError) as info:
        get_model("ollama:llama3")
    assert "pip install langchain-ollama" in str(info.value)


def test_openai_without_key_or_base_url_names_the_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError) as info:
        get_model("openai:gpt-4o-mini")
    assert info.value.code == "no_model"
    assert "OPENAI_API_KEY" in str(info.value)


def test_openai_with_base_url_needs_no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = get_model("openai:local-model", base_url="http://127.0.0.1:9/v1")
    assert model.model_name == "local-model"
    # the record keeps the endpoint, so a re-run calls the same URL (issue 10)
    assert Seat("s", model).spec == "openai:local-model?base_url=http://127.0.0.1:9/v1"


def test_openai_key_from_secrets_mapping(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = get_model("openai:gpt-4o-mini", secrets={"OPENAI_API_KEY": "sk-test-secret"})
    assert model.openai_api_key.get_secret_value() == "sk-test-secret"
    assert "sk-test-secret" not in Seat("s", model).spec


def test_spec_with_a_key_never_shows_the_key():
    assert Seat("s", "openai:gpt-4o?api_key=sk-hidden").spec == "openai:gpt-4o"
