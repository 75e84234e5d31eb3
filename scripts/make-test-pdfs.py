"""PDFs from reportlab and fpdf2 over Debian text (see make-test-pdfs.sh),
plus a text-less "scan" and a hand-made 3-line-per-page PDF."""
import sys, gzip, os
out = sys.argv[1]
src = open('/usr/share/doc/dpkg/spec/rootless-builds.txt', encoding='utf-8').read()
paras = [p.strip().replace('\n', ' ') for p in src.split('\n\n') if p.strip()]

from reportlab.lib.pagesizes import A4
from reportlab.platypus import SimpleDocTemplate, Paragraph, Spacer
from reportlab.lib.styles import getSampleStyleSheet
from xml.sax.saxutils import escape
ss = getSampleStyleSheet()
story = []
for p in paras:
    short = len(p) < 60 and not p.endswith('.')
    story.append(Paragraph(escape(p), ss['Heading2'] if short else ss['BodyText']))
    story.append(Spacer(1, 4))
SimpleDocTemplate(os.path.join(out, 'reportlab-rootless-builds.pdf'), pagesize=A4).build(story)

from fpdf import FPDF
txt = open('/usr/share/doc/dpkg/spec/triggers.txt', encoding='utf-8').read()
pdf = FPDF(); pdf.add_page(); pdf.set_font('Helvetica', size=10)
for line in txt.splitlines():
    pdf.multi_cell(0, 5, line.encode('latin-1', 'replace').decode('latin-1') or ' ', new_x='LMARGIN', new_y='NEXT')
pdf.output(os.path.join(out, 'fpdf2-triggers.pdf'))

# A "scan": shapes only, no text layer.
from reportlab.pdfgen import canvas
c = canvas.Canvas(os.path.join(out, 'scan-no-text.pdf'))
for i in range(40):
    c.rect(50 + i * 10, 400, 5, 200, fill=1)
c.showPage(); c.save()

# Hand-made: two pages of three lines each, one BT/ET per line, no fonts
# embedded (the kind of file a script writes).
def handmade(path, pages):
    objs = []
    kids = []
    objs.append(None)  # 1 catalog
    objs.append(None)  # 2 pages
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")  # 3
    for lines in pages:
        content = b"".join(
            b"BT /F1 12 Tf 72 %d Td (%s) Tj ET\n" % (720 - 20 * i, l.encode('latin-1'))
            for i, l in enumerate(lines))
        objs.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"endstream")
        cid = len(objs)
        objs.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % cid)
        kids.append(len(objs))
    objs[0] = b"<< /Type /Catalog /Pages 2 0 R >>"
    objs[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), len(kids))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    open(path, 'wb').write(out)

handmade(os.path.join(out, 'handmade-three-lines.pdf'), [
    ["The boiler pressure should read between 1 and 1.5 bar when cold.",
     "If it falls below 1 bar, top it up with the filling loop.",
     "Never let it rise above 2.5 bar while the heating runs."],
    ["Bleed the radiators once a year, starting downstairs.",
     "Close the bleed valve as soon as water appears.",
     "Check the pressure again afterwards and top it up."],
])
