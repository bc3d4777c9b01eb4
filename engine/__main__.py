"""`python -m engine`: Parley's command line (see `engine.cli`). Start-up runs with the cyclic
garbage collector off: it makes only what lives as long as the process, and the command turns
the collector back on once its own imports are done (`engine.cli.commands.started`)."""
import gc

gc.disable()

from engine.cli import main  # noqa: E402 - after the collector is off

if __name__ == "__main__":
    raise SystemExit(main())
