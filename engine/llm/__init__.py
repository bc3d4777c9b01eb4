"""Talking to models: providers (`get_model`), registered endpoints, guarded calls, and reading
structured replies."""
