"""Token-id parity of `surogate tokenizer encode/decode` with HF `tokenizers` on the three real
tokenizers of tests/fixtures/tokenizers (Qwen3, Llama 3, Llama 2), over a corpus built here: many
scripts, emoji sequences, code, whitespace runs, numbers, special tokens and look-alikes, invalid
UTF-8, random Unicode.

Invalid UTF-8 contract: raw bytes given to Surogate equal HF on bytes.decode("utf-8", "replace").
"""
import json
import random
import subprocess

import pytest
from tokenizers import Tokenizer

TOKENIZERS = ["qwen3", "llama3", "llama2"]

FIXED_TEXTS = [
    "",
    " ",
    "Hello world",
    "Hello, world! How's it going? I'm fine, you'll see they've done it, we'd agree.",
    "HELLO'S WORLD'LL DON'T I'VE",
    "The quick brown fox jumps over the lazy dog.\n\nSecond paragraph.",
    "中文分词测试：我们今天去北京天安门广场，看升旗仪式。",
    "日本語のテキスト、カタカナとひらがな、そして漢字。東京都",
    "العربية هي لغة سامية، يتحدث بها أكثر من 400 مليون شخص.",
    "हिन्दी भारत की राजभाषा है। नमस्ते दुनिया",
    "한국어 문장도 넣어 봅시다. Ελληνικά κείμενα. Русский текст с ёлкой.",
    "Emoji: 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷 ❤️ 🧑🏿‍💻 👩🏻‍❤️‍💋‍👨🏼",
    "def f(x):\n    return x ** 2  # square\n\nprint(f(3))\n",
    "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "fn main() { let v: Vec<u32> = (0..10).map(|i| i * i).collect(); println!(\"{:?}\", v); }",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "const x = async () => { await fetch('/api?q=1&r=2'); };",
    "<html><body><div class=\"a\">Text &amp; more</div></body></html>",
    "a" + " " * 17 + "b",
    "   leading and trailing spaces   ",
    "\t\ttabs\tand\n\nnewlines\r\n\r\nmixed \n \t \n",
    "\n\n\n\n",
    " \n",
    "1234567890 3.14159265358979 -42 1e-10 0x1F 1,000,000 12345678901234567890123",
    "Phone: +1 (555) 123-4567, year 2024, ٠١٢٣٤٥٦٧٨٩ and ১২৩",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<s>[INST] Hello [/INST] Hi </s>",
    "<|im_start <|im_end| <|endoftext |> <s > </ s> <unk > <|begin_of_text>",
    "text<|endoftext|>more text<|endoftext|><|endoftext|>",
    "a<s>b</s>c<unk>d",
    "<think>\nreasoning\n</think>\n\nanswer",
    "Ｆｕｌｌｗｉｄｔｈ ｃｈａｒｓ and ﬁ ligature and Å vs Å (NFC) e\u0301 vs é",
    "Zero\u200bwidth\u200cjoiner\u200dtest \ufeffBOM",
    "\u00a0non-breaking\u00a0space \u2003em space \u3000ideographic space \u180emongolian",
    "Kelvin \u212a and long s \u017f in caseless 'S 'ſ 'K",
    "Mixed: English中文日本語العربيةहिन्दी😀 all together",
    "...!!!???---___***///\\\\|||",
    "@user #hashtag https://example.com/path?x=1#frag mail@example.org",
    "x" * 3000,
    "ab " * 500,
    "🎉" * 50,
    "\u0000\u0001\u0002 control \u007f chars",
    "ﷺ ﷽ 𝕳𝖊𝖑𝖑𝖔 𝟘𝟙𝟚",
]

INVALID_UTF8 = [
    b"abc\xffdef",
    b"\xe2\x82 truncated euro",
    b"\xed\xa0\x80 surrogate",
    b"\xc0\xaf overlong",
    b"\xf4\x90\x80\x80 too big",
    b"ok \xe4\xb8 \xe4\xb8\xad\xe6",
    b"\x80\x80\x80",
    b"<|im_start|>\xfe<|im_end|>",
]


def random_unicode(rng, length):
    """Random code points from a mix of ranges (no surrogates: a str with them is not UTF-8)."""
    ranges = [(0x20, 0x7E), (0x09, 0x0D), (0xA0, 0x2FF), (0x370, 0x52F), (0x590, 0x6FF), (0x900, 0x97F),
              (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x1F300, 0x1FAFF), (0x2000, 0x206F),
              (0xE000, 0xF8FF), (0x10000, 0x10FFFF)]
    chars = []
    for _ in range(length):
        low, high = rng.choice(ranges)
        code = rng.randint(low, high)
        if 0xD800 <= code <= 0xDFFF:
            code = 0x41
        chars.append(chr(code))
    return "".join(chars)


def build_corpus():
    rng = random.Random(20261122)
    texts = list(FIXED_TEXTS)
    words = [t for line in FIXED_TEXTS for t in line.split(" ") if t]
    for _ in range(300):
        texts.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 40))))
    for _ in range(300):
        texts.append(random_unicode(rng, rng.randint(1, 80)))
    for _ in range(100):
        pieces = [rng.choice(words), rng.choice(["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>",
                                                 "<|begin_of_text|>", "<|eot_id|>", " ", "\n", "  \t"]),
                  random_unicode(rng, rng.randint(0, 10))]
        rng.shuffle(pieces)
        texts.append("".join(pieces))
    return texts


