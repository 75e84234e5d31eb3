"""Home Assistant's Wyoming client library (wyoming 1.10.2) driving
`earshot wyoming serve`, for tests/wyoming.rs.

Usage: svc_client.py HOST PORT ACTION [ARGS...]; prints one JSON object.
Every event is parsed with the library's own classes (Info.from_event,
Transcript.from_event, ...), so a shape the library rejects fails here.

  describe                     -> the parsed Info, reduced to names
  transcribe WAV [CHUNK [RATE WIDTH CHANNELS]]
                               -> {"text"} (WAV sent in CHUNK-sample chunks,
                                  converted to that format if given)
  synthesize TEXT OUT.wav      -> {"rate", "chunks", "max_chunk_samples", ...}
  stream OUT.wav TEXT...       -> synthesize-start/chunk.../stop streaming
  recognize TEXT               -> {"type", "name", "entities", "text"}
  handle TEXT [TEXT...]        -> [{"type", "text"}] on one connection
  ping                         -> {"type"}
  parallel WAV TEXT            -> transcribe WAV and handle TEXT at once,
                                  on two connections
  bench WAV TEXT N             -> median/min/max ms over N rounds of describe,
                                  transcribe WAV, synthesize TEXT (figures
                                  for notes/wyoming-service.md)
"""

import asyncio
import json
import sys
import time
import wave

from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioChunkConverter, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.handle import Handled, NotHandled
from wyoming.info import Describe, Info
from wyoming.intent import Intent, NotRecognized, Recognize
from wyoming.ping import Ping, Pong
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

TIMEOUT = 120.0


async def read(client):
    event = await asyncio.wait_for(client.read_event(), TIMEOUT)
    if event is None:
        raise SystemExit("server closed the connection")
    if Error.is_type(event.type):
        err = Error.from_event(event)
        raise SystemExit(f"server error {err.code}: {err.text}")
    return event


async def describe(host, port):
    async with AsyncTcpClient(host, port) as client:
        started = time.monotonic()
        await client.write_event(Describe().event())
        event = await read(client)
        ms = (time.monotonic() - started) * 1000
    info = Info.from_event(event)
    return {
        "ms": ms,
        "asr": [
            {
                "name": p.name,
                "installed": p.installed,
                "version": p.version,
                "attribution": p.attribution.name,
                "models": [
                    {"name": m.name, "languages": m.languages, "installed": m.installed}
                    for m in p.models
                ],
            }
            for p in info.asr
        ],
        "tts": [
            {
                "name": p.name,
                "streaming": p.supports_synthesize_streaming,
                "voices": [
                    {
                        "name": v.name,
                        "languages": v.languages,
                        "speakers": v.speakers,
                        "attribution": v.attribution.name,
                    }
                    for v in p.voices
                ],
            }
            for p in info.tts
        ],
        "intent": [
            {
                "name": p.name,
                "models": [
                    {"name": m.name, "description": m.description, "installed": m.installed}
                    for m in p.models
                ],
            }
            for p in info.intent
        ],
        "handle": [
            {"name": p.name, "models": [m.name for m in p.models]} for p in info.handle
        ],
    }


async def transcribe(host, port, wav_path, chunk=1024, convert=None):
    """convert = (rate, width, channels): re-encode every chunk with the
    library's AudioChunkConverter before sending (e.g. 48 kHz 32-bit stereo)."""
    with wave.open(wav_path, "rb") as wav:
        rate, width, channels = wav.getframerate(), wav.getsampwidth(), wav.getnchannels()
        frames = []
        while True:
            data = wav.readframes(chunk)
            if not data:
                break
            frames.append(data)
    if convert is not None:
        converter = AudioChunkConverter(rate=convert[0], width=convert[1], channels=convert[2])
        frames = [
            converter.convert(AudioChunk(rate=rate, width=width, channels=channels, audio=f)).audio
            for f in frames
        ]
        rate, width, channels = convert
    async with AsyncTcpClient(host, port) as client:
        await client.write_event(Transcribe(language="en").event())
        await client.write_event(AudioStart(rate=rate, width=width, channels=channels).event())
        for data in frames:
            await client.write_event(
                AudioChunk(rate=rate, width=width, channels=channels, audio=data).event()
            )
        started = time.monotonic()
        await client.write_event(AudioStop().event())
        while True:
            event = await read(client)
            if Transcript.is_type(event.type):
                t = Transcript.from_event(event)
                return {
                    "text": t.text,
                    "language": t.language,
                    "chunks": len(frames),
                    "format": [rate, width, channels],
                    "ms_after_stop": (time.monotonic() - started) * 1000,
                }


async def collect_audio(client, out_path, until_stopped):
    """Audio events until audio-stop (or synthesize-stopped when streaming)."""
    rate = width = channels = None
    pcm = bytearray()
    chunks = 0
    max_chunk = 0
    starts = stops = 0
    first_audio_ms = None
    started = time.monotonic()
    while True:
        event = await read(client)
        if AudioStart.is_type(event.type):
            s = AudioStart.from_event(event)
            rate, width, channels = s.rate, s.width, s.channels
            starts += 1
        elif AudioChunk.is_type(event.type):
            c = AudioChunk.from_event(event)
            if first_audio_ms is None:
                first_audio_ms = (time.monotonic() - started) * 1000
            assert (c.rate, c.width, c.channels) == (rate, width, channels), "chunk format"
            pcm.extend(c.audio)
            chunks += 1
            max_chunk = max(max_chunk, c.samples)
        elif AudioStop.is_type(event.type):
            stops += 1
            if not until_stopped:
                break
        elif SynthesizeStopped.is_type(event.type):
            break
    with wave.open(out_path, "wb") as wav:
        wav.setframerate(rate)
        wav.setsampwidth(width)
        wav.setnchannels(channels)
        wav.writeframes(bytes(pcm))
    return {
        "rate": rate,
        "width": width,
        "channels": channels,
        "chunks": chunks,
        "max_chunk_samples": max_chunk,
        "samples": len(pcm) // (width * channels),
        "audio_starts": starts,
        "audio_stops": stops,
        "first_audio_ms": first_audio_ms,
        "total_ms": (time.monotonic() - started) * 1000,
    }


