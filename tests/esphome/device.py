"""A simulated ESPHome voice device for tests/esphome.rs, built on the
protobuf messages aioesphomeapi ships (`api_pb2`, the ESPHome API's own
schema: no message layout is written here) and, when a key is given, the
`noise` library aioesphomeapi uses, as the responder ESPHome firmware is.

usage: device.py MODE PCM_FILE [KEY|-] [NAME] [FLAGS]
MODE: speak  - on each connection, one voice request streaming PCM_FILE
               (16 kHz mono s16le), then report the events, the answer
               streamed over the API (with the speaker flag) and fetch the
               answer URL twice;
      stall  - start a request and then send nothing;
      corrupt - answer the hello with garbage;
      cut    - start a request, send a third of PCM_FILE and hang up
               (once; the next connection stays);
      idle   - only stay connected.
Every mode that stays connected plays announcements: it fetches the
media URL and answers VoiceAssistantAnnounceFinished.
NAME: the device's name (default kitchen); FLAGS: its voice assistant
feature flags (default 31: voice assistant, speaker, API audio, timers,
announce).
Prints `port N` first, then one JSON line per thing seen.
"""
import base64
import json
import socket
import sys
import threading
import urllib.error
import urllib.request

from aioesphomeapi import api_pb2 as pb
from aioesphomeapi.core import MESSAGE_TYPE_TO_PROTO

ID_OF = {cls: ident for ident, cls in MESSAGE_TYPE_TO_PROTO.items()}
EVENT_NAME = {v: k for k, v in pb.VoiceAssistantEvent.items()}
# voice assistant | speaker | API audio | timers | announce
FLAGS = int(sys.argv[5]) if len(sys.argv) > 5 else 0b11111
NAME = sys.argv[4] if len(sys.argv) > 4 else "kitchen"
# One request per process (a reconnect does not ask again).
SPOKE = []


def say(obj):
    print(json.dumps(obj), flush=True)


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


