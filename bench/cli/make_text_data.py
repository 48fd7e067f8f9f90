#!/usr/bin/env python3
"""Writes a plain-text JSONL dataset for throughput runs: documents of pseudo-English sentences
(a fixed vocabulary of common words, deterministic) of MIN_WORDS to MAX_WORDS words. The default,
50 to 600 words (about 60 to 700 tokens), is short beside a 2048-token row so that packing fills
rows almost completely (the trainer counts only real tokens in tokens/s).

  python3 bench/cli/make_text_data.py OUTPUT.jsonl [DOCUMENTS] [MIN_WORDS] [MAX_WORDS]
"""
import json
import random
import sys

WORDS = ("the of and to in is was for on that with as by at from his her it an were which are this "
         "be or has had first one their its new after who they have two been other when there all "
         "during into school time may years more most only over city some world would where later up "
         "such used many can state about national out known university united then made year "
         "government river between american through under house including became part three each "
         "system both well around people same long team league game number county series station "
         "march built village north south east west music film album water energy model training "
         "language data learning network computer science history church war army family member").split()


def main() -> None:
    out = sys.argv[1]
    documents = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    min_words = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    max_words = int(sys.argv[4]) if len(sys.argv) > 4 else 600
    rng = random.Random(0)
    with open(out, "w") as file:
        for _ in range(documents):
            sentences, count, words = [], 0, rng.randint(min_words, max_words)
            while count < words:
                length = rng.randint(6, 20)
                sentence = " ".join(rng.choice(WORDS) for _ in range(length))
                sentences.append(sentence[0].upper() + sentence[1:] + ".")
                count += length
            file.write(json.dumps({"text": " ".join(sentences)}) + "\n")


if __name__ == "__main__":
    main()
