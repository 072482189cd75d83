"""The SNIA PTS report: one self-contained HTML file from a report folder (docs/pts-report.md).

``render(folder)`` reads what the harness wrote (pts.json, and per test rounds.csv,
steady.json, table.csv, hist-*.csv, result.json, jobs/, fio/) and writes ``index.html``: a
summary of every test's status with links to every job file and fio JSON, then one page per
test with the SNIA header, the steady-state convergence and measurement-window plots, the
tabular result and the test's own figures. The plots are PNGs embedded as data: URIs (the
file needs nothing else and no network); the table behind every figure is written next to
it as ``<test>/plots/<figure>.csv`` and ``.json`` (and the PNG). A missing or unreadable
file makes the page say so; it never stops the report.

``compare(a, b, out)`` sets two reports side by side per figure (overlaid, A solid, B
dashed) with every table as A, B and the difference in % of A.

Re-render a folder by hand: ``python -m ssdtwin.pts.report FOLDER [--pdf]``.

Where the rest lives: parts.py (blocks, the folder read defensively, the figure sink, the
header, the HTML writer), pages.py (one page per test), compare.py (two reports).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

from ..records import FolderJson
from ..target import PtsError
from ..tests import TITLES
from .compare import compare
from .pages import build_page, test_ids
from .parts import header, load_manifest, note, one_line, software, tc_qd_text, write_html

__all__ = ["render", "compare", "print_pdf", "find_chromium", "main"]

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def render(folder: Path, pdf: bool = False) -> Path:
    """Write <folder>/index.html (and the figures' files under <folder>/<test>/plots/);
    with ``pdf``, also <folder>/report.pdf through headless Chromium. Returns index.html."""
    folder = Path(folder)
    manifest = load_manifest(folder)
    pages = [build_page(folder, manifest, t) for t in test_ids(manifest)]
    device = manifest.get("device") or {}
    title = " ".join(str(x) for x in (device.get("vendor"), device.get("model")) if x) or folder.name
    banner = []
    if manifest.get("interrupted"):
        banner.append(note("The run was interrupted (Ctrl-C): the report holds the rounds done so far.", "warn"))
    elif not manifest.get("complete"):
        banner.append(note("The run is not complete (still running, or it stopped): the report holds the rounds done so far.", "warn"))
    if not pages:
        banner.append(note("pts.json lists no tests.", "missing"))
    banner += [note(text, "missing") for text in manifest.get("_problems") or []]
    run_header = header(manifest, "", None)
    index = write_html(
        folder / "index.html",
        "report.html.j2",
        title=f"SNIA PTS report: {title}",
        manifest=manifest,
        pages=pages,
        banner=banner,
        generated_by=software(),
        device_items=run_header[0][1],
        platform_items=run_header[1][1],
        settings_items=run_header[2][1] + _tc_qd_items(manifest),
    )
    if pdf:
        print_pdf(index, folder / "report.pdf")
    return index


def _tc_qd_items(manifest: FolderJson) -> list[tuple[str, str]]:
    tc = (manifest.get("settings") or {}).get("tc_qd")
    run = set(test_ids(manifest))
    if isinstance(tc, dict):  # the tests of this run only: the settings hold every test's default
        return [(f"TC/QD {TITLES.get(t, t)}", tc_qd_text(v)) for t, v in tc.items() if t in run or not run]
    return [("TC/QD", str(tc))] if tc else []


def find_chromium() -> Optional[str]:
    override = os.environ.get("SSDTWIN_CHROMIUM")
    if override:
        return override
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def print_pdf(html: Path, pdf: Path, timeout_s: float = 120.0) -> Path:
    """Print a rendered report to PDF with headless Chromium (one test per page)."""
    chromium = find_chromium()
    if chromium is None:
        raise PtsError(f"PDF needs Chromium (Debian: apt install chromium; or set SSDTWIN_CHROMIUM); {html} is written")
    cmd = [
        chromium,
        "--headless=new",
        "--disable-gpu",
        "--no-sandbox",
        "--no-pdf-header-footer",
        f"--print-to-pdf={pdf}",
        html.resolve().as_uri(),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PtsError(f"{chromium}: could not print {html} to PDF: {one_line(e)}") from None
    if proc.returncode != 0 or not pdf.is_file() or pdf.stat().st_size == 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise PtsError(f"{chromium}: printing {html} to PDF failed (exit {proc.returncode}): {last}")
    return pdf


def main(argv: Optional[list[str]] = None) -> int:
    """Re-render a report folder: ``python -m ssdtwin.pts.report FOLDER [--pdf]``, or compare
    two: ``python -m ssdtwin.pts.report A B --compare OUT``. Prints the index.html path (and,
    with ``--pdf``, report.pdf's on the next line)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m ssdtwin.pts.report", description="Render (or compare) SNIA PTS report folders.")
    ap.add_argument("folders", nargs="+", type=Path, help="a report folder (or two with --compare)")
    ap.add_argument("--pdf", action="store_true", help="also print report.pdf with headless Chromium")
    ap.add_argument("--compare", type=Path, metavar="OUT", help="compare the two report folders into OUT")
    args = ap.parse_args(argv)
    try:
        if args.compare is not None:
            if len(args.folders) != 2:
                raise PtsError("--compare needs exactly two report folders")
            path = compare(args.folders[0], args.folders[1], args.compare)
        else:
            if len(args.folders) != 1:
                raise PtsError("render takes one report folder (use --compare OUT for two)")
            path = render(args.folders[0], pdf=args.pdf)
    except PtsError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    except KeyboardInterrupt:
        return 130
    sys.stdout.write(f"{path}\n")
    if args.pdf and args.compare is None:
        sys.stdout.write(f"{path.parent / 'report.pdf'}\n")
    return 0
