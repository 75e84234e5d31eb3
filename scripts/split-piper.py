#!/usr/bin/env python3
"""Split a Piper voice into its text-to-latent part and its vocoder.

    split-piper.py [--float-encoder] VOICE.onnx ENCODER.onnx DECODER.onnx

Why (issue 21, points 2 and 4): a Piper voice is one VITS graph whose
last part, the HiFi-GAN decoder (`/dec/...`, ~6 MB of the ~63 MB), turns
the latent frames (192 channels, one frame per 256 samples) into audio.
Its activations live at the audio rate, so the memory of one run grows
with the length of the sentence: ~45 MB over the loaded voice for 80
phonemes, ~90 MB for 160 (ONNX Runtime, 2 threads). The decoder is
convolutional along time with a short reach, so it can run over the
latent frames in windows with a margin on each side and give the same
samples. Cut here, earshot runs

- `ENCODER.onnx`: the voice's own inputs (`input`, `input_lengths`,
  `scales`) -> `latent` [1, 192, frames] (text encoder, durations,
  flow; the original's `z * y_mask`);
- `DECODER.onnx`: `latent` [1, 192, frames] -> `output` [1, 1, 1, samples]
  (the decoder, unchanged),

and the peak no longer depends on how long the sentence is.

The nodes, weights and attributes are the original's; only the cut
tensor is renamed `latent`, and (unless `--float-encoder`) the encoder's
convolution weights are stored in 8 bits, see `int8_conv_weights`. The
cut is found, not assumed: it is the one tensor every `/dec/` node reads from outside the decoder, and the
script refuses a voice where that is not so (a multi-speaker voice also
feeds the decoder its speaker embedding). earshot checks at load that
the windowed decoder gives the whole decoder's samples on a probe.

The output is deterministic for a given input and onnx version (the fetch
script pins both and each output's sha256).
"""
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, utils

LATENT = "latent"


def decoder_input(graph, src):
    dec = [n for n in graph.node if n.name.startswith("/dec/")]
    if not dec:
        sys.exit(f"{src}: no /dec/ nodes; not a Piper (VITS) voice")
    made = {o for n in dec for o in n.output}
    weights = {i.name for i in graph.initializer}
    outside = sorted(
        {i for n in dec for i in n.input if i and i not in made and i not in weights}
    )
    if len(outside) != 1:
        sys.exit(f"{src}: the decoder reads {outside} from outside; expected one latent tensor")
    return outside[0]


def rename(path, old, new, then=None):
    """Rename tensor `old` to `new` in the model at `path`; `then`, when
    given, changes the model further before the one save."""
    model = onnx.load(path)
    g = model.graph
    for n in g.node:
        n.input[:] = [new if i == old else i for i in n.input]
        n.output[:] = [new if o == old else o for o in n.output]
    for v in list(g.input) + list(g.output):
        if v.name == old:
            v.name = new
    if then is not None:
        then(model, path)
    onnx.checker.check_model(model)
    onnx.save(model, path)


def int8_conv_weights(model, path):
    """Store the encoder's convolution weights as int8, one scale per
    output channel, read through a `DequantizeLinear` in front of each
    `Conv`.

    Why (issue 21, point 4): the encoder is ~56 MB of float32 `Conv`
    weights, the largest model earshot keeps in memory. ONNX Runtime does
    not fold a `DequantizeLinear` of a constant (it keeps QDQ graphs as
    they are), so the weights stay 8-bit in memory and each run
    dequantizes them one layer at a time: resident after load 77 -> 39 MB,
    a run +5 ms (ORT, 2 threads, 40 and 120 phonemes). The sound moves
    far less than the voice's own sampling noise does: with the noise off,
    log-mel distance 0.43 dB to the float voice, against 1.54 dB between
    two runs of the float voice with its noise on (notes/latency.md,
    stop 46). The decoder stays float32: it is small (~7 MB), and it
    makes the samples themselves.

    Symmetric (zero point 0), scale = max |w| / 127 per output channel
    (axis 0), round half to even: deterministic, so the fetch script can
    pin the result's sha256. Only float32 weights of rank >= 3 that feed
    nothing but `Conv` weight inputs, and of at least 4096 values, are
    stored this way; biases and small tensors stay as they are.
    """
    g = model.graph
    users = {}
    for n in g.node:
        for k, name in enumerate(n.input):
            users.setdefault(name, []).append((n.op_type, k))
    kept, added, dequant = [], [], []
    for init in g.initializer:
        w = numpy_helper.to_array(init)
        uses = users.get(init.name, [])
        if (
            w.dtype != np.float32
            or w.ndim < 3
            or w.size < 4096
            or not uses
            or any(use != ("Conv", 1) for use in uses)
        ):
            kept.append(init)
            continue
        amax = np.abs(w).reshape(w.shape[0], -1).max(axis=1)
        scale = np.where(amax > 0, amax / np.float32(127), np.float32(1)).astype(np.float32)
        shape = (w.shape[0],) + (1,) * (w.ndim - 1)
        q = np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8)
        added += [
            numpy_helper.from_array(q, init.name + "_int8"),
            numpy_helper.from_array(scale, init.name + "_scale"),
        ]
        dequant.append(
            helper.make_node(
                "DequantizeLinear",
                [init.name + "_int8", init.name + "_scale"],
                [init.name],
                name=init.name + "_dequantize",
                axis=0,
            )
        )
    if not dequant:
        sys.exit(f"{path}: no convolution weights to store in 8 bits")
    del g.initializer[:]
    g.initializer.extend(kept + added)
    nodes = dequant + list(g.node)
    del g.node[:]
    g.node.extend(nodes)
    print(f"{path}: {len(dequant)} convolution weights stored in 8 bits", file=sys.stderr)


def main(src, enc_out, dec_out, float_encoder=False):
    model = onnx.load(src)
    cut = decoder_input(model.graph, src)
    inputs = [i.name for i in model.graph.input]
    if inputs != ["input", "input_lengths", "scales"]:
        sys.exit(f"{src}: inputs {inputs}; only single-speaker voices are split")
    outputs = [o.name for o in model.graph.output]
    if outputs != ["output"]:
        sys.exit(f"{src}: outputs {outputs}; expected one 'output'")
    del model
    utils.extract_model(src, enc_out, inputs, [cut])
    utils.extract_model(src, dec_out, [cut], outputs)
    rename(enc_out, cut, LATENT, then=None if float_encoder else int8_conv_weights)
    rename(dec_out, cut, LATENT)


if __name__ == "__main__":
    args = sys.argv[1:]
    float_encoder = "--float-encoder" in args
    args = [a for a in args if a != "--float-encoder"]
    if len(args) != 3:
        sys.exit(__doc__)
    main(*args, float_encoder=float_encoder)
