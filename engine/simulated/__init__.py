"""The simulated model: an offline, seeded model of agent dynamics whose parameters are part of
its spec; it reads only a run's `expected` answer and the structure of each task, and every
reply it makes is labelled simulated, with its world."""
from engine.simulated.model import SimulatedChatModel, with_traits, world_of
from engine.simulated.world import TRAITS, World

__all__ = ["TRAITS", "SimulatedChatModel", "World", "with_traits", "world_of"]
