"""`python -m engine`: Parley's command line (see `engine.cli`)."""
from engine.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
