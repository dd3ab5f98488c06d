"""A seeded generator of hostile scoring rows and malformed input files (for the fuzz test)."""

from __future__ import annotations

import csv
import io
import json
import random
import re
from pathlib import Path
from typing import Any, Optional

import numpy as np

SENTENCES = [
    "paris is the capital of france .", "the eiffel tower is in paris .", "i love to swim in the ocean .",
    "basketball is a team sport played by two teams .", "the moon orbits the earth every month .",
    "dogs were domesticated thousands of years ago .", "berlin has many museums and parks .",
    "the amazon is the largest rainforest .", "coffee comes from roasted beans .", "i think so too !",
]
KNOWLEDGE = [
    "Paris is the capital and most populous city of France.", "The Eiffel Tower is a tower in Paris.",
    "Basketball is a team sport in which two teams of five players play.", "The Moon is Earth's only satellite.",
    "The dog was domesticated from wolves.", "Berlin is the capital of Germany.",
]
ODD_TEXT = [
    "", " ", "\t\n  ", "\u200b", "\u200b\u200c\u200d\ufeff", "\x00", "\x00\x00\x00", "\x01\x02\x1f", "\u202e\u200f",
    "שלום עולם זה משפט", "مرحبا بالعالم", "東京は日本の首都です。", "我喜欢在海里游泳。", "😀🔥👍🏽 🇫🇷",
    "<b>paris</b> <script>x</script>",
    "&amp; &lt;tag&gt;", "1234567890", "3.14159", "NaN", "null", "a\x00b paris is nice", "paris\r\nis\rnice",
    "e\u0301\u0301\u0301 combining", "ｐａｒｉｓ　ｉｓ　ｆｕｌｌ　ｗｉｄｔｈ", "\\u0000 \\n literal escapes",
    "' OR 1=1; --",
    "lone \ud800 surrogate", "\udfff", "x" * 300, "paris " * 3,
]
LONG_RESPONSE = " ".join(SENTENCES * 40)  # far over the QG input limit
LONG_KNOWLEDGE = " ".join(KNOWLEDGE * 10)  # read in several windows


class Sub(str):
    """A ``str`` subclass with its own ``__str__`` (it must be scored as the text it holds)."""

    def __str__(self) -> str:
        return "not the text"


def _text(rng: random.Random, pool: list[str]) -> str:
    r = rng.random()
    if r < 0.55:
        return rng.choice(pool)
    if r < 0.96:
        return rng.choice(ODD_TEXT)
    return rng.choice(pool) + " " + rng.choice(ODD_TEXT)


def _value(rng: random.Random, pool: list[str], long: str, api: bool) -> Any:
    r = rng.random()
    if r < 0.6:
        return _text(rng, pool)
    if r < 0.62:
        return long
    choices: list[Any] = [None, 0, -7, 10**30, 2.5, float("nan"), float("inf"), True, [], ["a", "b"],
                          [rng.choice(pool), rng.choice(pool)], [1, "x"], {"text": rng.choice(pool)}, {}]
    if api:
        choices += [np.str_(rng.choice(pool)), Sub(rng.choice(pool)), b"bytes", np.int64(3), (rng.choice(pool),)]
    return rng.choice(choices)


ENORMOUS_WORDS, ENORMOUS_CHARS = 50_000, 200_000


def enormous_texts(seed: int) -> tuple[str, str]:
    """A response of 50,000 words and a knowledge text of 200,000 characters, made of the ordinary sentences (what
    scraped or generated text can hold)."""
    rng = random.Random(seed)
    words: list[str] = []
    while len(words) < ENORMOUS_WORDS:
        words += rng.choice(SENTENCES).split()
    knowledge, chars = [], -1
    while chars < ENORMOUS_CHARS:
        knowledge.append(rng.choice(KNOWLEDGE))
        chars += len(knowledge[-1]) + 1
    return " ".join(words[:ENORMOUS_WORDS]), " ".join(knowledge)[:ENORMOUS_CHARS]


def enormous_row(rng: random.Random, texts: tuple[str, str]) -> dict[str, Any]:
    """A row with an enormous response, an enormous knowledge text, or both."""
    kind = rng.randrange(3)
    return {"response": texts[0] if kind != 1 else rng.choice(SENTENCES),
            "knowledge": texts[1] if kind != 0 else rng.choice(KNOWLEDGE)}


def hostile_rows(n: int, seed: int = 0, *, api: bool = False, enormous: int = 0) -> list[dict[str, Any]]:
    """``n`` rows with ids ``r0 .. r{n-1}``: good, odd and wrong values, missing keys, extra keys, duplicates, and
    ``enormous`` rows at seeded places with a 50,000-word response and/or 200,000 characters of knowledge."""
    rng = random.Random(seed)
    big = set(random.Random(seed + 1).sample(range(n), enormous))
    texts = enormous_texts(seed) if enormous else ("", "")
    rows: list[dict[str, Any]] = []
    for i in range(n):
        if i in big:
            row = enormous_row(rng, texts)
        elif rows and rng.random() < 0.08:  # a duplicate of an earlier row
            row = dict(rng.choice(rows))
        else:
            row = {"response": _value(rng, SENTENCES, LONG_RESPONSE, api),
                   "knowledge": _value(rng, KNOWLEDGE, LONG_KNOWLEDGE, api)}
            r = rng.random()
            if r < 0.03:
                del row["response"]
            elif r < 0.06:
                del row["knowledge"]
            elif r < 0.08:
                row["extra"] = {"nested": [1, 2, {"x": None}]}
        row["id"] = f"r{i}"
        rows.append(row)
    return rows


