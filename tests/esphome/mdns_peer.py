"""The mDNS side of tests/esphome/mdns.rs, on python-zeroconf (the library
Home Assistant browses with; installed in the test venv with aioesphomeapi).
Run only inside the network namespace the Rust test creates: it sends
multicast on every interface it sees.

usage:
  mdns_peer.py browse
      Browse `_esphomelib._tcp` on every interface (loopback included) and
      print one JSON line per service resolved. A control service,
      `loopback-control`, is announced on 127.0.0.1 only, so a test that
      sees nothing from a loopback-bound earshot knows the browser would
      have heard a loopback announcement.
  mdns_peer.py device ADDR NAME KEY|- [OTHER_NAME ...]
      A simulated ESPHome voice device (tests/esphome/device.py, run as it
      is, holding its connection after the subscribe) listening on ADDR
      instead of 127.0.0.1, announced as NAME (TXT `api_encryption` when
      KEY is given); each OTHER_NAME is announced on the same port as an
      encrypted device (for "no key configured").
"""
import json
import os
import runpy
import socket
import sys
import threading

from zeroconf import InterfaceChoice, IPVersion, ServiceBrowser, ServiceInfo, Zeroconf

SERVICE = "_esphomelib._tcp.local."
NOISE = "Noise_NNpsk0_25519_ChaChaPoly_SHA256"


def say(obj):
    print(json.dumps(obj), flush=True)


def info(name, addr, port, encrypted):
    props = {
        "friendly_name": name,
        "version": "2025.9.0",
        "mac": "aabbccddeeff",
        "platform": "ESP32",
        "board": "esp32-s3-devkitc-1",
        "network": "wifi",
    }
    if encrypted:
        props["api_encryption"] = NOISE
    return ServiceInfo(
        SERVICE,
        f"{name}.{SERVICE}",
        addresses=[socket.inet_aton(addr)],
        port=port,
        properties=props,
        server=f"{name}.local.",
    )


def browse():
    control = Zeroconf(interfaces=["127.0.0.1"], ip_version=IPVersion.V4Only)
    control.register_service(info("loopback-control", "127.0.0.1", 9, False))
    zc = Zeroconf(interfaces=InterfaceChoice.All, ip_version=IPVersion.V4Only)
    seen = set()
    lock = threading.Lock()

    class Listener:
        def add_service(self, zc, kind, name):
            self.report(zc, kind, name)

        def update_service(self, zc, kind, name):
            self.report(zc, kind, name)

        def remove_service(self, zc, kind, name):
            pass

        def report(self, zc, kind, name):
            found = zc.get_service_info(kind, name, 3000)
            if found is None:
                return
            txt = {
                k.decode(errors="replace"): (v or b"").decode(errors="replace")
                for k, v in found.properties.items()
            }
            line = {
                "found": name[: -len(SERVICE) - 1],
                "addresses": sorted(found.parsed_addresses()),
                "port": found.port,
                "txt": txt,
            }
            key = json.dumps(line, sort_keys=True)
            with lock:
                if key in seen:
                    return
                seen.add(key)
            say(line)

    ServiceBrowser(zc, SERVICE, Listener())
    say({"browsing": True})
    threading.Event().wait()


def device(addr, name, key, others):
    device_py = os.path.join(os.path.dirname(os.path.abspath(__file__)), "device.py")
    zc = Zeroconf(interfaces=[addr], ip_version=IPVersion.V4Only)
    real_bind = socket.socket.bind

    def bind(sock, address):
        # device.py listens on 127.0.0.1:0; this one listens on ADDR and
        # announces the port it got.
        if address != ("127.0.0.1", 0):
            return real_bind(sock, address)
        real_bind(sock, (addr, 0))
        port = sock.getsockname()[1]

        def register():
            # Probing takes a second or so per name; device.py listens
            # meanwhile.
            zc.register_service(info(name, addr, port, key is not None))
            for other in others:
                zc.register_service(info(other, addr, port, True))
            say({"registered": [name, *others], "port": port})

        threading.Thread(target=register, daemon=True).start()
        return None

    socket.socket.bind = bind
    # A mode device.py does not special-case: it answers the hello, device
    # info and subscribe, then holds the connection answering pings.
    sys.argv = [device_py, "idle", "-", key or "-"]
    runpy.run_path(device_py, run_name="__main__")


def main():
    if sys.argv[1] == "browse":
        browse()
    elif sys.argv[1] == "device":
        key = sys.argv[4] if sys.argv[4] != "-" else None
        device(sys.argv[2], sys.argv[3], key, sys.argv[5:])
    else:
        sys.exit(f"unknown mode {sys.argv[1]!r}")


main()
