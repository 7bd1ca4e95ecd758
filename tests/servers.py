"""Starting real servers on loopback in tests: a free port, and waiting until one answers."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_answering(url: str, process: subprocess.Popen, log: Path, what: str, timeout: float = 120.0) -> None:
    """Poll `url` until it answers 200; fail with the tail of `log` if `process` ends first or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, f"{what} ended: {log.read_text()[-2000:]}"
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"{what} did not answer in {timeout:.0f} s: {log.read_text()[-2000:]}"
        time.sleep(0.5)