async def synthesize(host, port, text, out_path, voice=None):
    async with AsyncTcpClient(host, port) as client:
        v = SynthesizeVoice(name=voice) if voice else None
        await client.write_event(Synthesize(text=text, voice=v).event())
        return await collect_audio(client, out_path, until_stopped=False)


async def stream(host, port, out_path, pieces):
    async with AsyncTcpClient(host, port) as client:
        await client.write_event(SynthesizeStart().event())
        for piece in pieces:
            await client.write_event(SynthesizeChunk(text=piece).event())
        # What Home Assistant also sends, for servers without streaming.
        await client.write_event(Synthesize(text="".join(pieces)).event())
        await client.write_event(SynthesizeStop().event())
        return await collect_audio(client, out_path, until_stopped=True)


async def recognize(host, port, text):
    async with AsyncTcpClient(host, port) as client:
        await client.write_event(Recognize(text=text).event())
        event = await read(client)
    if Intent.is_type(event.type):
        i = Intent.from_event(event)
        return {
            "type": "intent",
            "name": i.name,
            "entities": [{"name": e.name, "value": e.value} for e in i.entities],
            "text": i.text,
            "context": i.context,
        }
    if NotRecognized.is_type(event.type):
        n = NotRecognized.from_event(event)
        return {"type": "not-recognized", "text": n.text, "context": n.context}
    raise SystemExit(f"unexpected event {event.type}")


async def handle(host, port, texts):
    out = []
    async with AsyncTcpClient(host, port) as client:
        for text in texts:
            await client.write_event(Transcript(text=text).event())
            event = await read(client)
            if Handled.is_type(event.type):
                h = Handled.from_event(event)
                out.append({"type": "handled", "text": h.text, "context": h.context})
            elif NotHandled.is_type(event.type):
                n = NotHandled.from_event(event)
                out.append({"type": "not-handled", "text": n.text, "context": n.context})
            else:
                raise SystemExit(f"unexpected event {event.type}")
    return out


async def ping(host, port):
    async with AsyncTcpClient(host, port) as client:
        await client.write_event(Ping(text="hi").event())
        event = await read(client)
        assert Pong.is_type(event.type), event.type
        return {"type": event.type, "text": event.data.get("text")}


async def parallel(host, port, wav_path, text):
    started = time.monotonic()
    t, h = await asyncio.gather(transcribe(host, port, wav_path), handle(host, port, [text]))
    return {"transcript": t, "handled": h, "ms": (time.monotonic() - started) * 1000}


async def bench(host, port, wav_path, text, rounds):
    import os
    import statistics
    import tempfile

    def summary(values):
        return {
            "median_ms": statistics.median(values),
            "min_ms": min(values),
            "max_ms": max(values),
        }

    with wave.open(wav_path, "rb") as wav:
        audio_s = wav.getnframes() / wav.getframerate()
    times = {"describe": [], "transcribe": [], "synthesize": [], "synthesize_first_audio": []}
    out_path = os.path.join(tempfile.mkdtemp(), "bench.wav")
    audio_out = None
    for _ in range(rounds):
        started = time.monotonic()
        await describe(host, port)
        times["describe"].append((time.monotonic() - started) * 1000)
        started = time.monotonic()
        t = await transcribe(host, port, wav_path)
        times["transcribe"].append((time.monotonic() - started) * 1000)
        started = time.monotonic()
        s = await synthesize(host, port, text, out_path)
        times["synthesize"].append((time.monotonic() - started) * 1000)
        times["synthesize_first_audio"].append(s["first_audio_ms"])
        audio_out = s["samples"] / s["rate"]
    result = {k: summary(v) for k, v in times.items()}
    result["rounds"] = rounds
    result["transcribe_audio_s"] = audio_s
    result["transcribe_rtf"] = result["transcribe"]["median_ms"] / 1000 / audio_s
    result["synthesize_audio_s"] = audio_out
    result["synthesize_rtf"] = result["synthesize"]["median_ms"] / 1000 / audio_out
    result["last_transcript"] = t["text"]
    return result


async def main():
    host, port, action, args = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    if action == "describe":
        result = await describe(host, port)
    elif action == "transcribe":
        chunk = int(args[1]) if len(args) > 1 else 1024
        convert = tuple(int(a) for a in args[2:5]) if len(args) >= 5 else None
        result = await transcribe(host, port, args[0], chunk, convert)
    elif action == "synthesize":
        result = await synthesize(host, port, args[0], args[1], args[2] if len(args) > 2 else None)
    elif action == "stream":
        result = await stream(host, port, args[0], args[1:])
    elif action == "recognize":
        result = await recognize(host, port, args[0])
    elif action == "handle":
        result = await handle(host, port, args)
    elif action == "ping":
        result = await ping(host, port)
    elif action == "parallel":
        result = await parallel(host, port, args[0], args[1])
    elif action == "bench":
        result = await bench(host, port, args[0], args[1], int(args[2]))
    else:
        raise SystemExit(f"unknown action {action}")
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
