"""Process helpers the store's liveness tests share."""
from __future__ import annotations

import subprocess
import sys


def dead_pid() -> int:
    """The id of a process that has already exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid
