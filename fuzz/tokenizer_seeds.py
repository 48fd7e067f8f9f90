"""Seeds of fuzz_tokenizer_json (fuzz/corpus/tokenizer_json/), used by make_seed_corpus.py.

seed-<model>-small: the repository's real tokenizers (tests/fixtures/tokenizers/*/tokenizer.tar.xz)
trimmed to a few kilobytes, consistently: a base of single characters (or <0xNN> byte tokens) that
the fuzz text uses, then the model's own merges in rank order whose two parts are already kept,
until the document would pass MAX_SEED_BYTES; ids are renumbered densely (vocabulary, then the
added tokens it keeps) and the post-processor's ids follow their tokens. Every other component
(normalizer, pre-tokenizer with its regex, decoder) is the model's own.
seed-<component>: small hand-written files that reach each component src/tokenizer/ supports.
bad-*: files the engine must reject with a UserError (tests/tokenizer/test_tokenizer_json_corpus.cpp);
those found by fuzzing are listed in docs/contributing.md.
"""
import io
import json
import tarfile

MAX_SEED_BYTES = 4096  # scripts/fuzz.sh runs with -max_len=4096
# Characters of the fuzz text (fuzz/tokenizer_json_case.h) the trimmed vocabularies start from.
BASE_TEXT = "HelloworldItsinthecafé, 2024!'\n\t"


