"""`surogate serve` started for a test: waits for its startup line, yields its URL, served name and
process, and stops it with SIGTERM, which must end it with status 0."""
import contextlib
import re
import select
import signal
import subprocess
import time

import pytest


@contextlib.contextmanager
def serve_process(args, startup_seconds=180):
    process = subprocess.Popen([str(arg) for arg in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line, deadline = "", time.time() + startup_seconds
    while time.time() < deadline and process.poll() is None:
        if select.select([process.stdout], [], [], 1.0)[0]:
            line = process.stdout.readline()
            break
    match = re.match(r"serving (\S+) on http://127\.0\.0\.1:(\d+)$", line.strip())
    if not match:
        process.kill()
        pytest.fail(f"no startup line: {line!r} {process.stderr.read()}")
    yield {"url": f"http://127.0.0.1:{match.group(2)}", "base": match.group(1), "process": process}
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0, process.stderr.read()
