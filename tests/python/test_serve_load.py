"""bench/serve_load.py against `surogate serve` on the CPU with a tiny random Qwen3 (issue 46's load
test): 500 requests from 32 clients — malformed ones, streams the client leaves after the first
event, streams read to the end, plain chat and completions — every well-formed request answered,
every malformed one refused with OpenAI's error body, and the server's resident memory after the
load within 5 % + 16 MiB of the baseline taken after a warm-up round."""
import json
import pathlib
import subprocess
import sys

import pytest

from serve_process import serve_process
from test_generate_cli import qwen3_chat_model  # noqa: F401 (a fixture)

pytest.importorskip("transformers")

LOAD_SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "serve_load.py"
MIB = 1 << 20


def test_five_hundred_requests_from_32_clients_leave_the_server_as_it_was(surogate_bin, qwen3_chat_model):  # noqa: F811
    args = [surogate_bin, "serve", "--model", qwen3_chat_model, "--device", "cpu", "--port", "0", "--batch_size", 8,
            "--max_context", 256, "--max_prefill_tokens", 32]
    with serve_process(args) as served:
        result = subprocess.run([sys.executable, LOAD_SCRIPT, "--url", served["url"], "--model", served["base"],
                                 "--pid", str(served["process"].pid), "--requests", "500", "--clients", "32",
                                 "--max_tokens", "6"], capture_output=True, text=True, timeout=1200)
        assert served["process"].poll() is None, "the server died under load"
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["as_expected"] == {"malformed": 50, "cancelled": 50, "streamed": 100, "answered": 300}
    assert record["rss_after_bytes"] <= record["rss_baseline_bytes"] * 1.05 + 16 * MIB, record
