"""What the app asks the engine to do: background tasks, the library, the run form, the demo
and re-runs."""