def compact(document):
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def byte_level_alphabet():
    """GPT-2's byte -> character table (the ByteLevel pre-tokenizer's vocabulary spelling)."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(0x100 + extra)
            extra += 1
    return table


def is_byte_level(document):
    text = json.dumps(document.get("pre_tokenizer"))
    return '"ByteLevel"' in text


def base_tokens(document):
    vocab = document["model"]["vocab"]
    base = {t["content"] for t in document["added_tokens"] if t["content"] in vocab}
    if is_byte_level(document):
        alphabet = byte_level_alphabet()
        base |= {alphabet[b] for b in (" " + BASE_TEXT).encode()}
    else:
        base |= {"▁", document["model"].get("unk_token") or ""} | set(BASE_TEXT)
        base |= {f"<0x{b:02X}>" for b in "é👩\n\t".encode()}
    return {t for t in base if t in vocab}


def split_merge(merge):
    return merge.split(" ", 1) if isinstance(merge, str) else merge


def trimmed(document, merge_count, added_count):
    """`document` with the vocabulary of base_tokens plus the first `merge_count` usable merges."""
    model = document["model"]
    vocab = model["vocab"]
    kept = base_tokens(document)
    merges = []
    for merge in model["merges"]:
        if len(merges) >= merge_count:
            break
        left, right = split_merge(merge)
        prefix = model.get("continuing_subword_prefix") or ""
        joined = left + (right[len(prefix):] if prefix and right.startswith(prefix) else right)
        if left in kept and right in kept and joined in vocab:
            kept.add(joined)
            merges.append(merge)
    ids = {token: i for i, token in enumerate(sorted(kept, key=lambda t: vocab[t]))}
    added = []
    for token in document["added_tokens"][:added_count]:
        token = dict(token, id=ids.get(token["content"], len(ids) + len(added)))
        added.append(token)
    by_content = {t["content"]: t["id"] for t in added} | ids
    out = dict(document, added_tokens=added, model=dict(model, vocab=ids, merges=merges))
    out["post_processor"] = renumber_post_processor(document.get("post_processor"), by_content)
    return out


def renumber_post_processor(component, by_content):
    if not isinstance(component, dict):
        return component
    if component.get("type") == "Sequence":
        return dict(component, processors=[renumber_post_processor(p, by_content) for p in component["processors"]])
    if component.get("type") == "TemplateProcessing":
        special = {name: dict(entry, ids=[by_content[t] for t in entry["tokens"]])
                   for name, entry in component["special_tokens"].items()}
        return dict(component, special_tokens=special)
    return component


def small_real_tokenizer(archive, added_count):
    with tarfile.open(archive) as tar:
        document = json.load(io.TextIOWrapper(tar.extractfile("tokenizer.json"), encoding="utf-8"))
    best = None
    for merge_count in (400, 300, 200, 150, 100, 70, 50, 30, 20, 10, 0):
        text = compact(trimmed(document, merge_count, added_count))
        if len(text.encode()) <= MAX_SEED_BYTES:
            best = text
            break
    assert best is not None, archive
    return best


def bpe(vocab_tokens, merges, **options):
    return dict({"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False, "byte_fallback": False,
                 "vocab": {t: i for i, t in enumerate(vocab_tokens)}, "merges": merges}, **options)


def added(content, token_id, special=True, **flags):
    return dict({"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": not special, "special": special}, **flags)


def component_seeds():
    letters = list("abcdefghilnorstuw")
    seeds = {}
    # tests/tokenizer/fixtures.h byte_level_tokenizer(): byte-level BPE, no regex split of its own.
    seeds["seed-fixture-byte-level"] = {
        "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": bpe(["a", "b", "c", "Ġ", "ab", "abc", "Ġa", "Ċ"], ["a b", "ab c", "Ġ a"])}
    # SentencePiece shape through Metaspace (pre-tokenizer and decoder) with unk fusing and flags
    # on the added tokens.
    vocab = ["<unk>", "<s>", "</s>", "▁"] + letters + ["▁h", "▁he", "he", "ll", "llo", "▁w", "or"]
    seeds["seed-metaspace-unk"] = {
        "added_tokens": [added("<unk>", 0), added("<s>", 1), added("</s>", 2),
                         added("[INST]", 24, lstrip=True, rstrip=True),
                         added("world", 25, special=False, single_word=True)],
        "normalizer": {"type": "NFKC"},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]},
                                                          "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}},
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True},
        "model": bpe(vocab, [["▁", "h"], ["▁h", "e"], ["h", "e"], ["l", "l"], ["ll", "o"], ["▁", "w"], ["o", "r"]],
                     unk_token="<unk>", fuse_unk=True)}
    # WordPiece-like spelling through BPE: prefix / suffix, Bert post-processing, Unicode
    # normalizers and a regex Replace, Strip / Replace / Fuse decoders.
    vocab = ["[UNK]", "[CLS]", "[SEP]"] + letters + ["##" + c for c in letters] + ["e</w>", "##e</w>", "he", "##ll"]
    seeds["seed-subword-prefix-bert"] = {
        "added_tokens": [added("[UNK]", 0), added("[CLS]", 1), added("[SEP]", 2)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFD"}, {"type": "Replace", "pattern": {"Regex": "\\p{Mn}"}, "content": ""}, {"type": "NFC"}]},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "Removed", "invert": False},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1]},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"Regex": "\\s*##"}, "content": ""}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 1}]},
        "model": bpe(vocab, ["h e", "##l ##l"], unk_token="[UNK]", continuing_subword_prefix="##",
                     end_of_word_suffix="</w>")}
    # Every Split behaviour (and invert) before ByteLevel with its own regex and prefix space;
    # ignore_merges; Roberta post-processing and a Sequence of post-processors.
    alphabet = byte_level_alphabet()
    vocab = ["<pad>", "<mask>"] + sorted({alphabet[b] for b in b" abcdehlorstw,!'0123456789"}) + ["Ġw", "or", "Ġwor"]
    split = [{"type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior, "invert": invert}
             for pattern, behavior, invert in [("\\p{N}", "Isolated", False), (",", "MergedWithPrevious", False),
                                               ("!", "MergedWithNext", False), ("\\s+", "Contiguous", True),
                                               ("\\x{0}", "Removed", False)]]
    seeds["seed-split-behaviours-byte-level"] = {
        "added_tokens": [added("<pad>", 0), added("<mask>", 1, lstrip=True)],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": " "}, {"type": "NFKD"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": split + [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}]},
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "trim_offsets": True},
            {"type": "RobertaProcessing", "sep": ["<mask>", 1], "cls": ["<pad>", 0], "trim_offsets": True}]},
        "decoder": {"type": "Sequence", "decoders": [{"type": "ByteLevel"}]},
        "model": bpe(vocab, ["Ġ w", "o r", "Ġw or"], ignore_merges=True)}
    # Byte fallback without unk, SentencePiece decoders (tests/tokenizer/fixtures.h
    # sentencepiece_tokenizer() with fewer byte tokens).
    vocab = ["<unk>", "<s>", "</s>", "▁", "h", "i", "▁h", "▁hi"] + [f"<0x{b:02X}>" for b in b"\xc3\xa9\xf0\x9f\x91\xa9\n\t"]
    seeds["seed-byte-fallback"] = {
        "added_tokens": [added("<unk>", 0), added("<s>", 1), added("</s>", 2)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": bpe(vocab, [["▁", "h"], ["▁h", "i"]], byte_fallback=True)}
    return {name: compact(document) for name, document in seeds.items()}


def with_model(**components):
    """A document with a one-letter model and the given components (compact JSON)."""
    return compact(dict(components, model=bpe(list("ab"), [])))


def replace_step(content):
    return {"type": "Replace", "pattern": {"String": "a"}, "content": content}


# Rejected files (UserError naming the file). Those marked "review" are the problems found by
# reading src/tokenizer/ while writing the fuzz target (docs/contributing.md lists them with the
# fuzzer's own findings); each would crash, hang or exhaust memory without its check.
BAD = {
    "bad-not-json": '{"model": {"type": "BPE",',
    "bad-top-level-array": "[]",
    "bad-no-model": '{"normalizer": null}',
    "bad-unigram-model": '{"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}',
    "bad-merge-not-in-vocab": '{"model": {"vocab": {"a": 0, "b": 1}, "merges": ["a b"]}}',
    "bad-negative-id": '{"model": {"vocab": {"a": -1}, "merges": []}}',
    "bad-regex": '{"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated"},'
                 ' "model": {"vocab": {"a": 0}, "merges": []}}',
    "bad-invalid-utf8": b'{"model": {"vocab": {"\xff": 0}, "merges": []}}',
    # review: nlohmann reports a number beyond double as out_of_range, not parse_error, which
    # escaped Tokenizer::load as a std::exception.
    "bad-number-overflow": '{"model": {"vocab": {"a": 0}, "merges": [], "dropout": 1e999}}',
    # review: one stray id made the id table allocate 2^31 strings (64 GB).
    "bad-huge-vocab-id": '{"model": {"vocab": {"a": 0, "b": 2147483646}, "merges": []}}',
    # review: \C matches one byte, so a Split could end a piece inside a character and the BPE
    # then decoded a character across the piece's end (reading past the word).
    "bad-backslash-c-regex": with_model(pre_tokenizer={"type": "Split", "pattern": {"Regex": "\\C"},
                                                        "behavior": "Isolated"}),
    # review: 40 Replace steps each doubling every "a": 2^40 times the text.
    "bad-normalizer-replace-doubling": with_model(normalizer={"type": "Sequence", "normalizers": [replace_step("aa")] * 40}),
    # review: the same through the decoder's Replace steps, on every token.
    "bad-decoder-replace-doubling": with_model(decoder={"type": "Sequence", "decoders": [replace_step("aa")] * 40}),
    # review: a Split that makes every character a piece and a Metaspace that prefixes each
    # piece, repeated: the text doubles per round.
    "bad-metaspace-split-compounding": with_model(pre_tokenizer={"type": "Sequence", "pretokenizers": [
        step for replacement in "xy" * 12 for step in (
            {"type": "Split", "pattern": {"Regex": "."}, "behavior": "Isolated"},
            {"type": "Metaspace", "replacement": replacement, "prepend_scheme": "always", "split": False})]}),
    # review: HF's Metaspace replacement is one character (a Rust char); a longer one was taken,
    # and one containing spaces compounded over Metaspace steps.
    "bad-metaspace-replacement-two-characters": with_model(pre_tokenizer={"type": "Metaspace", "replacement": " x"}),
}


def tokenizer_json_seeds(repo):
    seeds = component_seeds()
    for name, added_count in (("qwen3", 6), ("llama3", 4), ("llama2", 3)):
        archive = repo / "tests" / "fixtures" / "tokenizers" / name / "tokenizer.tar.xz"
        seeds[f"seed-{name}-small"] = small_real_tokenizer(archive, added_count)
    return seeds
