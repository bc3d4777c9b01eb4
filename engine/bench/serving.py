"""A server process for a benchmark or a test: started (on a free loopback port), waited for
until its health URL answers or its output says it serves, and stopped afterwards (the
Streamlit app of the browser bench, llama-cpp-python's server of the local-model bench, the
workers of the workers bench)."""
from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def high_water_mb(pid: int | str = "self") -> float:
    """A process's peak resident memory in MB (Linux's `VmHWM`, reset when it executes a
    program), 0.0 once it is gone. Not `ru_maxrss`: a child keeps its parent's value from
    the fork, so a child of a large process reports the parent's peak."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def free_port() -> int:
    """A loopback port nobody holds right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def served(command: list[str], ready: str, name: str, timeout: float,
           **popen: Any) -> Iterator[subprocess.Popen[Any]]:
    """Run `command` (its output kept in a temporary file) until the block ends; enter the
    block, with the process, once `ready` (an http:// URL) answers 200, or once its output
    holds `ready` (any other text). RuntimeError, with the end of its output, when the process
    exits or `timeout` seconds pass first."""
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only

    def serves(log: Any) -> bool:
        if not ready.startswith("http://"):  # read without moving the offset it writes at
            return ready.encode() in os.pread(log.fileno(), os.fstat(log.fileno()).st_size, 0)
        try:
            with direct.open(ready, timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, **popen)
        deadline = time.monotonic() + timeout
        try:
            while not serves(log):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"{name} did not start: {log.read()[-2000:]}")
                time.sleep(0.2)
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
