"""Home Assistant's side of tests/esphome.rs: aioesphomeapi (the client
library Home Assistant's ESPHome integration uses) connecting to
`earshot esphome serve`.

usage: ha_client.py PORT [KEY|-] [PASSWORD|-]
Prints one JSON line: {"ok": true, "name", "api", "flags", "entities"} or
{"ok": false, "error": <exception class>, "message"}.
"""
import asyncio
import json
import sys

from aioesphomeapi import APIClient


async def main() -> None:
    port = int(sys.argv[1])
    key = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "-" else None
    password = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" else ""
    client = APIClient("127.0.0.1", port, password, noise_psk=key, client_info="Home Assistant test")
    try:
        await asyncio.wait_for(client.connect(login=bool(password)), 20)
        info = await asyncio.wait_for(client.device_info(), 20)
        entities, services = await asyncio.wait_for(client.list_entities_services(), 20)
        api = client.api_version
        await client.disconnect()
        print(json.dumps({
            "ok": True,
            "name": info.name,
            "mac": info.mac_address,
            "api": [api.major, api.minor],
            "flags": info.voice_assistant_feature_flags_compat(api),
            "encryption": info.api_encryption_supported,
            "entities": [[type(e).__name__, e.object_id, e.name] for e in entities],
        }))
    except Exception as exc:  # noqa: BLE001 - the test reads the class name
        print(json.dumps({"ok": False, "error": type(exc).__name__, "message": str(exc)}))


asyncio.run(main())
