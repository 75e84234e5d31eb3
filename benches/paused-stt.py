#!/usr/bin/env python3
"""Words after a pause inside a sentence, STT alone (stop 62, stt::gaps).

Each line of SENTENCES ("head | tail") is said in pieces by the configured
Piper voice (`earshot say --out`), the pieces are trimmed of their own
silence and joined with PAUSE_MS of silence, and `earshot transcribe --json`
reads the whole. Prints the reading, the STT path (`+gap` when the check
for words lost after the pause changed it) and its time.

    python3 benches/paused-stt.py target/release/earshot benches/paused-sentences.txt 450 [earshot args…]
"""
import array
import json
import subprocess
import sys
import tempfile
import wave
from pathlib import Path


def read(path):
    with wave.open(str(path)) as w:
        return w.getframerate(), array.array("h", w.readframes(w.getnframes()))


def trim(samples, threshold=300):
    loud = [i for i, v in enumerate(samples) if abs(v) > threshold]
    return samples[loud[0] : loud[-1] + 1] if loud else samples


def main():
    earshot, sentences, pause_ms = sys.argv[1], sys.argv[2], int(sys.argv[3])
    extra = sys.argv[4:]
    lines = [l.strip() for l in open(sentences) if l.strip() and not l.startswith("#")]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for n, line in enumerate(lines):
            out, rate = array.array("h"), 22050
            for i, piece in enumerate(p.strip() for p in line.split("|")):
                said = tmp / f"piece-{n}-{i}.wav"
                subprocess.run([earshot, "say", piece, "--out", str(said)], check=True, capture_output=True)
                rate, samples = read(said)
                if i == 0:
                    out += array.array("h", [0] * (rate // 5))
                else:
                    out += array.array("h", [0] * (rate * pause_ms // 1000))
                out += trim(samples)
            out += array.array("h", [0] * (rate * 3 // 10))
            joined = tmp / f"line-{n}.wav"
            with wave.open(str(joined), "wb") as w:
                w.setnchannels(1)
                w.setsampwidth(2)
                w.setframerate(rate)
                w.writeframes(out.tobytes())
            got = subprocess.run([earshot, *extra, "transcribe", str(joined), "--json"], capture_output=True, text=True)
            if got.returncode != 0:
                print(f"{line!r}: {got.stderr.strip()}")
                continue
            d = json.loads(got.stdout)
            print(f"{line!r:45} -> {d['text']!r} [{d['path']} {d['timings']['stt_ms']} ms]")


if __name__ == "__main__":
    main()
