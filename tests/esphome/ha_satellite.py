"""Home Assistant's side of tests/esphome/satellite.rs: aioesphomeapi's
APIClient (what Home Assistant's ESPHome integration runs) against
`earshot run` with `[esphome] serve = true`, acting as HA's Assist
pipeline for earshot's requests.

usage: ha_satellite.py PORT OUTDIR [PLAN]   (HA_NOISE_PSK=key: encrypted)

It serves its own answer audio over HTTP (a 1000 Hz tone WAV, a 440 Hz
announcement WAV, a 404, an MP3-looking body, a body over earshot's
limit), connects, subscribes with API audio, sends an announcement and a
finished timer, then answers each request by the plan below, in order:

  1. "url":     events with TTS_END's URL to the 1000 Hz tone
  2. "stream":  the answer streamed over the API (1500 Hz tone)
  3. "missing": TTS_END's URL answers 404
  4. "hang":    never answers the request (earshot must answer locally)
  5. "notwav":  TTS_END's URL is not a WAV
  6. "huge":    TTS_END's URL is larger than earshot takes; HA
                unsubscribes before RUN_END (what follows is local)

(Only with PLAN below: "silent" takes the request and the audio, then
never sends an event; "follow" is "url" with INTENT_END's
continue_conversation = 1.)

PLAN (comma-separated) replaces the plan above; the announcement and the
timer are then left out.

Prints one JSON line per step on stdout; the audio of each request goes
to OUTDIR/runN.raw (16 kHz mono s16le as received).
"""
import asyncio
import http.server
import io
import json
import os
import math
import struct
import sys
import threading
import wave

from aioesphomeapi import (
    APIClient,
    VoiceAssistantEventType as Ev,
    VoiceAssistantTimerEventType as TimerEv,
)

PLAN = ["url", "stream", "missing", "hang", "notwav", "huge"]


def say(**fields) -> None:
    print(json.dumps(fields), flush=True)


def tone(freq: float, seconds: float, rate: int = 16000) -> bytes:
    n = int(seconds * rate)
    return b"".join(
        struct.pack("<h", int(12000 * math.sin(2 * math.pi * freq * i / rate)))
        for i in range(n)
    )


def wav(pcm: bytes, rate: int = 16000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)
    return out.getvalue()