class Conn:
    def __init__(self, sock, key):
        self.sock = sock
        self.file = sock.makefile("rb")
        self.noise = None
        self.lock = threading.Lock()
        if key:
            self._handshake(base64.b64decode(key))

    def _read_exact(self, n):
        data = self.file.read(n)
        if data is None or len(data) < n:
            raise EOFError("closed")
        return data

    def _noise_frame(self):
        head = self._read_exact(3)
        assert head[0] == 1, head
        return self._read_exact((head[1] << 8) | head[2])

    def _send_noise_frame(self, body):
        self.sock.sendall(bytes((1, len(body) >> 8, len(body) & 0xFF)) + body)

    def _handshake(self, psk):
        from noise.connection import NoiseConnection

        proto = NoiseConnection.from_name(b"Noise_NNpsk0_25519_ChaChaPoly_SHA256")
        proto.set_as_responder()
        proto.set_psks(psk)
        hello = self._noise_frame()
        proto.set_prologue(b"NoiseAPIInit" + len(hello).to_bytes(2, "big") + hello)
        proto.start_handshake()
        self._send_noise_frame(b"\x01" + NAME.encode() + b"\x00AA:BB:CC:DD:EE:FF\x00")
        msg = self._noise_frame()
        assert msg[0] == 0
        proto.read_message(msg[1:])
        self._send_noise_frame(b"\x00" + proto.write_message())
        self.noise = proto

    def read(self):
        if self.noise:
            plain = self.noise.decrypt(self._noise_frame())
            kind = (plain[0] << 8) | plain[1]
            length = (plain[2] << 8) | plain[3]
            payload = plain[4 : 4 + length]
        else:
            assert self._read_exact(1) == b"\x00"
            length = self._varint()
            kind = self._varint()
            payload = self._read_exact(length)
        msg = MESSAGE_TYPE_TO_PROTO[kind]()
        msg.ParseFromString(payload)
        return msg

    def _varint(self):
        shift = value = 0
        while True:
            b = self._read_exact(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def send(self, msg):
        data = msg.SerializeToString()
        kind = ID_OF[type(msg)]
        with self.lock:
            if self.noise:
                plain = bytes((kind >> 8, kind & 0xFF, len(data) >> 8, len(data) & 0xFF)) + data
                self._send_noise_frame(self.noise.encrypt(plain))
            else:
                self.sock.sendall(b"\x00" + varint(len(data)) + varint(kind) + data)


def setup(conn, mode):
    """Answer until Home Assistant's side (earshot) subscribed."""
    while True:
        msg = conn.read()
        if isinstance(msg, pb.HelloRequest):
            if mode == "corrupt":
                conn.sock.sendall(b"\x07 this is not a frame \xff\xff\xff")
                return False
            conn.send(pb.HelloResponse(api_version_major=1, api_version_minor=10, name=NAME))
        elif isinstance(msg, pb.DeviceInfoRequest):
            conn.send(pb.DeviceInfoResponse(
                name=NAME, friendly_name=NAME.title() + " Voice", mac_address="AA:BB:CC:DD:EE:FF", model="sim",
                voice_assistant_feature_flags=FLAGS))
        elif isinstance(msg, pb.SubscribeVoiceAssistantRequest):
            say({"subscribed": msg.subscribe, "flags": msg.flags})
            return True
        elif isinstance(msg, pb.PingRequest):
            conn.send(pb.PingResponse())


def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            body = r.read()
            return {"status": r.status, "bytes": len(body), "riff": body[:4] == b"RIFF"}
    except urllib.error.HTTPError as e:
        return {"status": e.code}


def announced(conn, msg):
    """Play an announcement: fetch its audio, say what came, finish it."""
    got = fetch(msg.media_id)
    say({"announce": {"text": msg.text, "fetch": got}})
    conn.send(pb.VoiceAssistantAnnounceFinished(success=got.get("status") == 200))


def rms(pcm):
    n = len(pcm) // 2
    if not n:
        return 0.0
    total = 0
    for i in range(n):
        s = int.from_bytes(pcm[2 * i : 2 * i + 2], "little", signed=True)
        total += s * s
    return (total / n) ** 0.5 / 32768.0


def speak(conn, pcm):
    conn.send(pb.VoiceAssistantRequest(start=True, conversation_id="", flags=0))
    stop = threading.Event()

    def stream():
        # The speech, then silence until the pipeline says the speech ended
        # (as firmware streams its microphone), bounded.
        chunks = [pcm[i : i + 1024] for i in range(0, len(pcm), 1024)]
        silence = b"\x00" * 1024
        for c in chunks:
            conn.send(pb.VoiceAssistantAudio(data=c))
        for _ in range(16000 * 10 // 512):
            if stop.wait(0.01):
                return
            conn.send(pb.VoiceAssistantAudio(data=silence))

    streamer = threading.Thread(target=stream, daemon=True)
    started = False
    answer = None
    while True:
        msg = conn.read()
        if isinstance(msg, pb.VoiceAssistantAudio) and answer is not None:
            answer.extend(msg.data)
            continue
        if isinstance(msg, pb.VoiceAssistantResponse):
            say({"response": {"port": msg.port, "error": msg.error}})
            if not started:
                streamer.start()
                started = True
        elif isinstance(msg, pb.VoiceAssistantEventResponse):
            name = EVENT_NAME[msg.event_type]
            data = {d.name: d.value for d in msg.data}
            say({"event": name, "data": data})
            if name in ("VOICE_ASSISTANT_STT_VAD_END", "VOICE_ASSISTANT_RUN_END", "VOICE_ASSISTANT_ERROR"):
                stop.set()
            if name == "VOICE_ASSISTANT_TTS_END":
                say({"fetch1": fetch(data["url"])})
                say({"fetch2": fetch(data["url"])})
            if name == "VOICE_ASSISTANT_TTS_STREAM_START":
                answer = bytearray()
            if name == "VOICE_ASSISTANT_TTS_STREAM_END" and answer is not None:
                say({"streamed": {"bytes": len(answer), "rms": rms(answer)}})
                answer = None
            if name == "VOICE_ASSISTANT_RUN_END":
                return
        elif isinstance(msg, pb.PingRequest):
            conn.send(pb.PingResponse())


def serve_one(sock, mode, pcm, key):
    conn = Conn(sock, key)
    if not setup(conn, mode):
        return
    if mode == "speak" and not SPOKE:
        SPOKE.append(True)
        speak(conn, pcm)
        say({"done": True})
    elif mode == "stall":
        conn.send(pb.VoiceAssistantRequest(start=True, conversation_id="", flags=0))
        say({"stalling": True})
    elif mode == "cut" and not SPOKE:
        # Cut off mid-request: a third of the speech, then the connection
        # drops (once; the reconnect stays).
        SPOKE.append(True)
        conn.send(pb.VoiceAssistantRequest(start=True, conversation_id="", flags=0))
        for i in range(0, len(pcm) // 3, 1024):
            conn.send(pb.VoiceAssistantAudio(data=pcm[i : i + 1024]))
        say({"cut": True})
        conn.sock.shutdown(socket.SHUT_RDWR)
        raise EOFError("cut off by the test")
    # Stay connected, answering pings and reporting timer events, until
    # the other side hangs up.
    timer_names = {v: k for k, v in pb.VoiceAssistantTimerEvent.items()}
    while True:
        msg = conn.read()
        if isinstance(msg, pb.PingRequest):
            conn.send(pb.PingResponse())
        elif isinstance(msg, pb.VoiceAssistantTimerEventResponse):
            say({"timer_event": timer_names[msg.event_type], "name": msg.name,
                 "total_seconds": msg.total_seconds})
        elif isinstance(msg, pb.VoiceAssistantAnnounceRequest):
            announced(conn, msg)


def main():
    mode, pcm_path = sys.argv[1], sys.argv[2]
    key = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" else None
    pcm = open(pcm_path, "rb").read() if pcm_path != "-" else b""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    say({"port": server.getsockname()[1]})
    while True:
        sock, _ = server.accept()
        say({"connected": True})
        try:
            serve_one(sock, mode, pcm, key)
        except (EOFError, ConnectionError, OSError) as e:
            say({"disconnected": str(e)})
        finally:
            sock.close()


main()
