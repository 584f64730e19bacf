"""Real files for the parser tests, generated on the fly: PDFs written with fpdf2 (encrypted with
pypdf), HTML pages with the usual chrome around the content, Markdown with a big table."""

from __future__ import annotations

from io import BytesIO

from fpdf import FPDF
from PIL import Image, ImageDraw
from pypdf import PdfReader, PdfWriter

PAGE1_TEXT = (
    "Centrifugal pumps need regular inspection of the impeller and the mechanical seal. A worn seal "
    "leaks fluid along the shaft and must be replaced before the bearings are damaged."
)
PAGE2_TEXT = (
    "Seal replacement is described on this second page. Drain the casing, remove the coupling guard "
    "and withdraw the rotating assembly before fitting the new seal faces."
)
AFTER_TABLE_TEXT = "Record every inspection in the maintenance log kept next to the pump."
PDF_TABLE = [
    ("Component", "Interval", "Action"),
    ("Mechanical seal", "6 months", "Check for leaks"),
    ("Bearings", "12 months", "Grease, check vibration"),
    ("Impeller", "24 months", "Inspect for cavitation"),
]
PDF_TABLE_MARKDOWN = (
    "| Component | Interval | Action |\n"
    "| --- | --- | --- |\n"
    "| Mechanical seal | 6 months | Check for leaks |\n"
    "| Bearings | 12 months | Grease, check vibration |\n"
    "| Impeller | 24 months | Inspect for cavitation |"
)


def _pdf(title: str = "") -> FPDF:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    if title:
        pdf.set_title(title)
    return pdf


def manual_pdf() -> bytes:
    """Two pages: a paragraph on page 1; a paragraph, a ruled table and a paragraph on page 2."""
    pdf = _pdf("Pump maintenance manual")
    pdf.add_page()
    pdf.multi_cell(0, 6, PAGE1_TEXT)
    pdf.add_page()
    pdf.multi_cell(0, 6, PAGE2_TEXT)
    pdf.ln(6)
    with pdf.table() as table:
        for row in PDF_TABLE:
            cells = table.row()
            for value in row:
                cells.cell(value)
    pdf.ln(6)
    pdf.multi_cell(0, 6, AFTER_TABLE_TEXT)
    return bytes(pdf.output())


def encrypted_pdf(user_password: str = "s3cret") -> bytes:
    """The manual encrypted with pypdf; an empty ``user_password`` gives an owner-password-only PDF."""
    writer = PdfWriter(clone_from=PdfReader(BytesIO(manual_pdf())))
    writer.encrypt(user_password=user_password, owner_password="owner-pass", algorithm="AES-128")
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def scanned_pdf() -> bytes:
    """Two pages that are only images (what a scanner produces without OCR)."""
    pdf = _pdf()
    for page in range(2):
        image = Image.new("RGB", (400, 200), "white")
        ImageDraw.Draw(image).rectangle((20, 20, 380, 60 + page * 40), outline="black", width=3)
        pdf.add_page()
        pdf.image(image, x=10, y=10, w=180)
    return bytes(pdf.output())


def many_pages_pdf(pages: int, paragraphs_per_page: int = 6, table_every: int = 3) -> bytes:
    """A longer document for timing: prose on every page, a table every ``table_every`` pages."""
    pdf = _pdf("Long report")
    for number in range(1, pages + 1):
        pdf.add_page()
        for paragraph in range(paragraphs_per_page):
            pdf.multi_cell(0, 5, f"Page {number}, paragraph {paragraph}. " + PAGE1_TEXT + " " + PAGE2_TEXT)
            pdf.ln(3)
        if number % table_every == 0:
            with pdf.table() as table:
                for row in PDF_TABLE:
                    cells = table.row()
                    for value in row:
                        cells.cell(value)
    return bytes(pdf.output())


ARTICLE_HTML = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Pump maintenance guide</title>
  <script>window.analytics = {track: function () {}};</script>
  <style>body { font-family: sans-serif; }</style>
