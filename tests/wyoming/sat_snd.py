#!/usr/bin/env python3
"""File-backed speaker for wyoming-satellite's --snd-command (tests/satellite.rs).

The satellite starts the command for each answer and closes its stdin after
audio-stop. Everything received is written to DIR/answer-N.raw (N = 1, 2,
...), appearing under that name only once complete (written to a .part
file, then renamed), so the test can wait for the file.

usage: sat_snd.py DIR
"""
import os
import sys


def main() -> None:
    out_dir = sys.argv[1]
    data = sys.stdin.buffer.read()
    n = 1
    while True:
        final = os.path.join(out_dir, f"answer-{n}.raw")
        part = final + ".part"
        try:
            fd = os.open(part, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            n += 1
            continue
        if os.path.exists(final):
            os.close(fd)
            os.unlink(part)
            n += 1
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.rename(part, final)
        return


if __name__ == "__main__":
    main()