FILES = {
    "/answer.wav": ("audio/x-wav", wav(tone(1000, 0.8))),
    "/chime.wav": ("audio/x-wav", wav(tone(440, 0.6))),
    "/answer.mp3": ("audio/mpeg", b"ID3\x03\x00\x00\x00" + b"\x00" * 4000),
}
HUGE = 20 * 1024 * 1024


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/huge.wav":
            self.send_response(200)
            self.send_header("Content-Type", "audio/x-wav")
            self.send_header("Content-Length", str(HUGE))
            self.end_headers()
            head = wav(b"")[:44]
            try:
                self.wfile.write(head)
                chunk = b"\x00" * 65536
                for _ in range(HUGE // len(chunk)):
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if self.path not in FILES:
            self.send_error(404)
            return
        kind, body = FILES[self.path]
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


async def main() -> None:
    global PLAN
    port = int(sys.argv[1])
    outdir = sys.argv[2]
    full = len(sys.argv) < 4
    if not full:
        PLAN = sys.argv[3].split(",")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"

    key = os.environ.get("HA_NOISE_PSK") or None
    client = APIClient("127.0.0.1", port, "", noise_psk=key,
                       client_info="Home Assistant test")
    await asyncio.wait_for(client.connect(login=False), 30)
    info = await asyncio.wait_for(client.device_info(), 30)
    say(connected=info.name)

    runs = []  # one dict per request
    state = {"unsub": None, "finished": 0}
    loop = asyncio.get_running_loop()
    all_done = loop.create_future()

    def send(event, data=None):
        client.send_voice_assistant_event(event, data or {})

    async def answer(run: dict) -> None:
        plan = run["plan"]
        with open(f"{outdir}/run{run['n']}.raw", "wb") as f:
            f.write(bytes(run["audio"]))
        say(run=run["n"], plan=plan, audio_bytes=len(run["audio"]),
            conversation_id=run["conversation_id"], wake_word=run["wake_word"])
        send(Ev.VOICE_ASSISTANT_RUN_START)
        send(Ev.VOICE_ASSISTANT_STT_START)
        send(Ev.VOICE_ASSISTANT_STT_VAD_START)
        send(Ev.VOICE_ASSISTANT_STT_VAD_END)
        send(Ev.VOICE_ASSISTANT_STT_END, {"text": "What time is it?"})
        send(Ev.VOICE_ASSISTANT_INTENT_START)
        follow = "1" if plan == "follow" else "0"
        send(Ev.VOICE_ASSISTANT_INTENT_END,
             {"conversation_id": f"conv-{run['n']}", "continue_conversation": follow})
        send(Ev.VOICE_ASSISTANT_TTS_START, {"text": f"Answer {run['n']}."})
        if plan == "stream":
            # What HA does for a device with a speaker: the WAV's frames
            # over the API between the stream events.
            send(Ev.VOICE_ASSISTANT_TTS_STREAM_START)
            send(Ev.VOICE_ASSISTANT_TTS_END, {"url": f"{base}/missing.wav"})
            pcm = tone(1500, 0.8)
            for i in range(0, len(pcm), 1024):
                client.send_voice_assistant_audio(pcm[i:i + 1024])
                await asyncio.sleep(0)
            send(Ev.VOICE_ASSISTANT_RUN_END)
            send(Ev.VOICE_ASSISTANT_TTS_STREAM_END)
        else:
            url = {
                "url": f"{base}/answer.wav",
                "follow": f"{base}/answer.wav",
                "missing": f"{base}/missing.wav",
                "notwav": f"{base}/answer.mp3",
                "huge": f"{base}/huge.wav",
            }[plan]
            send(Ev.VOICE_ASSISTANT_TTS_END, {"url": url})
            if plan == "huge":
                # HA goes away: earshot's next request is answered locally.
                state["unsub"]()
                say(unsubscribed=True)
            send(Ev.VOICE_ASSISTANT_RUN_END)
        if run["n"] == len(PLAN) and not all_done.done():
            all_done.set_result(True)

    async def handle_start(conversation_id, flags, audio_settings, wake_word_phrase):
        n = len(runs) + 1
        plan = PLAN[n - 1] if n <= len(PLAN) else "extra"
        run = {"n": n, "plan": plan, "audio": bytearray(),
               "conversation_id": conversation_id, "wake_word": wake_word_phrase,
               "ended": False}
        runs.append(run)
        say(start=n, plan=plan, conversation_id=conversation_id, flags=flags)
        if plan == "hang":
            await asyncio.sleep(3600)
        return 0

    def plan_of(run: dict) -> str:
        return run["plan"]

    async def handle_audio(data: bytes, data2) -> None:
        if runs and not runs[-1]["ended"]:
            runs[-1]["audio"].extend(data)

    async def handle_stop(abort: bool) -> None:
        if not runs:
            return
        run = runs[-1]
        say(stop=run["n"], abort=abort, audio_bytes=len(run["audio"]))
        if run["ended"]:
            return
        run["ended"] = True
        if not abort and plan_of(run) != "silent":
            asyncio.ensure_future(answer(run))

    async def handle_announcement_finished(finished) -> None:
        state["finished"] += 1

    state["unsub"] = client.subscribe_voice_assistant(
        handle_start=handle_start,
        handle_stop=handle_stop,
        handle_audio=handle_audio,
        handle_announcement_finished=handle_announcement_finished,
    )
    say(subscribed=True)
    if full:
        # A finished HA timer rings on the device.
        client.send_voice_assistant_timer_event(
            TimerEv.VOICE_ASSISTANT_TIMER_FINISHED, "t1", "tea", 60, 0, False)
        announce = asyncio.ensure_future(
            client.send_voice_assistant_announcement_await_response(
                f"{base}/chime.wav", 120, text="Dinner is ready."))
        say(announce_sent=True)
        result = await announce
        say(announced=result.success)
    await asyncio.wait_for(all_done, 120)
    say(done=True, runs=len(runs))
    # Stay connected until the test ends us.
    await asyncio.sleep(300)


asyncio.run(main())
