#!/usr/bin/env python3
"""REQUESTS concurrent streaming completions against a running `surogate serve` (issue 46's second
speed row): each a prompt of PROMPT random token ids and max_tokens NEW, greedy; measures the
output tokens/s over the wall time, time to first token and per-request latency (p50 / p99).

  python3 bench/serve_concurrent.py --url URL --model NAME [--requests 64 --prompt 512 --new 256]

Prints one JSON line.
"""
import argparse
import concurrent.futures
import http.client
import json
import random
import statistics
import time
import urllib.parse


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def one(url, model, prompt, new_tokens):
    """(seconds to the first event, seconds to the end, completion tokens) of one streamed request."""
    parsed = urllib.parse.urlparse(url)
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=600)
    body = {"model": model, "prompt": prompt, "max_tokens": new_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    started = time.perf_counter()
    connection.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    first, tokens, buffer = None, 0, b""
    while True:
        chunk = response.read1(65536)
        if not chunk:
            break
        if first is None:
            first = time.perf_counter() - started
        buffer += chunk
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            data = event.removeprefix(b"data: ")
            if data == b"[DONE]" or not data:
                continue
            usage = json.loads(data).get("usage")
            if usage:
                tokens = usage["completion_tokens"]
    connection.close()
    return first, time.perf_counter() - started, tokens


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--new", type=int, default=256)
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    rng = random.Random(0)
    prompts = [[rng.randint(1000, 99999) for _ in range(args.prompt)] for _ in range(args.requests)]
    one(args.url, args.model, prompts[0][:16], 4)  # warm-up: plans, CUDA graphs
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.requests) as pool:
        results = list(pool.map(lambda p: one(args.url, args.model, p, args.new), prompts))
    seconds = time.perf_counter() - started
    firsts = [r[0] for r in results]
    latencies = [r[1] for r in results]
    tokens = sum(r[2] for r in results)
    print(json.dumps({"engine": "surogate serve", "label": args.label, "requests": args.requests,
                      "prompt": args.prompt, "new": args.new, "output_tokens": tokens, "seconds": round(seconds, 2),
                      "output_tok_s": round(tokens / seconds, 1), "ttft_p50_s": round(statistics.median(firsts), 3),
                      "ttft_p99_s": round(percentile(firsts, 0.99), 3),
                      "latency_p50_s": round(statistics.median(latencies), 3),
                      "latency_p99_s": round(percentile(latencies, 0.99), 3)}), flush=True)


if __name__ == "__main__":
    main()
