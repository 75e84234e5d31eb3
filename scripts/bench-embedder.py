#!/usr/bin/env python3
"""Side-by-side latency: earshot's embedder vs bare Python onnxruntime.

Both sides load the same model file (models/all-MiniLM-L6-v2-int8-nbits.onnx),
tokenize the same utterances with the same tokenizer.json with padding
turned off, run one utterance at a time with the same thread count and
graph optimisation level (ORT_ENABLE_BASIC, as earshot uses), mean-pool over the mask and
L2-normalise. Rounds alternate (python, rust, python, rust, ...) in one run
so both see the same machine state; the medians of the per-round p50s are
compared.

Usage: scripts/bench-embedder.py [--rounds 10] [--iters 20] [--threads 1]
Creates a venv under /tmp (onnxruntime==1.31.1, tokenizers, numpy; wheels
from /tmp/pipdl when present) on first use and re-runs itself inside it.
The Rust side is the `cargo bench --bench nlu` executable run with `--p50`
(bench profile = release), built once before the rounds.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VENV = os.environ.get("EARSHOT_BENCH_VENV", "/tmp/earshot-bench-venv")

# Same list as benches/nlu.rs.
UTTERANCES = [
    "what's the weather in paris",
    "turn on the light",
    "set a timer for ten minutes",
    "what's twelve times seven",
    "add oat milk to my shopping list",
    "talk like a pirate",
    "why is the sky blue",
    "what time is it",
    "remind me to call mum tomorrow at six in the evening",
    "could you please tell me a short story about a dragon who loves to bake bread",
]


def ensure_venv():
    py = os.path.join(VENV, "bin", "python")
    try:
        import numpy  # noqa: F401
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
        return None
    except ImportError:
        pass
    if not os.path.exists(py):
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    find = ["--find-links", "/tmp/pipdl"] if os.path.isdir("/tmp/pipdl") else []
    subprocess.run([py, "-m", "pip", "install", "--quiet", *find,
                    "onnxruntime==1.31.1", "tokenizers", "numpy"], check=True)
    return py


def python_side(models, threads, iters):
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(models, "all-MiniLM-L6-v2-tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(256)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    sess = ort.InferenceSession(os.path.join(models, "all-MiniLM-L6-v2-int8-nbits.onnx"), opts,
                                providers=["CPUExecutionProvider"])

    def embed(text):
        enc = tok.encode(text)
        ids = np.array([enc.ids], dtype=np.int64)
        mask = np.array([enc.attention_mask], dtype=np.int64)
        types = np.array([enc.type_ids], dtype=np.int64)
        out = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
        m = mask[..., None].astype(np.float32)
        v = (out * m).sum(1) / m.sum(1)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    for u in UTTERANCES:
        embed(u)
    times = []
    for _ in range(iters):
        for u in UTTERANCES:
            t = time.perf_counter()
            embed(u)
            times.append((time.perf_counter() - t) * 1000)
    a, b, c = embed("turn on the light"), embed("switch the lamp on"), embed("what is the capital of France")
    return {
        "embed_ms_p50": statistics.median(times),
        "cos_light_lamp": float((a * b).sum()),
        "cos_light_paris": float((a * c).sum()),
        "onnxruntime": ort.__version__,
    }


def rust_bench_exe():
    """Build the bench once (release) and return its executable path."""
    out = subprocess.run(["cargo", "bench", "--bench", "nlu", "--no-run", "--message-format=json"],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("target", {}).get("name") == "nlu" \
                and msg.get("executable"):
            return msg["executable"]
    raise SystemExit("could not find the nlu bench executable")


def rust_side(exe, threads, iters):
    env = dict(os.environ, NLU_THREADS=str(threads))
    out = subprocess.run([exe, "--p50", "--iters", str(iters)], cwd=ROOT, env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--models", default=os.environ.get("EARSHOT_MODELS_DIR", os.path.join(ROOT, "models")))
    ap.add_argument("--python-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.python_only:
        print(json.dumps(python_side(args.models, args.threads, args.iters)))
        return
    py = ensure_venv() or sys.executable
    exe = rust_bench_exe()
    py_rounds, rs_rounds = [], []
    for r in range(args.rounds):
        out = subprocess.run([py, os.path.abspath(__file__), "--python-only", "--iters", str(args.iters),
                              "--threads", str(args.threads), "--models", args.models],
                             check=True, capture_output=True, text=True).stdout
        py_rounds.append(json.loads(out))
        rs_rounds.append(rust_side(exe, args.threads, args.iters))
        print(f"round {r + 1}: python {py_rounds[-1]['embed_ms_p50']:.3f} ms, "
              f"rust embed {rs_rounds[-1]['embed_ms_p50']:.3f} ms, "
              f"rust embed+classify {rs_rounds[-1]['embed_classify_ms_p50']:.3f} ms", file=sys.stderr)
    # Per side, the median and the minimum of the per-round p50s: the
    # minimum is the figure least disturbed by other load on the machine.
    med = lambda rows, k: statistics.median(row[k] for row in rows)  # noqa: E731
    low = lambda rows, k: min(row[k] for row in rows)  # noqa: E731
    summary = {
        "threads": args.threads,
        "rounds": args.rounds,
        "iters": args.iters,
        "onnxruntime": py_rounds[0]["onnxruntime"],
        "load_average": os.getloadavg()[0],
        "python_cosines": [round(py_rounds[0]["cos_light_lamp"], 4), round(py_rounds[0]["cos_light_paris"], 4)],
    }
    for name, f in (("median", med), ("min", low)):
        py_embed = f(py_rounds, "embed_ms_p50")
        summary[name] = {
            "python_embed_ms_p50": round(py_embed, 3),
            "rust_embed_ms_p50": round(f(rs_rounds, "embed_ms_p50"), 3),
            "rust_embed_classify_ms_p50": round(f(rs_rounds, "embed_classify_ms_p50"), 3),
            "ratio_embed": round(f(rs_rounds, "embed_ms_p50") / py_embed, 3),
            "ratio_embed_classify": round(f(rs_rounds, "embed_classify_ms_p50") / py_embed, 3),
            "router_classifier_ms_p50": round(f(rs_rounds, "router_classifier_ms_p50"), 3),
            "router_llm_loopback_ms_p50": round(f(rs_rounds, "router_llm_loopback_ms_p50"), 3),
        }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
