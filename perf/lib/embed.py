#!/usr/bin/python3
"""perf/lib/embed.py: what the embed scenario needs besides the servers.

  embed.py model DIR        write the MiniLM-shaped random model into DIR once
                            (apps/embed/make_model.py, fixed seed) and copy
                            tokenizer.json beside it; a stamp skips the work
                            when DIR already holds this version
  embed.py pool DIR OUT     OUT: 200 request bodies {"text": ...}, one a line,
                            real-looking English sentences of 20-40 tokens
                            ([CLS] and [SEP] counted), made deterministically
  embed.py check URL --out FILE [--ref FILE] [--tol 1e-4]
                            POST /embed a few sentences; check status, shape
                            (384 floats, unit length); write the vectors to
                            FILE; with --ref (coring's), the largest
                            difference from it must be within --tol

Standard library only (the tokenizer is perf/peers/fastapi-torch/bert.py's,
imported without torch).
"""

import argparse
import hashlib
import http.client
import json
import math
import os
import random
import shutil
import subprocess
import sys
import urllib.parse

PERF_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_DIR = os.path.dirname(PERF_DIR)
MAKE_MODEL = os.path.join(REPO_DIR, "apps", "embed", "make_model.py")
MINILM_DATA = os.path.join(REPO_DIR, "tests", "data", "minilm")
sys.path.insert(0, os.path.join(PERF_DIR, "peers", "fastapi-torch"))
from bert import Tokenizer  # noqa: E402

POOL_SIZE, MIN_TOKENS, MAX_TOKENS, SEED = 200, 20, 40, 20240601

# Checked on every server before it is measured: two of the pool's shape and
# a few that exercise the tokenizer (accents, punctuation, numbers, case).
CHECK_TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "A man is playing a guitar on the street while the children dance.",
    "Mr. O'Neil paid $3.50 for a coffee at 9:30 a.m. and left a tip.",
    "Café au lait, naïve façade, jalapeño, résumé — ÉCOLE NORMALE SUPÉRIEURE.",
    "hello world",
]


def cmd_model(a):
    stamp_want = hashlib.sha256(open(MAKE_MODEL, "rb").read()).hexdigest()
    stamp = os.path.join(a.dir, ".stamp")
    if os.path.exists(stamp) and open(stamp).read().strip() == stamp_want:
        print(f"model: {a.dir} is current")
        return
    shutil.rmtree(a.dir, ignore_errors=True)
    subprocess.run(["/usr/bin/python3", MAKE_MODEL, "--out", a.dir], check=True)
    tj = os.path.join(MINILM_DATA, "tokenizer.json")
    if os.path.exists(tj):
        shutil.copyfile(tj, os.path.join(a.dir, "tokenizer.json"))
    with open(stamp, "w") as f:
        f.write(stamp_want + "\n")
    print(f"model: wrote {a.dir}")


# Sentence parts: subject, verb phrase, object, place, time, and a clause.
SUBJECTS = ["The committee", "A young engineer", "My neighbour", "The old fisherman", "Our team",
            "The city council", "A small bakery", "The museum's curator", "Every student",
            "The research group", "A retired teacher", "The night nurse", "Her brother",
            "The local library", "A travelling musician", "The new manager", "Two hikers",
            "The airline", "Most farmers", "The orchestra"]
VERBS = ["reviewed", "repaired", "described", "planned", "painted", "ordered", "cancelled",
         "photographed", "discussed", "delivered", "measured", "rebuilt", "recommended",
         "explained", "organised", "tested", "borrowed", "translated", "collected", "finished"]
OBJECTS = ["the annual budget report", "a wooden bridge over the river", "the broken heating system",
           "a long letter to the editor", "the spring festival", "three crates of fresh apples",
           "the evening train to the coast", "an exhibition of early photographs",
           "the results of the survey", "a map of the northern valleys", "the kitchen cabinets",
           "a new recipe for rye bread", "the noisy printer", "the plans for a community garden",
           "several rare books", "the water samples", "a short documentary", "the football pitch",
           "the old clock tower", "a detailed weather forecast"]
PLACES = ["in the town hall", "near the harbour", "at the back of the shop", "on the third floor",
          "behind the railway station", "in a quiet village", "at the university", "by the lake",
          "in the crowded market", "outside the hospital"]
