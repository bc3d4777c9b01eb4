"""The simulated model: an offline, seeded chat model for demos, tests and benchmarks; every
reply it makes is labelled simulated."""
from engine.simulated.model import SimulatedChatModel, read_prompt

__all__ = ["SimulatedChatModel", "read_prompt"]
