#!/usr/bin/env python3
"""Split openWakeWord's speech embedding into three stages that stream.

    split-wake-embedding.py embedding_model.onnx OUT_DIR

Why (issue 17, point 3): the embedding runs once per 80 ms frame on the
last 76 mel rows, 68 of which it already saw on the frame before, and it
is ~88 % of the wake word's CPU. Along time (the window's rows) every
convolution of the model is unpadded (kernels 3 or 1 tall, no time pads)
and every pooling is 2 or 1 tall with the same stride, 8 in all — exactly
one step of the window. So each stage's output rows for the new window
are the previous window's rows shifted by the step, plus a few new ones
that depend only on the last few input rows. Cut at the pools that halve
time, the model becomes:

- `embedding_stream_a.onnx`: mel rows [1, 1, T, 32] -> [1, 24, (T-4)/2, 16]
  (the first three convolutions and the first pool; 12 rows give the 4 new
  pooled rows of a step);
- `embedding_stream_b.onnx`: [1, 24, T, 16] -> [1, 72, (T-8)/2, 4]
  (eight convolutions, two pools; 12 rows give the 2 new rows);
- `embedding_stream_c.onnx`: [1, 72, 14, 4] -> [1, 1, 1, 96] (the rest,
  run whole: it is the cheap end).

The nodes, weights and attributes are the original's, unchanged; only the
time dimension of the stage inputs is left free (the original's first
Reshape, from [N, 76, 32, 1] to [N, 1, 76, 32], is dropped: earshot hands
stage A its rows already in that layout, the same bytes). Run whole, the
three stages are the original model; earshot checks at load that the
streamed embedding matches the whole model's on a probe window.

The output is deterministic for a given input and onnx version (the fetch
script pins both and each output's sha256).
"""
import sys

import onnx
from onnx import TensorProto, helper

STAGES = [
    # (file, first pool index that ends it (1-based), input channels, mels)
    ("embedding_stream_a.onnx", 1, 1, 32),
    ("embedding_stream_b.onnx", 3, 24, 16),
    ("embedding_stream_c.onnx", None, 72, 4),
]


def main(src, out_dir):
    model = onnx.load(src)
    graph = model.graph
    nodes = list(graph.node)
    if not nodes or nodes[0].op_type != "Reshape":
        sys.exit(f"{src}: not openWakeWord's embedding model (first node {nodes[0].op_type if nodes else None})")
    check_unpadded_in_time(nodes, src)
    inits = {i.name: i for i in graph.initializer}
    pools = [i for i, n in enumerate(nodes) if n.op_type == "MaxPool"]
    if len(pools) != 5:
        sys.exit(f"{src}: expected 5 pools, found {len(pools)}")
    start = 1
    first_input = nodes[0].output[0]
    for k, (name, pool, channels, mels) in enumerate(STAGES):
        end = pools[pool - 1] + 1 if pool else len(nodes)
        part = nodes[start:end]
        inp = first_input if k == 0 else nodes[start - 1].output[0]
        out = part[-1].output[0]
        used = sorted({i for n in part for i in n.input if i in inits})
        g = helper.make_graph(
            part,
            name.removesuffix(".onnx"),
            [helper.make_tensor_value_info(inp, TensorProto.FLOAT, [1, channels, "time", mels])],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["n", "channels", "rows", "width"])],
            [inits[u] for u in used],
        )
        m = helper.make_model(g, opset_imports=[o for o in model.opset_import if o.domain == ""])
        m.ir_version = model.ir_version
        m.producer_name = "earshot split-wake-embedding.py"
        onnx.checker.check_model(m)
        onnx.save(m, f"{out_dir}/{name}")
        start = end


def check_unpadded_in_time(nodes, src):
    """Stop if a layer is padded along time or strides other than its
    height: streaming would then not be exact."""
    for n in nodes:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type in ("Conv", "MaxPool"):
            pads = attrs.get("pads", [0, 0, 0, 0])
            if pads[0] or pads[2] or attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", b"VALID"):
                sys.exit(f"{src}: {n.name} is padded along time; cannot stream")
            if n.op_type == "Conv" and attrs.get("strides", [1, 1])[0] != 1:
                sys.exit(f"{src}: {n.name} strides along time; cannot stream")
            if n.op_type == "MaxPool" and attrs["strides"][0] != attrs["kernel_shape"][0]:
                sys.exit(f"{src}: {n.name} pools overlapping rows; cannot stream")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: split-wake-embedding.py embedding_model.onnx OUT_DIR")
    main(sys.argv[1], sys.argv[2])
