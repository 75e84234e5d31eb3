#!/usr/bin/env python3
"""File-backed microphone for wyoming-satellite's --mic-command (tests/satellite.rs).

Writes 16 kHz 16-bit mono raw audio to stdout in real time: silence until
TRIGGER exists (the satellite's --streaming-start-command touches it once
earshot has sent run-satellite), then REQUEST.raw once, then silence until
the satellite stops the process.

usage: sat_mic.py REQUEST.raw TRIGGER
"""
import os
import sys
import time

RATE = 16000
CHUNK = 1024  # samples, what the satellite reads per event
BYTES = CHUNK * 2


def main() -> None:
    request_path, trigger = sys.argv[1], sys.argv[2]
    with open(request_path, "rb") as f:
        request = f.read()
    out = sys.stdout.buffer
    silence = bytes(BYTES)
    pending = b""
    played = False
    started = time.monotonic()
    sent = 0
    try:
        while True:
            if not played and not pending and os.path.exists(trigger):
                pending = request
                played = True
            if pending:
                chunk, pending = pending[:BYTES], pending[BYTES:]
                chunk = chunk.ljust(BYTES, b"\0")
            else:
                chunk = silence
            out.write(chunk)
            out.flush()
            sent += CHUNK
            # Pace to real time, like a microphone.
            delay = started + sent / RATE - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    except (BrokenPipeError, KeyboardInterrupt):
        pass


if __name__ == "__main__":
    main()