</head>
<body>
  <header class="site-header">
    <a class="logo" href="/">Acme Docs</a>
    <nav><ul>
      <li><a href="/">Home</a></li><li><a href="/products">Products catalogue</a></li>
      <li><a href="/support">Support portal</a></li><li><a href="/about">About Acme</a></li>
    </ul></nav>
  </header>
  <div id="cookie-banner" class="cookie-consent">
    We use cookies to improve your browsing experience. <button>Accept all cookies</button>
  </div>
  <main>
    <article>
      <h1>Pump maintenance</h1>
      <p>Centrifugal pumps need regular inspection of the impeller and the mechanical seal. A worn
      seal leaks fluid along the shaft and must be replaced before the bearings are damaged.</p>
      <h2>Inspection intervals</h2>
      <p>The intervals below apply to pumps running continuously in clean water service; dirty or
      abrasive service halves every interval.</p>
      <table>
        <caption>Inspection schedule</caption>
        <thead><tr><th>Component</th><th>Interval</th><th>Action</th></tr></thead>
        <tbody>
          <tr><td>Mechanical seal</td><td>6 months</td><td>Check for leaks<br>along the shaft</td></tr>
          <tr><td rowspan="2">Bearings</td><td>12 months</td><td>Grease</td></tr>
          <tr><td>24 months</td><td>Check vibration | noise</td></tr>
        </tbody>
      </table>
      <h2>Replacing the seal</h2>
      <p>Drain the casing, remove the coupling guard and withdraw the rotating assembly. Fit the new
      seal faces without touching the lapped surfaces, then refill and vent the casing.</p>
    </article>
  </main>
  <aside class="related"><h3>Related articles</h3><ul><li><a href="/fans">Fan maintenance</a></li></ul></aside>
  <footer>
    <p>Copyright 2024 Acme Corporation. All rights reserved.</p>
    <p><a href="/privacy">Privacy policy</a> · <a href="/terms">Terms of use</a></p>
  </footer>
</body>
</html>
"""

HTML_TABLE_MARKDOWN = (
    "| Component | Interval | Action |\n"
    "| --- | --- | --- |\n"
    "| Mechanical seal | 6 months | Check for leaks along the shaft |\n"
    "| Bearings | 12 months | Grease |\n"
    "| Bearings | 24 months | Check vibration \\| noise |"
)

#: Phrases of the page chrome; none may reach a chunk.
HTML_BOILERPLATE = (
    "Acme Docs", "Products catalogue", "Support portal", "cookies", "Accept all", "Related articles",
    "Fan maintenance", "Copyright", "Privacy policy", "Terms of use", "analytics", "font-family",
)

#: The data table sits outside <article>, in a sidebar that the extractor drops.
SIDEBAR_TABLE_HTML = """<html><head><title>Model X200</title></head><body>
<div class="menu"><ul><li><a href="/a">Products</a></li><li><a href="/b">Support</a></li></ul></div>
<article><h1>Model X200 pump</h1>
<p>The X200 is a close-coupled centrifugal pump for clean water. It runs at 2900 rpm and suits
booster sets in small buildings, where quiet running matters.</p>
<p>Installation needs a level base, isolation valves on both sides and a non-return valve on the
discharge side.</p></article>
<div class="sidebar-specs"><h2>Technical data</h2>
<table><tr><th>Flow</th><th>Head</th></tr><tr><td>12 m3/h</td><td>40 m</td></tr>
<tr><td>18 m3/h</td><td>32 m</td></tr></table></div>
</body></html>
"""


def big_table_markdown(rows: int = 60) -> str:
    lines = [
        "# Parts catalogue",
        "",
        "Prices are in euros and exclude VAT. Stock levels are updated every night.",
        "",
        "## Spare parts",
        "",
        "| Part number | Description | Price | Stock |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| SP-{i:04d} | Replacement seal kit size {i} | {10 + i}.50 | {i * 3} units |" for i in range(rows)]
    lines += ["", "## Ordering", "", "Order through the portal; parts ship within two working days."]
    return "\n".join(lines) + "\n"
