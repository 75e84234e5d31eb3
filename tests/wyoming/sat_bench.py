#!/usr/bin/env python3
"""Turn latency of earshot's satellite host, measured from the satellite's side.

Plays a satellite (a Wyoming server, wyoming 1.4.1 as wyoming-satellite 1.0.0
pins): waits for earshot to connect and send run-satellite, then for each
turn sends run-pipeline (asr -> tts), the request WAV (16 kHz mono 16-bit)
as audio-chunks, and audio-stop — the moment the satellite's audio ends —
and times the events that come back: transcript, synthesize, the first
answer audio (audio-start) and audio-stop. Sends played after each answer.
Prints one JSON line per turn and a summary line (medians).

usage: sat_bench.py --port PORT --wav REQUEST.wav [--turns 5]
Run with the satellite venv: .venv/wyoming-satellite/bin/python
"""
import argparse
import asyncio
import json
import statistics
import time
import wave

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event, async_read_event, async_write_event
from wyoming.pipeline import PipelineStage, RunPipeline


def load_request(path: str) -> bytes:
    with wave.open(path, "rb") as w:
        if (w.getframerate(), w.getsampwidth(), w.getnchannels()) != (16000, 2, 1):
            raise SystemExit(f"{path} must be 16 kHz 16-bit mono")
        return w.readframes(w.getnframes())


async def session(reader, writer, pcm: bytes, turns: int, done: asyncio.Future):
    results = []
    while True:
        event = await async_read_event(reader)
        if event is None:
            raise SystemExit("earshot hung up before run-satellite")
        if event.type == "run-satellite":
            break
    for n in range(1, turns + 1):
        await async_write_event(
            RunPipeline(start_stage=PipelineStage.ASR, end_stage=PipelineStage.TTS).event(),
            writer,
        )
        for i in range(0, len(pcm), 2048):
            await async_write_event(
                AudioChunk(rate=16000, width=2, channels=1, audio=pcm[i : i + 2048]).event(),
                writer,
            )
        await async_write_event(AudioStop().event(), writer)
        t0 = time.monotonic()
        stamps = {}
        text = answer = None
        audio_bytes = 0
        while True:
            event = await async_read_event(reader)
            if event is None:
                raise SystemExit("earshot hung up mid-turn")
            now = (time.monotonic() - t0) * 1000.0
            if event.type == "transcript":
                stamps["transcript"] = now
                text = event.data.get("text")
            elif event.type == "synthesize":
                stamps["synthesize"] = now
                answer = event.data.get("text")
            elif AudioStart.is_type(event.type):
                stamps["first_audio"] = now
            elif AudioChunk.is_type(event.type):
                audio_bytes += len(event.payload or b"")
            elif AudioStop.is_type(event.type):
                stamps["audio_stop"] = now
                break
            elif event.type == "error":
                stamps["error"] = now
        await async_write_event(Event(type="played"), writer)
        row = {"turn": n, "heard": text, "answer": answer, "ms_after_audio_end": stamps,
               "answer_audio_bytes": audio_bytes}
        print(json.dumps(row), flush=True)
        results.append(stamps)
    keys = ["transcript", "first_audio", "audio_stop"]
    summary = {k: round(statistics.median(r[k] for r in results if k in r), 1) for k in keys}
    print(json.dumps({"turns": turns, "median_ms_after_audio_end": summary}), flush=True)
    done.set_result(True)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--wav", required=True)
    ap.add_argument("--turns", type=int, default=5)
    args = ap.parse_args()
    pcm = load_request(args.wav)
    done = asyncio.get_running_loop().create_future()
    busy = False

    async def handle(reader, writer):
        nonlocal busy
        if busy:
            writer.close()
            return
        busy = True
        await session(reader, writer, pcm, args.turns, done)

    server = await asyncio.start_server(handle, "127.0.0.1", args.port)
    print(json.dumps({"listening": args.port}), flush=True)
    async with server:
        await done


if __name__ == "__main__":
    asyncio.run(main())
