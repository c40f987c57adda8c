"""report/report.html: the whole report in one file -- every section's table and every plot
(embedded as base64 PNG), with no external assets, so it can be mailed or opened offline.

Runs as the last report section (report.py orders them), and only when plots are on (`--plots`,
the default), like the PNGs it embeds.
"""

from __future__ import annotations

import base64
import html
import math
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tbscale.analysis.context import ReportContext, Section
from tbscale.analysis.context import fmt as _fmt
from tbscale.analysis.tables import settings_order
from tbscale.viewer import index_href

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
main{max-width:1280px;margin:0 auto;padding:24px 32px 64px}
h1{font-size:26px;margin:8px 0 4px} h2{font-size:19px;margin:34px 0 6px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#555;font-size:13px} .note{color:#444;font-size:13px;max-width:1100px;line-height:1.45}
.banner{background:#fff3cd;border:1px solid #e0c060;padding:10px 14px;border-radius:6px;font-weight:600;margin:14px 0}
nav{font-size:13px;columns:2;margin:12px 0} nav a{color:#0b5cad;text-decoration:none} nav li{margin:2px 0}
.tw{overflow-x:auto;background:#fff;border:1px solid #e3e3e3;border-radius:6px;margin:8px 0}
table{border-collapse:collapse;font-size:12.5px;white-space:nowrap}
th{background:#f0f2f5;text-align:left;padding:5px 9px;border-bottom:1px solid #d0d0d0;position:sticky;top:0}
td{padding:4px 9px;border-bottom:1px solid #eee} td.num{text-align:right;font-variant-numeric:tabular-nums}
tr:hover td{background:#f7faff} td.sig{font-weight:700;color:#0a6b2d}
figure{margin:10px 0 0;background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:8px;display:inline-block}
figure img{max-width:100%;height:auto;display:block}
"""


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not (isinstance(v, float) and math.isnan(v))


def _anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def table_html(sec: Section, setting_href=None) -> str:
    cols = list(sec.frame.columns)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    rows = []
    for _, row in sec.frame.iterrows():
        cells = []
        for c, v in row.items():
            text = html.escape(_fmt(v, c in sec.percent_cols))
            if setting_href and c == "setting" and isinstance(v, str):  # to the setting's trials in the viewer
                text = f'<a href="{html.escape(setting_href(v))}">{text}</a>'
            cls = "num" if _is_num(v) else ""
            if _is_num(v) and (str(c) == "p" or str(c).startswith("p ") or str(c) == "p_value") and v < 0.05:
                cls += " sig"
            cells.append(f'<td class="{cls.strip()}">{text}</td>' if cls else f"<td>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'<div class="tw"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def image_html(title: str, path: Path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return (f'<figure><img alt="{html.escape(title)}" src="data:image/png;base64,{data}">'
            f"</figure>")


def build_html(ctx: ReportContext) -> str:
    banner = ""
    if ctx.simulated:
        banner = ('<div class="banner">SIMULATED MODELS: these runs used tbscale\'s embedded simulated model '
                  "(sim/...), not a language model. The numbers exercise the harness and the strategies' "
                  "mechanics only.</div>")
    banner += "".join(f'<div class="banner">{html.escape(note)}</div>' for note in ctx.banners)
    toc, body = [], []
    one_run = len(ctx.run_dirs) == 1 and Path(ctx.out_dir).resolve() == (Path(ctx.run_dirs[0]) / "report").resolve()
    setting_href = (lambda name: index_href(setting=name)) if one_run else None
    viewer = (' &middot; trajectories: <a href="../view/index.html">viewer</a> (<code>tbscale view</code>)'
              if one_run else "")
    for sec in ctx.sections:
        a = "t-" + _anchor(sec.key)
        toc.append(f'<li><a href="#{a}">{html.escape(sec.title)}</a></li>')
        note = f'<p class="note">{html.escape(sec.note)}</p>' if sec.note else ""
        body.append(f'<section id="{a}"><h2>{html.escape(sec.title)}</h2>{note}{table_html(sec, setting_href)}</section>')
    for title, path in ctx.images:
        a = "f-" + _anchor(Path(path).stem)
        toc.append(f'<li><a href="#{a}">Figure: {html.escape(title)}</a></li>')
        body.append(f'<section id="{a}"><h2>{html.escape(title)}</h2>{image_html(title, path)}</section>')
    runs = ", ".join(html.escape(str(r)) for r in ctx.run_dirs)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    trials = len(ctx.df)
    settings = ", ".join(html.escape(s) for s in settings_order(ctx.df))
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>tbscale report</title>'
            f"<style>{CSS}</style></head><body><main><h1>tbscale report</h1>"
            f'<p class="meta">Runs: {runs}<br>Settings: {settings} &middot; {trials} trials &middot; '
            f"baseline: {html.escape(str(ctx.baseline or 'none'))} &middot; generated {stamp}{viewer}</p>{banner}"
            f"<nav><ul>{''.join(toc)}</ul></nav>{''.join(body)}</main></body></html>")


def write_html(ctx: ReportContext) -> Path:
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    path = ctx.out_dir / "report.html"
    path.write_text(build_html(ctx), encoding="utf-8")
    return path


def html_section(ctx: ReportContext) -> None:
    if ctx.plots:
        write_html(ctx)

