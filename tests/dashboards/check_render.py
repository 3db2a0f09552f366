#!/usr/bin/env python3
"""Checks a PNG that dashboards/render/render.mjs drew of a dashboard (run by render.sh).

  1. the file is a valid PNG (signature, chunk CRCs, IHDR, IDAT that inflates to exactly the
     image's rows, IEND last) of the expected size: WIDTH px wide, and as tall as the
     dashboard's gridPos grid at Grafana's 30 px rows and 8 px margins (computed here, not read
     from the renderer) -- times SCALE;
  2. the report (render.mjs --report) lists every panel of the dashboard; in `data` mode, every
     panel whose queries use only metric families the exporter serves (EXPOSITION) returned
     series, and a panel with finite points was drawn: the page saw coloured pixels in its plot area (or
     showed its stat values);
  3. the pixels themselves (the PNG decoded here): every panel with finite points has coloured
     pixels in its plot area (as the page reports it; else its body) and no "NO DATA" badge
     (amber pixels) in its title bar; every panel without data has the badge and the amber
     "No data" text. In `empty` mode (a Prometheus without tlt metrics) every panel has no data.
Exit 0 if all hold, 1 otherwise (every failure is printed first).
Usage: check_render.py data|empty PNG REPORT_JSON DASHBOARD_JSON EXPOSITION_FILE|- WIDTH [SCALE]
"""
import json
import re
import struct
import sys
import zlib

mode, png_path, report_path, dashboard_path, exposition_path, width = sys.argv[1:7]
scale = float(sys.argv[7]) if len(sys.argv) > 7 else 1.0
width = int(width)
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


# ---- 1. PNG --------------------------------------------------------------------------------------
def read_png(path):
    """(width, height, rows of RGB bytes); raises ValueError on anything invalid."""
    b = open(path, "rb").read()
    if b[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("no PNG signature")
    pos, chunks = 8, []
    while pos < len(b):
        if pos + 12 > len(b):
            raise ValueError("truncated chunk at byte %d" % pos)
        n, typ = struct.unpack(">I4s", b[pos:pos + 8])
        data, crc = b[pos + 8:pos + 8 + n], b[pos + 8 + n:pos + 12 + n]
        if len(crc) != 4 or struct.unpack(">I", crc)[0] != zlib.crc32(typ + data):
            raise ValueError("bad CRC in chunk %r" % typ)
        chunks.append((typ, data))
        pos += 12 + n
    if not chunks or chunks[0][0] != b"IHDR" or chunks[-1][0] != b"IEND":
        raise ValueError("chunks do not start with IHDR and end with IEND")
    w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if depth != 8 or ctype not in (2, 6) or interlace != 0:
        raise ValueError("unexpected format: depth %d, colour type %d, interlace %d" % (depth, ctype, interlace))
    bpp = 3 if ctype == 2 else 4
    stride = w * bpp
    raw = zlib.decompress(b"".join(d for t, d in chunks if t == b"IDAT"))
    if len(raw) != h * (stride + 1):
        raise ValueError("IDAT inflates to %d bytes, not %d" % (len(raw), h * (stride + 1)))
    m7 = int.from_bytes(b"\x7f" * stride, "big")
    m8 = int.from_bytes(b"\x80" * stride, "big")
    prev, rows = bytes(stride), []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)]
        if f == 0:
            cur = line
        elif f == 2:  # Up: bytewise addition without carries, on the whole row at once
            a, p = int.from_bytes(line, "big"), int.from_bytes(prev, "big")
            cur = (((a & m7) + (p & m7)) ^ ((a ^ p) & m8)).to_bytes(stride, "big")
        elif f in (1, 3, 4):
            cur = bytearray(line)
            for i in range(stride):
                left = cur[i - bpp] if i >= bpp else 0
                if f == 1:
                    cur[i] = (cur[i] + left) & 255
                elif f == 3:
                    cur[i] = (cur[i] + ((left + prev[i]) >> 1)) & 255
                else:
                    up, ul = prev[i], prev[i - bpp] if i >= bpp else 0
                    p = left + up - ul
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                    cur[i] = (cur[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else ul)) & 255
            cur = bytes(cur)
        else:
            raise ValueError("bad filter type %d in row %d" % (f, y))
        rows.append(cur if bpp == 3 else bytes(c for i, c in enumerate(cur) if i % 4 != 3))
        prev = cur
    return w, h, rows


dashboard = json.load(open(dashboard_path))
panels = [p for p in dashboard["panels"] if p["type"] != "row"]
bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"])
# Grafana's grid: 30 px rows, 8 px margins; the renderer adds a 64 px header and 16 px padding.
want_h = round((64 + bottom * 38 - 8 + 16) * scale)
want_w = round(width * scale)
try:
    w, h, rows = read_png(png_path)
    if (w, h) != (want_w, want_h):
        fail("PNG is %dx%d, expected %dx%d" % (w, h, want_w, want_h))