# malformed JSONL lines, inserted between the records (each must become an error row naming its line)
BIG_ID = "1" + "2" * 5000
BAD_LINES = [(b"not json at all", None), (b"[1, 2, 3]", None), (b'"just a string"', None), (b"{" * 5000, None),
             (b"[" * 100_000, None), (b'{"id": ' + BIG_ID.encode() + b', "response": "x", "knowledge": "y"}', BIG_ID),
             (b'{"response": "caf\xe9"}', None), (b'{"response": "\xff\xfe", "knowledge": "k"}', None),
             (b'{"a": 1,}', None), (b"{\"response\": \"x\"", None), (b"\x00\x01", None),
             (b'{"response": "paris is nice .", "knowledge": "Paris.", "id": NaN}', "NaN")]


def write_jsonl(rows: list[dict[str, Any]], path: Path, seed: int = 0) -> list[Optional[str]]:
    """Write rows (a BOM first, CRLF and bare CR here and there) with malformed lines among them; returns the
    expected id of every record in file order (None for a malformed line)."""
    rng = random.Random(seed)
    expected: list[Optional[str]] = []
    with path.open("wb") as f:
        f.write(b"\xef\xbb\xbf")
        for row in rows:
            if rng.random() < 0.03:
                line, expected_id = rng.choice(BAD_LINES)
                f.write(line + b"\n")
                expected.append(expected_id)
            line = json.dumps(row, allow_nan=True).encode()  # ASCII: lone surrogates as \ud800 escapes
            if rng.random() < 0.05:
                line = line.replace(b", ", b",\r ", 1)  # a bare CR between tokens
            f.write(line + (b"\r\n" if rng.random() < 0.2 else b"\n"))
            expected.append(row["id"])
    return expected


def write_csv(rows: list[dict[str, Any]], path: Path, seed: int = 0) -> list[Optional[str]]:
    """Write rows as CSV (a BOM first; values as their ``str``, lone surrogates as the invalid bytes a broken
    encoder writes) with a few malformed records; returns the expected id of every record."""
    rng = random.Random(seed)
    buf = io.StringIO(newline="")
    writer = csv.writer(buf)
    writer.writerow(["id", "response", "knowledge", "extra"])
    expected: list[Optional[str]] = []
    for row in rows:
        if rng.random() < 0.01:
            writer.writerow(["bad", "a", "b", "c", "one field too many"])
            expected.append(None)
        writer.writerow([row["id"], *("" if row.get(k) is None else str(row[k]) for k in ("response", "knowledge")),
                         "x" * (200_000 if rng.random() < 0.005 else 1)])
        # a lone surrogate cannot be UTF-8: its record is unreadable
        expected.append(None if any("\ud800" <= c <= "\udfff" for v in row.values() for c in str(v)) else row["id"])
    path.write_bytes(b"\xef\xbb\xbf" + buf.getvalue().encode("utf-8", "surrogatepass"))
    return expected


# messages that say what is wrong (anything else, e.g. a bare exception from a component, is not clear)
CLEAR = re.compile("|".join([
    r"^(response|knowledge) is (empty|missing \(None\))$",
    r"^(response|knowledge)( item \d+)? must be a string, got \w+$",
    r"^(response|knowledge) is not valid Unicode: a lone surrogate .* at character \d+$",
    r"^no field\(s\) \[.*\]; this record's fields are \[.*\]$",
    r"^line \d+ (is not valid JSON: .*|is a JSON \w+, expected an object|is JSON nested too deeply to read"
    r"|is not valid UTF-8: byte 0x[0-9a-f]{2}( at byte offset \d+ of the file)?|has \d+ fields; the header names \d+"
    r"|has the key .* twice; which value is meant cannot be told)$",
    r"^candidate extraction failed: the response is [\d,]+ characters, over spaCy's limit of [\d,]+ "
    r"\(nlp\.max_length\)$",
    r"^question generation failed: (QG input is \d+ tokens|the response is \d+ tokens), over qg_max_input_tokens=\d+: "
    r"(the response is )?too long to generate questions from \(raise qg_max_input_tokens\)$",
    r"^(question answering on the (response|knowledge)|fallback NLI|NLI on answers) failed: the [\w ,()]+ is \d+ "
    r"tokens: no room left in the (qa|nli)_max_length=\d+ window$",
    r"^(response|knowledge) (is \d+ (characters|answer candidates)|has over \d+ valid questions), over the budget "
    r"max_(response_chars|knowledge_chars|candidates|questions)=\d+ \(raise max_[a-z_]+; 0 = no limit; "
    r"or set over_budget to truncate\)$",
]))
BUDGET_ERROR = re.compile(r"^(response|knowledge) is \d+ characters, over the budget max_(response|knowledge)_chars=")


def outcome(row: dict[str, Any]) -> str:
    """``scored`` (a score or no valid question), ``clear`` (an error that says what is wrong) or ``unclear``."""
    if row["status"] != "error":
        return "scored"
    return "clear" if isinstance(row["error"], str) and CLEAR.match(row["error"]) else "unclear"
