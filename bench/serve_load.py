#!/usr/bin/env python3
"""A load test for a running `surogate serve`, on 127.0.0.1 (issue 46's third speed row).

REQUESTS requests from CLIENTS threads, in a fixed mix by index i:
  i % 10 == 0  malformed: a body that is not JSON, a field out of range, or an unknown model; the
               answer must be the error status (400 / 404) with OpenAI's error body;
  i % 10 == 1  streamed, and the client hangs up after the first event (the server must free the
               sequence's slot);
  i % 10 in {2, 3}  streamed to the end (`data: [DONE]`);
  otherwise    a plain chat or completions request, answered with choices and a finish_reason.
Every well-formed request that runs to the end must be answered. With --pid, the server's resident
memory (VmRSS) is read after a warm-up round (the baseline: caches, arenas and worker threads
allocated) and again after the load, once the server is idle.

  python3 bench/serve_load.py --url http://127.0.0.1:8000 --model NAME [--api_key KEY] [--pid PID]

Prints one JSON record; exits 1 when a request was not answered as it should be.
"""
import argparse
import concurrent.futures
import http.client
import json
import sys
import time
import urllib.parse


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


class Load:
    def __init__(self, url, model, api_key, max_tokens):
        parsed = urllib.parse.urlparse(url)
        self.host, self.port = parsed.hostname, parsed.port
        self.model, self.max_tokens = model, max_tokens
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"

    def post(self, path, body, stream_events=None):
        """(status, body bytes); with stream_events, reads only that many SSE events, then hangs up."""
        connection = http.client.HTTPConnection(self.host, self.port, timeout=300)
        try:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            connection.request("POST", path, body=data, headers=self.headers)
            response = connection.getresponse()
            if stream_events is None:
                return response.status, response.read()
            received = b""
            while received.count(b"data: ") < stream_events:
                chunk = response.read1(4096)
                if not chunk:
                    break
                received += chunk
            return response.status, received
        finally:
            connection.close()

    def body(self, index, stream=False):
        prompt = f"Request {index}: tell me about the number {index * 7919 % 1000}."
        if index % 2 == 0:
            return "/v1/chat/completions", {"model": self.model, "messages": [{"role": "user", "content": prompt}],
                                            "max_tokens": self.max_tokens, "temperature": 0.7, "seed": index,
                                            "stream": stream}
        return "/v1/completions", {"model": self.model, "prompt": prompt, "max_tokens": self.max_tokens,
                                   "temperature": 0.7, "seed": index, "stream": stream}

    def one(self, index):
        """What happened to request `index`: (kind, ok, detail)."""
        kind = index % 10
        if kind == 0:
            variant = (index // 10) % 3
            if variant == 0:
                status, body = self.post("/v1/completions", b"{not json")
                expected = 400
            elif variant == 1:
                path, request = self.body(index)
                request["temperature"] = 7
                status, body = self.post(path, request)
                expected = 400
            else:
                path, request = self.body(index)
                request["model"] = "no-such-model"
                status, body = self.post(path, request)
                expected = 404
            ok = status == expected and "error" in json.loads(body or b"{}")
            return "malformed", ok, f"{status} {body[:200]!r}"
        if kind == 1:
            path, request = self.body(index, stream=True)
            request["max_tokens"] = max(self.max_tokens, 64)  # still running when the client leaves
            status, body = self.post(path, request, stream_events=1)
            return "cancelled", status == 200 and b"data: " in body, f"{status} {body[:200]!r}"
        if kind in (2, 3):
            path, request = self.body(index, stream=True)
            status, body = self.post(path, request)
            return "streamed", status == 200 and body.rstrip().endswith(b"data: [DONE]"), f"{status} {body[-200:]!r}"
        path, request = self.body(index)
        status, body = self.post(path, request)
        ok = status == 200
        if ok:
            choices = json.loads(body).get("choices", [])
            ok = len(choices) == 1 and choices[0].get("finish_reason") in ("stop", "length")
        return "answered", ok, f"{status} {body[:200]!r}"

    def run(self, requests, clients):
        counts, failures = {}, []
        with concurrent.futures.ThreadPoolExecutor(max_workers=clients) as pool:
            for index, (kind, ok, detail) in enumerate(pool.map(self.one, range(requests))):
                counts[kind] = counts.get(kind, 0) + (1 if ok else 0)
                if not ok:
                    failures.append(f"request {index} ({kind}): {detail}")
        return counts, failures

    def wait_idle(self, settle_seconds=1.0):
        """Until a one-token request is answered quickly: cancelled sequences have left their slots."""
        deadline = time.time() + 120
        while time.time() < deadline:
            path, request = self.body(1)
            request["max_tokens"] = 1
            started = time.time()
            if self.post(path, request)[0] == 200 and time.time() - started < 5:
                time.sleep(settle_seconds)
                return
        raise RuntimeError("the server did not become idle within 120 s")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api_key", default="")
    parser.add_argument("--pid", type=int, help="the server's process id, to read its memory")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=100, help="requests before the memory baseline")
    parser.add_argument("--max_tokens", type=int, default=8)
    args = parser.parse_args()
    load = Load(args.url, args.model, args.api_key, args.max_tokens)
    load.run(args.warmup, args.clients)
    load.wait_idle()
    baseline = rss_bytes(args.pid) if args.pid else None
    started = time.time()
    counts, failures = load.run(args.requests, args.clients)
    seconds = time.time() - started
    load.wait_idle()
    after = rss_bytes(args.pid) if args.pid else None
    expected = {"malformed": 0, "cancelled": 0, "streamed": 0, "answered": 0}
    for index in range(args.requests):
        kind = index % 10
        expected[{0: "malformed", 1: "cancelled", 2: "streamed", 3: "streamed"}.get(kind, "answered")] += 1
    record = {"requests": args.requests, "clients": args.clients, "seconds": round(seconds, 2), "as_expected": counts,
              "expected": expected, "rss_baseline_bytes": baseline, "rss_after_bytes": after,
              "failures": failures[:10]}
    print(json.dumps(record))
    return 0 if counts == expected and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
