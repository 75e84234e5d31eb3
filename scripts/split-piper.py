#!/usr/bin/env python3
"""Split a Piper voice into its text-to-latent part and its vocoder.

    split-piper.py VOICE.onnx ENCODER.onnx DECODER.onnx

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

The nodes, weights and attributes are the original's, unchanged; only
the cut tensor is renamed `latent`. The cut is found, not assumed: it is
the one tensor every `/dec/` node reads from outside the decoder, and the
script refuses a voice where that is not so (a multi-speaker voice also
feeds the decoder its speaker embedding). earshot checks at load that
the windowed decoder gives the whole decoder's samples on a probe.

The output is deterministic for a given input and onnx version (the fetch
script pins both and each output's sha256).
"""
import sys

import onnx
from onnx import utils

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


def rename(path, old, new):
    model = onnx.load(path)
    g = model.graph
    for n in g.node:
        n.input[:] = [new if i == old else i for i in n.input]
        n.output[:] = [new if o == old else o for o in n.output]
    for v in list(g.input) + list(g.output):
        if v.name == old:
            v.name = new
    onnx.checker.check_model(model)
    onnx.save(model, path)


def main(src, enc_out, dec_out):
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
    rename(enc_out, cut, LATENT)
    rename(dec_out, cut, LATENT)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
