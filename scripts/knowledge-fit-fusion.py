#!/usr/bin/env python3
"""Fit the knowledge fusion's logistic weights (src/knowledge/rerank.rs) on
the candidates dumped by scripts/knowledge-eval.py --dump, and report how
the 0.3 cut does on another dump (validation):

    scripts/knowledge-fit-fusion.py FIT.jsonl [VALIDATE.jsonl ...]

Features per candidate, as Fusion::features computes them: cosine, word
coverage, gap = cosine - best cosine of the question, bm25_rel = bm25 /
best bm25 of the question. Plain Newton-Raphson with a small L2 penalty.
"""
import json, math, sys
from collections import defaultdict

def load(path):
    by_q = defaultdict(list)
    for l in open(path):
        r = json.loads(l); by_q[r['q']].append(r)
    rows = []
    for q, cs in by_q.items():
        best_cos = max(c['vector'] for c in cs); best_bm = max(c['bm25'] for c in cs)
        for c in cs:
            x = [1.0, c['vector'], c['coverage'] or 0.0, c['vector'] - best_cos,
                 c['bm25'] / best_bm if best_bm > 0 else 0.0]
            rows.append((q, x, 1.0 if c['relevant'] else 0.0))
    return rows

def fit(rows, l2=0.01, iters=50):
    k = len(rows[0][1]); w = [0.0] * k
    for _ in range(iters):
        g = [0.0] * k; H = [[0.0] * k for _ in range(k)]
        for _, x, y in rows:
            p = 1 / (1 + math.exp(-sum(a * b for a, b in zip(w, x))))
            for i in range(k):
                g[i] += (p - y) * x[i]
                for j in range(k):
                    H[i][j] += p * (1 - p) * x[i] * x[j]
        for i in range(1, k):
            g[i] += l2 * w[i]; H[i][i] += l2
        # solve H d = g (Gaussian elimination)
        A = [H[i][:] + [g[i]] for i in range(k)]
        for c in range(k):
            piv = max(range(c, k), key=lambda r: abs(A[r][c])); A[c], A[piv] = A[piv], A[c]
            for r in range(k):
                if r != c:
                    f = A[r][c] / A[c][c]
                    A[r] = [a - f * b for a, b in zip(A[r], A[c])]
        d = [A[i][k] / A[i][i] for i in range(k)]
        w = [a - b for a, b in zip(w, d)]
    return w

def report(name, rows, w, cut=0.3):
    by_q = defaultdict(list)
    for q, x, y in rows:
        by_q[q].append((1 / (1 + math.exp(-sum(a * b for a, b in zip(w, x)))), y))
    kept_rel = sum(1 for q in by_q for p, y in by_q[q] if y and p >= cut)
    rel = sum(1 for q in by_q for p, y in by_q[q] if y)
    kept_irr = sum(1 for q in by_q for p, y in by_q[q] if not y and p >= cut)
    irr = sum(1 for q in by_q for p, y in by_q[q] if not y)
    top1 = sum(1 for q in by_q if max(by_q[q])[1] == 1)
    qs_with = [q for q in by_q if any(y for _, y in by_q[q])]
    dropped = sum(1 for q in qs_with if not any(y and p >= cut for p, y in by_q[q]))
    # calibration: mean predicted vs observed in bins
    bins = defaultdict(lambda: [0, 0.0, 0])
    for q in by_q:
        for p, y in by_q[q]:
            b = min(int(p * 5), 4); bins[b][0] += 1; bins[b][1] += p; bins[b][2] += y
    cal = ', '.join(f"{b/5:.1f}-{(b+1)/5:.1f}: n={n} pred={s/n:.2f} obs={o/n:.2f}" for b, (n, s, o) in sorted(bins.items()))
    print(f"{name}: {len(by_q)} questions, top-1 relevant {top1}/{len(by_q)}, cut keeps {kept_rel}/{rel} relevant and {kept_irr}/{irr} irrelevant, answer cut in {dropped}/{len(qs_with)} questions")
    print(f"  calibration {cal}")

rows = load(sys.argv[1])
w = fit(rows)
print("weights bias, cosine, coverage, gap, bm25_rel =", [round(v, 2) for v in w])
report(sys.argv[1], rows, w)
for path in sys.argv[2:]:
    report(path, load(path), w)