def run_cli(binary, args, payload: bytes) -> list:
    result = subprocess.run([str(binary), "tokenizer", *args], input=payload, capture_output=True, check=False)
    assert result.returncode == 0, result.stderr.decode("utf-8", "replace")
    # Split on "\n" only: str.splitlines() would also cut at U+2028 and friends inside the JSON.
    return [json.loads(line) for line in result.stdout.decode("utf-8").split("\n") if line]


def text_line(text: str) -> bytes:
    return (json.dumps({"text": text}, ensure_ascii=False) + "\n").encode("utf-8")


def raw_text_line(raw: bytes) -> bytes:
    # JSON-escape the valid parts; invalid bytes go through untouched (the CLI replaces them).
    escaped = json.dumps({"text": raw.decode("latin-1")}, ensure_ascii=True)
    body = escaped[len('{"text": "'):-2]
    out = bytearray(b'{"text": "')
    i = 0
    while i < len(body):
        if body.startswith("\\u00", i) and int(body[i + 4:i + 6], 16) >= 0x80:
            out.append(int(body[i + 4:i + 6], 16))
            i += 6
        else:
            out.extend(body[i].encode("ascii"))
            i += 1
    return bytes(out) + b'"}\n'


def first_mismatches(texts, ours, theirs, limit=5):
    bad = [(t, o, e) for t, o, e in zip(texts, ours, theirs) if o != e]
    return [f"{t!r}\n  ours: {o}\n  hf:   {e}" for t, o, e in bad[:limit]], len(bad)


@pytest.fixture(scope="module")
def corpus():
    return build_corpus()


@pytest.mark.parametrize("name", TOKENIZERS)
@pytest.mark.parametrize("add_special_tokens", [False, True])
def test_encode_matches_hf(surogate_bin, tokenizers_dir, corpus, name, add_special_tokens):
    folder = tokenizers_dir / name
    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    expected = [e.ids for e in hf.encode_batch(corpus, add_special_tokens=add_special_tokens)]
    args = ["encode", "--tokenizer", folder] + (["--add-special-tokens"] if add_special_tokens else [])
    ours = [row["ids"] for row in run_cli(surogate_bin, args, b"".join(text_line(t) for t in corpus))]
    assert len(ours) == len(corpus)
    shown, count = first_mismatches(corpus, ours, expected)
    assert count == 0, f"{count} of {len(corpus)} texts differ:\n" + "\n".join(shown)


@pytest.mark.parametrize("name", TOKENIZERS)
def test_invalid_utf8_is_replaced_like_python(surogate_bin, tokenizers_dir, name):
    folder = tokenizers_dir / name
    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    decoded = [raw.decode("utf-8", "replace") for raw in INVALID_UTF8]
    expected = [e.ids for e in hf.encode_batch(decoded, add_special_tokens=False)]
    payload = b"".join(raw_text_line(raw) for raw in INVALID_UTF8)
    ours = [row["ids"] for row in run_cli(surogate_bin, ["encode", "--tokenizer", folder], payload)]
    shown, count = first_mismatches(decoded, ours, expected)
    assert count == 0, "\n".join(shown)


@pytest.mark.parametrize("name", TOKENIZERS)
@pytest.mark.parametrize("skip_special_tokens", [False, True])
def test_decode_matches_hf(surogate_bin, tokenizers_dir, corpus, name, skip_special_tokens):
    folder = tokenizers_dir / name
    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    id_lists = [e.ids for e in hf.encode_batch(corpus, add_special_tokens=True)]
    rng = random.Random(7)
    vocab = hf.get_vocab_size(with_added_tokens=True)
    id_lists += [[rng.randrange(vocab) for _ in range(rng.randint(0, 30))] for _ in range(200)]
    expected = [hf.decode(ids, skip_special_tokens=skip_special_tokens) for ids in id_lists]
    args = ["decode", "--tokenizer", folder] + (["--skip-special-tokens"] if skip_special_tokens else [])
    payload = b"".join((json.dumps({"ids": ids}) + "\n").encode() for ids in id_lists)
    ours = [row["text"] for row in run_cli(surogate_bin, args, payload)]
    shown, count = first_mismatches(id_lists, ours, expected)
    assert count == 0, f"{count} of {len(id_lists)} decodes differ:\n" + "\n".join(shown)


@pytest.mark.parametrize("name", TOKENIZERS)
def test_round_trip_recovers_text(surogate_bin, tokenizers_dir, corpus, name):
    """decode(encode(text)) equals HF's round trip of the same text."""
    folder = tokenizers_dir / name
    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    ours_ids = [row["ids"] for row in run_cli(surogate_bin, ["encode", "--tokenizer", folder],
                                              b"".join(text_line(t) for t in corpus))]
    payload = b"".join((json.dumps({"ids": ids}) + "\n").encode() for ids in ours_ids)
    ours = [row["text"] for row in run_cli(surogate_bin, ["decode", "--tokenizer", folder], payload)]
    expected = [hf.decode(hf.encode(t, add_special_tokens=False).ids, skip_special_tokens=False) for t in corpus]
    shown, count = first_mismatches(corpus, ours, expected)
    assert count == 0, "\n".join(shown)
