"""Parley's command line (`python -m engine`)."""
from engine.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
