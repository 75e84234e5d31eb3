#!/usr/bin/env python3
"""Two intent benchmarks unlike CLINC150's full protocol, cut from its
data_full.json, for checking that a scorer generalises (issue 16: "no worse
than softmax on other benchmarks"): a few-shot set (10 training
utterances per intent) and an imbalanced one (15, 25, 50 or 100 per
intent, drawn at random), both tested on the full in-scope test set with
no out-of-scope data. Writes JSON lists of [text, label] for
`earshot eval intents --train FILE --test FILE`.

Usage: scripts/clinc-proxy-splits.py data_full.json OUT_DIR [--seed 7]
"""
import argparse
import json
import os
import random

ap = argparse.ArgumentParser()
ap.add_argument("clinc")
ap.add_argument("out")
ap.add_argument("--seed", type=int, default=7)
a = ap.parse_args()
data = json.load(open(a.clinc))
rng = random.Random(a.seed)
by_label = {}
for text, label in data["train"]:
    by_label.setdefault(label, []).append(text)
few, imbalanced = [], []
for label, texts in by_label.items():
    rng.shuffle(texts)
    few += [[t, label] for t in texts[:10]]
    n = rng.choice([15, 25, 50, 100])
    imbalanced += [[t, label] for t in texts[:n]]
os.makedirs(a.out, exist_ok=True)
for name, rows in [("few10_train", few), ("imb_train", imbalanced), ("test", data["test"])]:
    with open(os.path.join(a.out, name + ".json"), "w") as f:
        json.dump(rows, f)
print(f"few10: {len(few)}, imbalanced: {len(imbalanced)}, test: {len(data['test'])}")