TIMES = ["last Tuesday", "early this morning", "before the storm arrived", "during the summer holidays",
         "after a long meeting", "over the weekend", "late in the afternoon", "at the end of March",
         "two years ago", "while it was still dark"]
CLAUSES = ["because the deadline had been moved forward", "although nobody had asked them to",
           "so that visitors could enjoy it again", "while the rest of the staff were away",
           "since the old one had stopped working", "even though the weather was terrible",
           "which surprised almost everyone in the room", "and then wrote a detailed summary",
           "so the children would have somewhere to play", "before anyone else could complain"]


LEADS = ["According to the morning paper,", "As everyone expected,", "For the first time in years,",
         "Despite the rising costs,", "On the advice of a friend,", "Without much fuss,"]


def sentence(rng):
    subject = rng.choice(SUBJECTS)
    parts = [rng.choice(LEADS), subject[0].lower() + subject[1:]] if rng.random() < 0.5 else [subject]
    parts += [rng.choice(VERBS), rng.choice(OBJECTS)]
    if rng.random() < 0.7:
        parts.append(rng.choice(PLACES))
    if rng.random() < 0.7:
        parts.append(rng.choice(TIMES))
    if rng.random() < 0.6:
        parts.append(rng.choice(CLAUSES))
    if rng.random() < 0.5:
        parts += ["and later", rng.choice(VERBS), rng.choice(OBJECTS)]
    return " ".join(parts) + "."


def cmd_pool(a):
    tok = Tokenizer(os.path.join(a.dir, "vocab.txt"))
    rng = random.Random(SEED)
    seen, out = set(), []
    while len(out) < POOL_SIZE:
        s = sentence(rng)
        n = len(tok.encode(s))
        if s in seen or not MIN_TOKENS <= n <= MAX_TOKENS:
            continue
        seen.add(s)
        out.append((s, n))
    with open(a.out, "w") as f:
        for s, _ in out:
            f.write(json.dumps({"text": s}) + "\n")
    counts = [n for _, n in out]
    print(f"pool: {len(out)} sentences, {min(counts)}-{max(counts)} tokens "
          f"(mean {sum(counts) / len(counts):.1f}, [CLS]/[SEP] counted)")


def post(url, body):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        c.request("POST", u.path or "/embed", body=json.dumps(body).encode(),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def fail(msg):
    print("FAIL " + msg)
    sys.exit(1)


def cmd_check(a):
    vectors = []
    for text in CHECK_TEXTS:
        status, body = post(a.url, {"text": text})
        if status != 200:
            fail(f"POST /embed {text[:30]!r} -> {status} {body[:200]!r}")
        try:
            v = json.loads(body)["embedding"]
        except (ValueError, KeyError, TypeError):
            fail(f"POST /embed: not {{\"embedding\": [...]}}: {body[:200]!r}")
        if len(v) != 384 or not all(isinstance(x, (int, float)) for x in v):
            fail(f"POST /embed: {len(v)} values, want 384 numbers")
        norm = math.sqrt(sum(x * x for x in v))
        if abs(norm - 1) > 1e-3:
            fail(f"POST /embed: norm {norm:.6f}, want 1")
        vectors.append(v)
    with open(a.out, "w") as f:
        json.dump(vectors, f)
    print(f"ok POST /embed -> 200 {{\"embedding\": [384 floats]}}, unit length, {len(CHECK_TEXTS)} texts")
    if a.ref:
        if not os.path.exists(a.ref):
            print("ok vectors not compared: coring's are not in this case")
            return
        with open(a.ref) as f:
            ref = json.load(f)
        worst = max(abs(x - y) for v, r in zip(vectors, ref) for x, y in zip(v, r))
        if worst > a.tol:
            fail(f"vectors differ from coring's by up to {worst:.2e} (> {a.tol:g})")
        print(f"ok vectors agree with coring's: max |difference| {worst:.2e} <= {a.tol:g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("model")
    s.add_argument("dir")
    s = sub.add_parser("pool")
    s.add_argument("dir")
    s.add_argument("out")
    s = sub.add_parser("check")
    s.add_argument("url")
    s.add_argument("--out", required=True)
    s.add_argument("--ref")
    s.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    {"model": cmd_model, "pool": cmd_pool, "check": cmd_check}[a.cmd](a)


if __name__ == "__main__":
    main()
