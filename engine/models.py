"""Values shared by every protocol: seats, turns, the error users fix, and the result base."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ERROR_CODES = ("input", "limit", "no_model")


class ConfigError(ValueError):
    """Bad arguments, raised before any model call; the message says what to change."""

    def __init__(self, message: str, code: str = "input"):
        if code not in ERROR_CODES:
            raise ValueError(f"ConfigError code must be one of {ERROR_CODES}, got {code!r}")
        super().__init__(message)
        self.code = code


class Seat(BaseModel):
    """Who sits where: a name, a model (chat model or spec string), a persona and a role."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str
    model: Any = "simulated"
    persona: str = ""
    role: str = ""
    temperature: float | None = None
    icon: str = ""

    def __init__(self, name: str = "", model: Any = "simulated", persona: str = "",
                 role: str = "", temperature: float | None = None, **kw: Any):
        super().__init__(name=name, model=model, persona=persona, role=role,
                         temperature=temperature, **kw)

    @property
    def spec(self) -> str:
        """The model as a spec string, for the record (never includes keys)."""
        return model_spec(self.model)


def model_spec(model: Any) -> str:
    """A printable, secret-free description of a model or spec string."""
    if model is None:
        return ""
    if isinstance(model, str):
        return model.split("?")[0] if "key=" in model.lower() else model
    spec = getattr(model, "parley_spec", None)
    if spec:
        return spec
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    kind = type(model).__name__
    return f"{kind}:{name}" if isinstance(name, str) and name else kind


def now() -> datetime:
    return datetime.now(timezone.utc)


class Turn(BaseModel):
    """One model call as recorded: what was sent, what came back, and how it went."""

    index: int
    phase: str
    round: int = 0
    seat: str
    role: str = ""
    model: str = ""
    messages: list[dict[str, str]] = Field(default_factory=list)
    reply: str = ""
    parsed: dict[str, Any] = Field(default_factory=dict)
    status: Literal["ok", "degraded"] = "ok"
    error: str = ""
    warnings: list[str] = Field(default_factory=list)
    latency: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    attempts: int = 1
    simulated: bool = False
    started_at: datetime = Field(default_factory=now)
    finished_at: datetime = Field(default_factory=now)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class RunResult(BaseModel):
    """Common base of every protocol's result: the turn log and run-level facts."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    protocol: str = ""
    run_id: str | None = None
    turns: list[Turn] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    expected: str | None = None
    correct: bool | None = None
    duration: float = 0.0

    def outcome(self) -> dict[str, Any]:
        """Headline metrics stored on the run row (protocols extend this)."""
        return {}

    @property
    def question_text(self) -> str:
        for field in ("question", "topic", "task"):
            value = getattr(self, field, None)
            if isinstance(value, str):
                return value
        return ""
