#!/usr/bin/env python3
"""Measure the knowledge search on labelled questions through the real CLI
(`earshot knowledge search "…" --json`), as the issue 19 asks: hit@1 and
hit@3 of the right document and passage, precision / recall / F1 after
the cut, the share of questions whose answering chunk was among the
candidates but cut, and latency.

    scripts/knowledge-eval.py STATE_DIR QUESTIONS.jsonl [--bin target/release/earshot]
        [--dump candidates.jsonl] [--json]

STATE_DIR holds the ingested corpus (earshot ingest CORPUS with
EARSHOT_STATE_DIR=STATE_DIR). A question is a JSON line {"q": question,
"doc": file name of the answering document, "answer": a phrase of the
answering passage}. A passage answers when its path ends with doc and its
text contains the phrase (case, white space and typographic dashes
ignored). --dump writes every candidate's features with its label (the
data the fusion is fitted on).
"""
import argparse, json, os, re, sqlite3, statistics, subprocess, sys, time

def norm(s):
    s = s.replace('\u2212', '-').replace('\u2010', '-').replace('\u2011', '-').replace('\u00ad', '')
    return re.sub(r'\s+', ' ', s).strip().lower()

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('state'); ap.add_argument('questions')
    ap.add_argument('--bin', default=os.path.join(os.path.dirname(__file__), '..', 'target', 'debug', 'earshot'))
    ap.add_argument('--dump'); ap.add_argument('--json', action='store_true')
    ap.add_argument('--verbose', '-v', action='store_true')
    ap.add_argument('--min-score', dest='min_score', type=float, default=0.3)
    a = ap.parse_args()
    env = dict(os.environ, EARSHOT_STATE_DIR=a.state, EARSHOT_LOG='warn')
    db = sqlite3.connect(os.path.join(a.state, 'earshot.db'))
    text_of = lambda cid: (db.execute('SELECT text FROM knowledge_chunks WHERE id=?', (cid,)).fetchone() or [''])[0]
    qs = [json.loads(l) for l in open(a.questions) if l.strip() and not l.startswith('#')]
    n = len(qs); h1 = h3 = d1 = d3 = dropped = capped = answered = 0
    returned = relevant_returned = 0
    ms, wall = [], []
    dump = open(a.dump, 'w') if a.dump else None
    for q in qs:
        t0 = time.time()
        out = subprocess.run([a.bin, 'knowledge', 'search', q['q'], '--json'], env=env,
                             capture_output=True, text=True)
        wall.append((time.time() - t0) * 1000)
        if out.returncode != 0:
            sys.exit(f"search failed for {q['q']!r}: {out.stderr.strip()}")
        r = json.loads(out.stdout)
        ms.append(r['total_ms'])
        ans = norm(q['answer'])
        right_doc = lambda p: os.path.basename(p['path']) == q['doc'] or p['path'].endswith('/' + q['doc'])
        ok = lambda p: right_doc(p) and ans in norm(p['text'])
        ps = r['passages']
        h1 += bool(ps) and ok(ps[0]); h3 += any(ok(p) for p in ps[:3])
        d1 += bool(ps) and right_doc(ps[0]); d3 += any(right_doc(p) for p in ps[:3])
        returned += len(ps); relevant_returned += sum(ok(p) for p in ps)
        got = any(ok(p) for p in ps); answered += got
        cands = r['candidates']
        labels = []
        for rank, c in enumerate(cands):
            rel = right_doc(c) and ans in norm(text_of(c['chunk_id']))
            labels.append(rel)
            if dump:
                dump.write(json.dumps({'q': q['q'], 'rank': rank, 'chunk_id': c['chunk_id'],
                    'vector': c['vector'], 'bm25': c['bm25'], 'coverage': c.get('coverage'),
                    'rerank': c['rerank'], 'relevance': c.get('relevance'), 'score': c.get('score'), 'relevant': rel, 'right_doc': right_doc(c), 'document_id': c['document_id'],
                    'paragraph': c.get('paragraph'), 'ordinal': c.get('ordinal'), 'section': c.get('section'),
                    'path': c.get('path')}) + '\n')
        if any(labels) and not got:
            if not any(l and c['rerank'] >= a.min_score for l, c in zip(labels, cands)):
                dropped += 1  # every answering candidate fell under the cut
            else:
                capped += 1   # passed the cut, lost to the per-source cap / top n
        if a.verbose and not (ps and ok(ps[0])):
            best = next((i for i, l in enumerate(labels) if l), None)
            print(f"MISS {q['q']!r}: top={[(os.path.basename(p['path']), p.get('section'), round(p['rerank'],3)) for p in ps[:2]]} answer rank={best}"
                  + (f" rerank={cands[best]['rerank']:.3f} cos={cands[best]['vector']:.3f} bm25={cands[best]['bm25']:.3f}" if best is not None else ''), file=sys.stderr)
    p = relevant_returned / returned if returned else 0.0
    rc = answered / n
    f1 = 2 * p * rc / (p + rc) if p + rc else 0.0
    ms.sort(); wall.sort()
    res = {'questions': n, 'hit@1': h1 / n, 'hit@3': h3 / n, 'doc@1': d1 / n, 'doc@3': d3 / n,
           'precision': p, 'recall': rc, 'f1': f1, 'cut_dropped': dropped / n, 'capped_out': capped / n,
           'passages_per_question': returned / n,
           'search_ms_p50': statistics.median(ms), 'search_ms_p95': ms[int(0.95 * (n - 1))],
           'process_ms_p50': statistics.median(wall)}
    if a.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:22s} {v:.3f}" if isinstance(v, float) else f"{k:22s} {v}")

main()
