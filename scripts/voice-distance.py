#!/usr/bin/env python3
"""How far apart two renderings of the same sentences sound.

    voice-distance.py DIR_A DIR_B

DIR_A and DIR_B hold WAV files of the same names (mono, 16-bit, the same
rate), e.g. `earshot say --out DIR/N.wav` of the same sentences with two
voice files. For each pair: 40-band log-mel spectra (1024-sample window,
hop 256), aligned by dynamic time warping (the two may differ in length
when a voice's durations move), and the mean per-frame RMS difference in
dB along the path. Prints each file's distance and the mean.

Why (issue 21, stop 46): to say whether a change to a voice (the Piper
encoder's weights stored in 8 bits) is heard, put its distance beside the
distance between two runs of the unchanged voice with its sampling noise
on (Piper draws noise every run): a change well under that is within
what the voice already does from one run to the next.
Needs numpy only.
"""
import os
import sys
import wave

import numpy as np


def load(path):
    with wave.open(path) as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            sys.exit(f"{path}: expected mono 16-bit PCM")
        x = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
        return x.astype(np.float32) / 32768, w.getframerate()


def log_mel(x, rate, bands=40, n=1024, hop=256):
    x = np.pad(x, (n // 2, n // 2))
    frames = np.lib.stride_tricks.sliding_window_view(x, n)[::hop] * np.hanning(n)
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    freqs = np.linspace(0, rate / 2, power.shape[1])
    mel = lambda f: 2595 * np.log10(1 + f / 700)
    edges = 700 * (10 ** (np.linspace(mel(0), mel(rate / 2), bands + 2) / 2595) - 1)
    bank = np.zeros((bands, power.shape[1]))
    for i in range(bands):
        lo, mid, hi = edges[i : i + 3]
        bank[i] = np.clip(np.minimum((freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)), 0, None)
    return 10 * np.log10(power @ bank.T + 1e-10)


def dtw_distance(a, b):
    d = np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).mean(-1))
    n, m = d.shape
    cost = np.full((n + 1, m + 1), np.inf)
    cost[0, 0] = 0
    for i in range(1, n + 1):
        row, prev = cost[i], cost[i - 1]
        for j in range(1, m + 1):
            row[j] = d[i - 1, j - 1] + min(prev[j], row[j - 1], prev[j - 1])
    return cost[n, m] / (n + m)


def main(dir_a, dir_b):
    names = sorted(f for f in os.listdir(dir_a) if f.endswith(".wav"))
    if not names:
        sys.exit(f"{dir_a}: no .wav files")
    dists = []
    for name in names:
        a, rate_a = load(os.path.join(dir_a, name))
        b, rate_b = load(os.path.join(dir_b, name))
        if rate_a != rate_b:
            sys.exit(f"{name}: {rate_a} Hz against {rate_b} Hz")
        dists.append(dtw_distance(log_mel(a, rate_a), log_mel(b, rate_b)))
        print(f"{name}: {dists[-1]:.2f} dB")
    print(f"mean over {len(dists)}: {np.mean(dists):.2f} dB")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
