#!/usr/bin/env python3
"""Writes a tool-calling conversation dataset (JSONL, OpenAI layout) for throughput runs of the
loss_scale / agent_template paths: each row has the `tools` list (three functions), a user
question, an assistant turn with one or two tool calls, their tool responses and an answer of
pseudo-English sentences (deterministic; written for this repository). Answers of MIN_WORDS to
MAX_WORDS words keep the documents short beside a 2048-token row so that packing fills rows.

  python3 bench/cli/make_tool_data.py OUTPUT.jsonl [ROWS] [MIN_WORDS] [MAX_WORDS]
"""
import json
import random
import sys

WORDS = ("the of and to in is was for on that with as by at from it an were which are this be or has "
         "had first one their new after who they have two been other when there all during into time "
         "may years more most only over city some world would where later such used many can state "
         "about out known then made year river between through under house became part three each "
         "system both well around people same long team number series station north south east west "
         "music water energy model training language data learning network computer science history").split()

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather of a city",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string", "description": "City name"},
                                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                                          "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "description": "Search the web",
                                      "parameters": {"type": "object", "properties": {
                                          "query": {"type": "string"}, "limit": {"type": "integer"}},
                                          "required": ["query"]}}},
    {"type": "function", "function": {"name": "convert", "description": "Convert an amount between currencies",
                                      "parameters": {"type": "object", "properties": {
                                          "amount": {"type": "number"}, "from": {"type": "string"},
                                          "to": {"type": "string"}}, "required": ["amount", "from", "to"]}}},
]
CITIES = ["Paris", "Oslo", "Lima", "Cairo", "Tokyo", "Quito", "Accra", "Perth", "Hanoi", "Bern"]


def sentences(rng, words):
    out, count = [], 0
    while count < words:
        length = rng.randint(6, 20)
        sentence = " ".join(rng.choice(WORDS) for _ in range(length))
        out.append(sentence[0].upper() + sentence[1:] + ".")
        count += length
    return " ".join(out)


def call(rng):
    kind = rng.randrange(3)
    if kind == 0:
        return "get_weather", {"city": rng.choice(CITIES), "unit": rng.choice(["celsius", "fahrenheit"])}, \
            json.dumps({"temperature": rng.randint(-20, 40)})
    if kind == 1:
        return "search", {"query": sentences(rng, 4)[:40], "limit": rng.randint(1, 10)}, \
            json.dumps({"results": [sentences(rng, 12) for _ in range(2)]})
    return "convert", {"amount": rng.randint(1, 999), "from": "EUR", "to": "USD"}, \
        json.dumps({"amount": round(rng.uniform(1, 1000), 2)})


def main() -> None:
    out = sys.argv[1]
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    min_words = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    max_words = int(sys.argv[4]) if len(sys.argv) > 4 else 300
    rng = random.Random(0)
    with open(out, "w") as file:
        for _ in range(rows):
            calls = [call(rng) for _ in range(rng.randint(1, 2))]
            messages = [{"role": "user", "content": sentences(rng, rng.randint(8, 30)) + "?"},
                        {"role": "assistant", "content": "",
                         "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}
                                        for name, arguments, _ in calls]}]
            messages += [{"role": "tool", "content": result} for _, _, result in calls]
            messages.append({"role": "assistant", "content": sentences(rng, rng.randint(min_words, max_words))})
            file.write(json.dumps({"tools": TOOLS, "messages": messages}) + "\n")


if __name__ == "__main__":
    main()
