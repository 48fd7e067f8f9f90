#!/usr/bin/env python3
"""Tokenizer throughput: Surogate (`surogate tokenizer encode`, batch API on all cores) against HF
`tokenizers` (`encode_batch`, all cores) on the same generated multilingual corpus, for the three
test tokenizers (tests/fixtures/tokenizers, unpacked by the build into
build/tests/fixtures/tokenizers). Prints MB/s for each and the ratio, checks that the ids agree,
and can write the results table as Markdown.

    python3 bench/tokenizer/bench_tokenizer.py --binary build/surogate [--megabytes 16] [--output FILE.md]
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import random
import re
import subprocess
import time

import tokenizers
from tokenizers import Tokenizer

REPO = pathlib.Path(__file__).resolve().parents[2]
TOKENIZERS = REPO / "build" / "tests" / "fixtures" / "tokenizers"  # unpacked by the build
NAMES = ["qwen3", "llama3", "llama2"]

ENGLISH = ("the of and to in a is that for it as was with be by on not he this are or his from at which but "
           "have an they you were her she there been one all we their has would when if so no will more can "
           "training model tokenizer gradient memory throughput language dataset evaluation").split()
CHINESE = list("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处理府研质")
JAPANESE = ["東京", "です", "ます", "ありがとう", "カタカナ", "ひらがな", "日本語", "学校", "先生", "コンピュータ"]
ARABIC = "في من على إلى أن هذا التي كان عن مع هذه كل بين بعد اللغة العربية الكتاب".split()
HINDI = "है के में की और से को का एक यह पर भी नहीं हिन्दी भारत".split()
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "❤️", "🎉", "🚀"]
CODE = [
    "def {w}(x, y):\n    return x * {n} + y\n",
    "for (int i = 0; i < {n}; ++i) {{\n\tsum += values[i];\n}}\n",
    "const {w} = await fetch(`/api/{w}?id={n}`);\n",
    "SELECT {w}, COUNT(*) FROM t WHERE id > {n} GROUP BY {w};\n",
]


def make_document(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.45:
        words = [rng.choice(ENGLISH) for _ in range(rng.randint(50, 400))]
        for i in range(0, len(words), rng.randint(8, 20)):
            words[i] = words[i].capitalize() + rng.choice([",", ".", "", "", "'s"])
        return " ".join(words) + "\n\n" + str(rng.randint(0, 10**9))
    if kind < 0.6:
        return "".join(rng.choice(CHINESE) for _ in range(rng.randint(100, 600))) + "。"
    if kind < 0.7:
        return "、".join(rng.choice(JAPANESE) for _ in range(rng.randint(30, 150)))
    if kind < 0.77:
        return " ".join(rng.choice(ARABIC) for _ in range(rng.randint(30, 200)))
    if kind < 0.83:
        return " ".join(rng.choice(HINDI) for _ in range(rng.randint(30, 200)))
    if kind < 0.95:
        return "".join(rng.choice(CODE).format(w=rng.choice(ENGLISH), n=rng.randint(0, 9999))
                       for _ in range(rng.randint(5, 40)))
    return " ".join(rng.choice(ENGLISH + EMOJI) for _ in range(rng.randint(20, 100)))


def make_corpus(megabytes: float, seed: int = 1234) -> list:
    rng = random.Random(seed)
    texts, size = [], 0
    while size < megabytes * 1e6:
        text = make_document(rng)
        texts.append(text)
        size += len(text.encode("utf-8"))
    return texts


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def bench_hf(folder, texts, repeats):
    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    hf.encode_batch(texts[:64], add_special_tokens=False)  # start the thread pool
    best, ids = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        encodings = hf.encode_batch(texts, add_special_tokens=False)
        best = min(best, time.perf_counter() - start)
        ids = [e.ids for e in encodings]
    return best, ids


def bench_ours(binary, folder, payload, repeats):
    best_api, best_wall, ids = float("inf"), float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = subprocess.run([str(binary), "tokenizer", "encode", "--tokenizer", str(folder), "--stats"],
                                input=payload, capture_output=True, check=True)
        best_wall = min(best_wall, time.perf_counter() - start)
        seconds = float(re.search(r"tokens in ([0-9.]+) s", result.stderr.decode()).group(1))
        best_api = min(best_api, seconds)
        ids = [json.loads(line)["ids"] for line in result.stdout.decode().split("\n") if line]
    return best_api, best_wall, ids


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=str(REPO / "build" / "surogate"))
    parser.add_argument("--tokenizers", default=str(TOKENIZERS), help="folder with qwen3/ llama3/ llama2/")
    parser.add_argument("--megabytes", type=float, default=16.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", help="write the results as a Markdown file")
    args = parser.parse_args()

    texts = make_corpus(args.megabytes)
    total_bytes = sum(len(t.encode("utf-8")) for t in texts)
    payload = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts).encode("utf-8")
    megabytes = total_bytes / 1e6
    rows = []
    print(f"corpus: {len(texts)} documents, {megabytes:.1f} MB; cpu: {cpu_model()}, {os.cpu_count()} cores")
    print(f"{'tokenizer':<10} {'HF MB/s':>9} {'ours MB/s':>10} {'ratio':>7} {'ours CLI MB/s':>14} {'ids equal':>10}")
    for name in NAMES:
        folder = pathlib.Path(args.tokenizers) / name
        hf_seconds, hf_ids = bench_hf(folder, texts, args.repeats)
        api_seconds, wall_seconds, our_ids = bench_ours(args.binary, folder, payload, args.repeats)
        row = dict(name=name, hf=megabytes / hf_seconds, ours=megabytes / api_seconds,
                   cli=megabytes / wall_seconds, equal=hf_ids == our_ids)
        row["ratio"] = row["ours"] / row["hf"]
        rows.append(row)
        print(f"{name:<10} {row['hf']:>9.2f} {row['ours']:>10.2f} {row['ratio']:>6.2f}x {row['cli']:>14.2f} "
              f"{str(row['equal']):>10}")

    if args.output:
        lines = [
            f"# CPU tokenizer throughput ({datetime.date.today().isoformat()})",
            "",
            f"- CPU: {cpu_model()}, {os.cpu_count()} logical cores (both tokenizers use all of them)",
            f"- HF `tokenizers` {tokenizers.__version__} (`encode_batch`), Python {platform.python_version()}",
            f"- Surogate: `surogate tokenizer encode --stats` (`Tokenizer::encode_batch`)",
            f"- corpus: {len(texts)} generated documents, {megabytes:.1f} MB (English, Chinese, Japanese, Arabic, "
            "Hindi, code, emoji; seed 1234), `add_special_tokens=False`, best of "
            f"{args.repeats} runs",
            f"- command: `python3 bench/tokenizer/bench_tokenizer.py --megabytes {args.megabytes:g} --output ...`",
            "",
            "| tokenizer | HF MB/s | Surogate MB/s | Surogate / HF | Surogate CLI end-to-end MB/s | ids identical |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for row in rows:
            lines.append(f"| {row['name']} | {row['hf']:.2f} | {row['ours']:.2f} | {row['ratio']:.2f}x | "
                         f"{row['cli']:.2f} | {'yes' if row['equal'] else 'NO'} |")
        lines += ["", "\"Surogate MB/s\" times `encode_batch` only; the CLI column adds process start, "
                  "tokenizer.json loading and JSON lines parsing / printing."]
        pathlib.Path(args.output).write_text("\n".join(lines) + "\n")
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