except (OSError, ValueError, zlib.error) as e:
    fail("%s is not a valid PNG: %s" % (png_path, e))
    rows = None
    w = h = 0
print("PNG: %s, %dx%d" % (png_path, w, h))

# ---- 2. the report -----------------------------------------------------------------------------------
report = json.load(open(report_path))
by_id = {p["id"]: p for p in report["panels"]}
if sorted(by_id) != sorted(p["id"] for p in panels):
    fail("report panels %s are not the dashboard's %s" % (sorted(by_id), sorted(p["id"] for p in panels)))
if (report["width"], report["height"]) != (w, h):
    fail("report says %dx%d, the PNG is %dx%d" % (report["width"], report["height"], w, h))
exported = set()
if exposition_path != "-":
    exported = set(re.findall(r"^# TYPE (\S+) \S+$", open(exposition_path).read(), re.M))


def families(exprs):
    names = set()
    for e in exprs:
        e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', e)
        for n in re.findall(r"\btlt_[a-z0-9_]+", e):
            base = re.sub(r"_(bucket|sum|count)$", "", n)  # histogram series -> the family
            names.add(base if base in exported else n)
    return names


for p in report["panels"]:
    name = 'panel %d "%s"' % (p["id"], p["title"])
    if p["errors"]:
        fail("%s: query errors: %s" % (name, p["errors"]))
    if mode == "empty":
        if not p["noData"] or p["marked"] != "No data":
            fail("%s: has data (or is not marked No data) on a Prometheus without tlt metrics" % name)
        continue
    fams = families(p["exprs"])
    if fams and fams <= exported and p["series"] == 0:
        fail("%s: its metrics %s are exported, but its queries returned no series" % (name, sorted(fams)))
    if p["noData"]:
        if p["marked"] != "No data":
            fail("%s: no data, but not marked so in the page (marked: %r)" % (name, p["marked"]))
    else:
        d = p["drawn"] or {}
        if d.get("kind") == "pixels" and not d.get("pixels", 0) > 0:
            fail("%s: %d points, but no coloured pixel in its plot" % (name, p["points"]))
        elif d.get("kind") == "values" and not d.get("values", 0) >= 1:
            fail("%s: %d points, but no value shown" % (name, p["points"]))
        elif d.get("kind") not in ("pixels", "values"):
            fail("%s: %d points, but the page drew nothing (%r)" % (name, p["points"], d))

# ---- 3. the pixels ---------------------------------------------------------------------------------------
TITLE_H = 32
WARN = {"dark": (0xf5, 0xb7, 0x3d), "light": (0xb3, 0x6b, 0x00)}


def count(rect, pred):
    x0, y0 = max(0, round(rect[0] * scale)), max(0, round(rect[1] * scale))
    x1, y1 = min(w, round((rect[0] + rect[2]) * scale)), min(h, round((rect[1] + rect[3]) * scale))
    n = 0
    for y in range(y0, y1):
        row = rows[y]
        for i in range(3 * x0, 3 * x1, 3):
            if pred(row[i], row[i + 1], row[i + 2]):
                n += 1
    return n


def coloured(r, g, b):
    return max(r, g, b) - min(r, g, b) >= 48


if rows is not None:
    bg = rows[2][6:9]
    theme = "light" if sum(bg) > 3 * 128 else "dark"
    wr, wg, wb = WARN[theme]

    def amber(r, g, b):
        return abs(r - wr) + abs(g - wg) + abs(b - wb) < 60

    for p in report["panels"]:
        name = 'panel %d "%s"' % (p["id"], p["title"])
        x, y, pw, ph = p["rect"]["x"], p["rect"]["y"], p["rect"]["w"], p["rect"]["h"]
        title = (x + 2, y + 2, pw - 4, TITLE_H - 4)
        body = (x + 2, y + TITLE_H, pw - 4, ph - TITLE_H - 2)
        badge = count(title, amber)
        if p["noData"]:
            text = count(body, amber)
            if badge < 20 or text < 50:
                fail("%s: no data, but the PNG shows no amber NO DATA badge (%d px) or text (%d px)"
                     % (name, badge, text))
        else:
            plot = (p["drawn"] or {}).get("plot")  # the plot area, without the legend's swatches
            n = count((plot["x"], plot["y"], plot["w"], plot["h"]) if plot else body, coloured)
            if badge:
                fail("%s: has data, but its title bar has %d amber (NO DATA) pixels" % (name, badge))
            if n < 30:
                fail("%s: %d points, but only %d coloured pixels in the PNG's plot area"
                     % (name, p["points"], n))
            else:
                print("%s: %d series, %d points, %d coloured px in the PNG" % (name, p["series"], p["points"], n))

n_data = sum(1 for p in report["panels"] if not p["noData"])
print("%s: %d panels, %d with data, %d marked No data" % (
    "FAIL" if failures else "ok", len(report["panels"]), n_data, len(report["panels"]) - n_data))
sys.exit(1 if failures else 0)
