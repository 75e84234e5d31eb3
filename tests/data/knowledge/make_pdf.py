#!/usr/bin/env python3
"""Writes the small PDFs of the knowledge test corpus with no library:
corpus/houseplants.pdf (two pages of text, Helvetica, text layer),
pdfs/sized-headings-boiler.pdf (headings only by type size: a 20 pt
title, 15 pt sections, 11 pt body, as word processors write them) and
bad/notext.pdf (a page with only a drawn rectangle: no text layer).
bad/encrypted.pdf was made from houseplants.pdf with
`qpdf --encrypt user owner 256 -- corpus/houseplants.pdf bad/encrypted.pdf`.
Run from this folder: python3 make_pdf.py"""

PAGES = [
    [
        "Houseplant Care Guide",
        "",
        "Watering",
        "Water most houseplants when the top two centimetres of soil are dry.",
        "Ferns like evenly moist soil and should never dry out completely.",
        "Succulents and cacti need water only every two to three weeks in summer",
        "and about once a month in winter.",
        "",
        "Light",
        "A snake plant tolerates low light and can stand in a north-facing room.",
        "Fiddle leaf figs need bright indirect light near an east window.",
    ],
    [
        "Repotting",
        "Repot a houseplant in spring when roots grow out of the drainage holes.",
        "Choose a pot only two to five centimetres wider than the old one.",
        "",
        "Pests",
        "Spider mites leave fine webbing under the leaves; shower the plant",
        "and wipe the leaves with diluted neem oil once a week for a month.",
    ],
]


def esc(s):
    return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def text_stream(lines):
    out = ["BT", "/F1 12 Tf", "14 TL", "72 740 Td"]
    for line in lines:
        out.append(f"({esc(line)}) Tj T*")
    out.append("ET")
    return "\n".join(out).encode()


BOILER = [
    [
        (20, "Wall Boiler User Guide"),
        (11, ""),
        (15, "Water pressure"),
        (11, "The gauge on the front panel shows the pressure of the heating water."),
        (11, "With the system cold it should read between 1 and 1.5 bar; when the"),
        (11, "radiators are hot it may rise to about 2 bar, which is normal."),
        (11, "Below 0.8 bar the boiler locks out and shows fault F22 until the"),
        (11, "system is topped up with the filling loop under the casing."),
        (11, ""),
        (15, "Topping up"),
        (11, "Open both valves of the filling loop slowly and watch the gauge."),
        (11, "Close them as soon as the needle reaches 1.2 bar, then press reset."),
        (11, "Losing pressure every week points to a leak or a failed expansion"),
        (11, "vessel: call a registered engineer instead of refilling again."),
    ],
    [
        (15, "Frost protection"),
        (11, "Leave the boiler switched on at the mains during winter absences."),
        (11, "Its frost thermostat fires the burner when the water inside falls"),
        (11, "below 5 degrees, which protects the pipes in an unheated house."),
        (11, ""),
        (15, "Annual service"),
        (11, "Have the boiler serviced once a year by a qualified engineer, who"),
        (11, "checks the flue gases, cleans the heat exchanger and the condensate"),
        (11, "trap, and records the work in the service log at the back of this"),
        (11, "guide. A missed service can void the manufacturer's warranty."),
    ],
]


def sized_stream(lines):
    out = ["BT", "72 740 Td"]
    for size, line in lines:
        out.append(f"/F1 {size} Tf 0 -{round(size * 1.4)} Td ({esc(line)}) Tj")
    out.append("ET")
    return "\n".join(out).encode()


def write_pdf(path, streams):
    objs = []
    n_pages = len(streams)
    # 1 catalog, 2 pages, 3 font, then (page, content) pairs
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n_pages))
    objs.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objs.append(f"<< /Type /Pages /Kids [{kids}] /Count {n_pages} >>".encode())
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for i, s in enumerate(streams):
        content = 5 + 2 * i
        objs.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {content} 0 R >>".encode()
        )
        objs.append(b"<< /Length %d >>\nstream\n" % len(s) + s + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, o in enumerate(objs):
        offsets.append(len(out))
        out += f"{i + 1} 0 obj\n".encode() + o + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    with open(path, "wb") as f:
        f.write(out)


if __name__ == "__main__":
    write_pdf("corpus/houseplants.pdf", [text_stream(p) for p in PAGES])
    write_pdf("pdfs/sized-headings-boiler.pdf", [sized_stream(p) for p in BOILER])
    write_pdf("bad/notext.pdf", [b"0 0 1 rg\n100 100 200 200 re f"])
