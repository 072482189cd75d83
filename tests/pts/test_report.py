"""The PTS report (pts/report.py, docs/pts-report.md) rendered from a synthetic report folder
written per the runner/report contract (report_fixture.py): every figure is there with the
CSV and JSON behind it, the page needs nothing outside the folder, the summary tells each
test's status, missing files are named on the page, compare() sets two reports side by side.
Headless Chromium loads the page, checks every figure decodes and takes a screenshot."""

from __future__ import annotations

import base64
import csv
import fcntl
import html
import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

try:  # pytest puts tests/pts on sys.path (no __init__.py); the relative form if it becomes a package
    from report_fixture import make_report
except ImportError:  # pragma: no cover
    from .report_fixture import make_report  # type: ignore[no-redef]

from ssdtwin.pts import plots, report
from ssdtwin.pts.target import PtsError

# The figures each test's page must have (file stems under <test>/plots/).
EXPECTED = {
    "iops": {
        "convergence",
        "window-rnd-4kib-100-w-iops",
        "window-rnd-64kib-65-35-iops",
        "window-rnd-1024kib-100-r-iops",
        "iops-2d",
        "iops-3d",
    },
    "tp": {"convergence", "window-seq-128kib-100-w-mb-s", "window-seq-1024kib-100-w-mb-s", "tp-bars"},
    "lat": {"convergence", "window-rnd-4kib-100-w-mean-latency", "lat-bars", "histograms"},
    "wsat": {"wsat-time", "wsat-fills", "wsat-fills-log", "wsat-latency", "histograms"},
    "hir": {"convergence", "window-rnd-4kib-100-w-iops-pre-hir", "hir-overview", "hir-wait-states"},
    "curve": {"convergence", "window-rnd-4kib-70-30-iops-preconditioning", "curve"},
}


class Page(HTMLParser):
    """The references and figures of a rendered page."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.figures: list[str] = []  # figure ids
        self.imgs: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for key in ("src", "href", "data", "action", "poster"):
            if a.get(key):
                self.refs.append((tag, key, str(a[key])))
        if tag == "figure":
            self.figures.append(str(a.get("id")))
        if tag == "img":
            self.imgs.append(str(a.get("src")))


@pytest.fixture(scope="session")
def full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The full report, rendered once per pytest run: under pytest-xdist the workers share
    it (the base temp's parent is the run's own directory), under a file lock."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder = root / "pts-report-full"
    with (root / "pts-report-full.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "index.html").is_file():
            make_report(folder)
            report.render(folder)
    return folder


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = make_report(tmp_path_factory.mktemp("pts") / "cm6-int", tests=("lat", "wsat"), interrupt=("lat", 3))
    report.render(folder)
    return folder


def test_every_figure_is_embedded_with_its_csv_and_json(full: Path) -> None:
    page = Page((full / "index.html").read_text())
    for test, names in EXPECTED.items():
        for name in names:
            assert f"fig-{test}-{name}" in page.figures, f"{test}: figure {name} missing from the page"
            stem = full / test / "plots" / name
            for ext in (".png", ".csv", ".json"):
                assert stem.with_suffix(ext).stat().st_size > 0, f"{stem}{ext} empty or missing"
            with stem.with_suffix(".csv").open() as f:
                rows = list(csv.DictReader(f))
            doc = json.loads(stem.with_suffix(".json").read_text())
            assert rows and len(doc["data"]) == len(rows), f"{stem}: JSON and CSV disagree"
            assert doc["columns"] == list(rows[0]) and doc["test"] == test
    assert len(page.imgs) == sum(len(v) for v in EXPECTED.values())
    for src in page.imgs:
        assert src.startswith("data:image/png;base64,")
        png = base64.b64decode(src.split(",", 1)[1])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000  # a drawn figure, not an empty canvas


def test_page_needs_nothing_outside_the_folder(full: Path) -> None:
    html = (full / "index.html").read_text()
    page = Page(html)
    assert "<link" not in html and not re.search(r"<script[^>]+src=", html), "external stylesheet or script"
    for tag, attr, value in page.refs:
        if value.startswith(("data:", "#")):
            continue
        assert not re.match(r"^[a-z]+:|^//", value), f"<{tag} {attr}={value}> leaves the folder"
        assert (full / value).is_file(), f"<{tag} {attr}={value}>: no such file in the report"


def test_every_job_file_and_fio_json_is_linked(full: Path) -> None:
    linked = {v for _t, a, v in Page((full / "index.html").read_text()).refs if a == "href"}
    on_disk = {p.relative_to(full).as_posix() for sub in ("jobs", "fio") for p in full.glob(f"*/{sub}/*")}
    assert len(on_disk) > 1000
    assert on_disk - linked == set()


def test_summary_says_each_tests_status(full: Path, interrupted: Path) -> None:
    html = (full / "index.html").read_text()
    steady_round = json.loads((full / "iops" / "steady.json").read_text())["steady_round"]
    assert f"steady at round {steady_round} (measurement window rounds {steady_round - 4}–{steady_round})" in html
    assert "NOT in steady state after 25 rounds" in html  # tp: the fixture never settles
    assert "complete: 4.0 drive fills written" in html
    assert "the wait states are not scaled" in html  # hir/result.json extra.notes
    html = (interrupted / "index.html").read_text()
    assert "interrupted after round 3" in html and "The run was interrupted (Ctrl-C)" in html
    assert "missing:" not in html  # what a stopped test never wrote is not reported as a fault
    assert "not run (the run stopped before this test)" in html  # wsat never started
    assert "fig-lat-convergence" in html and "Traceback" not in html


def test_a_running_test_shows_its_rounds_so_far(interrupted: Path, tmp_path: Path) -> None:
    """Rendered mid-run (pts.json says running, no result.json yet): the round reached comes
    from rounds.csv, and what the test has not written yet is not a fault."""
    folder = tmp_path / "running"
    shutil.copytree(interrupted, folder)
    manifest = json.loads((folder / "pts.json").read_text())
    manifest["interrupted"] = False
    manifest["tests"]["lat"]["status"] = "running"
    (folder / "pts.json").write_text(json.dumps(manifest))
    for name in ("result.json", "steady.json", "table.csv"):
        (folder / "lat" / name).unlink()
    html = report.render(folder).read_text()
    assert "running: round 3 done" in html and "The run is not complete" in html
    assert "not written yet (the test did not finish): lat/table.csv" in html and "missing:" not in html


def test_tables_show_the_window_averages(full: Path) -> None:
    with (full / "iops" / "table.csv").open() as f:
        row = next(r for r in csv.DictReader(f) if r["bs"] == "4KiB")
    html = (full / "iops" / "..").joinpath("index.html").read_text()
    assert f"<td>{float(row['0/100']):,.0f}</td>" in html
    steady = json.loads((full / "iops" / "steady.json").read_text())
    var = steady["variables"][0]
    doc = json.loads((full / "iops" / "plots" / "window-rnd-4kib-100-w-iops.json").read_text())
    assert doc["avg"] == pytest.approx(var["avg"]) and doc["slope_excursion"] == pytest.approx(var["slope_excursion"])
    assert [r["round"] for r in doc["data"]] == var["rounds"]
    assert sum(r["in_window"] for r in doc["data"]) == 5


def test_percentiles_from_histogram_bins() -> None:
    frame = pd.DataFrame(
        {"lo_us": [1.0, 2.0, 5.0, 1.0], "hi_us": [2.0, 3.0, 6.0, 2.0], "count": [90, 9, 1, 7], "ddir": ["read"] * 3 + ["write"]}
    )
    read, write = plots.hist_percentiles(frame)
    assert read == {"ddir": "read", "ios": 100, "p50_us": 2.0, "p99_us": 3.0, "p99.9_us": None, "p99.99_us": None,
                    "p99.999_us": None, "p99.9999_us": None}  # fmt: skip
    assert write["ios"] == 7 and write["p50_us"] == 2.0 and write["p99_us"] is None


def test_missing_and_damaged_files_are_named_on_the_page(tmp_path: Path) -> None:
    folder = make_report(tmp_path / "r", tests=("tp", "curve", "hir"))
    (folder / "tp" / "steady.json").unlink()
    (folder / "tp" / "table.csv").write_text("bs_bytes,oops\n1,2\n")
    (folder / "hir" / "table.csv").write_bytes(b"\xff\xfe\x00garbage")
    shutil.rmtree(folder / "curve")
    result = json.loads((folder / "hir" / "result.json").read_text())
    (folder / "hir" / "result.json").write_text(json.dumps({**result, "status": "failed", "message": "fio exited with 1"}))
    html = report.render(folder).read_text()
    assert "failed: fio exited with 1" in html
    assert "columns read_mb_s, write_mb_s absent in: tp/table.csv" in html
    assert "unreadable (" in html and "hir/table.csv" in html
    assert "missing: curve/ not found in the report folder" in html
    assert "fig-hir-convergence" in html  # what is there is still drawn
    assert "Traceback" not in html


def test_malformed_documents_are_named_not_raised(tmp_path: Path) -> None:
    """Wrong JSON types and unparsable numbers: notes on the page, never a traceback."""
    doc = {"format": "ssdtwin-pts", "device": "x", "settings": None, "tests": {"iops": {"status": "steady"}, "tp": 5}}
    (tmp_path / "pts.json").write_text(json.dumps(doc))
    (tmp_path / "iops").mkdir()
    (tmp_path / "iops" / "result.json").write_text(json.dumps({"status": "steady", "settings": [1], "extra": "x", "window": "bad"}))
    (tmp_path / "iops" / "steady.json").write_text(json.dumps({"variables": [{"name": "v", "rounds": [1, 2], "values": ["a", None]}]}))
    (tmp_path / "iops" / "rounds.csv").write_text("round,read_pct,bs_bytes,iops\n1,,4096,abc\n")
    html = report.render(tmp_path).read_text()
    for text in ("field &#34;device&#34; is not an object", "tests.tp is not an object", "convergence: could not be drawn (",
                 "window v: could not be drawn (ValueError", "missing: iops/table.csv"):  # fmt: skip
        assert text in html


@pytest.mark.parametrize("value", [1e300, -1, 0, float("nan"), float("inf"), "abc", 1.5, True])
def test_hostile_numbers_in_pts_json_are_named_not_raised(tmp_path: Path, value: Any) -> None:
    """A queue depth, thread count or capacity in pts.json that is no whole number in range
    (nan, inf, "abc" were a ValueError/OverflowError traceback of 59 lines from `ssdtwin pts
    report`): one note naming the file, the field and its range; the page shows it as written."""
    doc = {
        "format": "ssdtwin-pts",
        "device": {"capacity_bytes": value, "lba_bytes": 512},
        "settings": {"tc_qd": {"lat": {"tc": 1, "qd": value}, "tp": [value, 32]}},
        "tests": {"lat": {"status": "pending"}, "tp": {"status": "pending"}},
    }
    (tmp_path / "pts.json").write_text(json.dumps(doc))
    html = report.render(tmp_path).read_text()
    for field in ("settings.tc_qd.lat", "settings.tc_qd.tp"):
        assert f"pts.json: {field} is not threads 1..256 x queue depth 1..65536 (whole numbers); shown as written" in html
    whole_bytes = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    assert ("pts.json: device.capacity_bytes is not a whole number of bytes from 0 to 2^64" in html) != whole_bytes


def test_a_folder_that_is_not_a_report_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PtsError, match="not a PTS report \\(no pts.json\\)"):
        report.render(tmp_path)
    (tmp_path / "pts.json").write_text('{"format": "fio"}')
    with pytest.raises(PtsError, match='field "format" must be "ssdtwin-pts"') as e:
        report.render(tmp_path)
    assert "\n" not in str(e.value)
    (tmp_path / "pts.json").write_text("{")
    with pytest.raises(PtsError, match="pts.json: unreadable: JSONDecodeError"):
        report.compare(tmp_path, tmp_path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_compare_sets_two_reports_side_by_side(tmp_path: Path) -> None:
    tests = ("iops", "tp")
    a = make_report(tmp_path / "a", tests=tests)
    b = make_report(tmp_path / "b", tests=(*tests, "curve"), gain=0.55, seed=2, model="KCD6XLUL3T84")
    out = report.compare(a, b, tmp_path / "diff")
    html = out.read_text()
    page = Page(html)
    assert {"fig-iops-tracking", "fig-iops-iops-2d", "fig-iops-iops-diff", "fig-tp-tp-bars"} <= set(page.figures)
    assert "A: KCM6XRUL3T84 (a)" in html and "B: KCD6XLUL3T84 (b)" in html
    assert "curve: not in A: KCM6XRUL3T84 (a); nothing to compare" in html
    for tag, attr, value in page.refs:
        assert value.startswith(("data:", "#")) or (out.parent / value).resolve().is_file(), f"<{tag} {attr}={value}>"
    with (tmp_path / "diff" / "iops" / "plots" / "iops-diff.csv").open() as f:
        cell = next(r for r in csv.DictReader(f) if r["bs_bytes"] == "4096")
    # B's writes run at 0.55x A's: 100 % writes differ by about -45 %, 100 % reads hardly.
    assert -50 < float(cell["0/100"]) < -40 and abs(float(cell["100/0"])) < 8
    # Refusals: into one of the reports, or into a folder that is something else.
    with pytest.raises(PtsError, match="must go to its own folder"):
        report.compare(a, b, a)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(PtsError, match="is not a previous comparison"):
        report.compare(a, b, tmp_path / "other")
    assert report.compare(a, b, tmp_path / "diff") == out  # a previous comparison is replaced
    with pytest.raises(PtsError, match="not a PTS report"):
        report.compare(a, tmp_path / "other", tmp_path / "diff2")


def test_module_entry_point(interrupted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report.main([str(interrupted)]) == 0
    assert capsys.readouterr().out.strip() == str(interrupted / "index.html")
    assert report.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "no pts.json" in err


def test_templates_are_package_data() -> None:
    """maturin puts every file under python/ssdtwin into the wheel (as it does py.typed and
    _core.pyi); the report loads its templates from next to the module."""
    templates = Path(report.__file__).parent / "templates"
    assert {p.name for p in templates.glob("*.j2")} >= {"base.html.j2", "report.html.j2", "compare.html.j2", "_blocks.html.j2"}


# ---------------------------------------------------------------------------------------
# In a browser: headless Chromium (Debian's chromium package; CI installs it).

CHROMIUM = report.find_chromium()
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (Debian: apt install chromium)")


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless=new", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=120, check=True)


@pytest.mark.tools
@needs_chromium
def test_the_report_loads_in_headless_chromium(full: Path, tmp_path: Path) -> None:
    """Every figure decodes (the page's own script counts <img> with naturalWidth > 0 into
    body[data-figures-ok]), no console message or uncaught error, and a screenshot."""
    url = (full / "index.html").resolve().as_uri()
    run = chromium(tmp_path, "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000", "--dump-dom", url)
    figures = sum(len(v) for v in EXPECTED.values())
    assert f'data-figures-ok="{figures}/{figures}"' in run.stdout
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == []
    for page, height in (("summary", 1400), ("iops", 4400)):  # the summary, and the IOPS page alone (#iops)
        shot = tmp_path / f"{page}.png"
        chromium(tmp_path, f"--window-size=1200,{height}", f"--screenshot={shot}", f"{url}#{page}")
        png = shot.read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == 1200 and len(png) > 50_000
    if os.environ.get("SSDTWIN_UPDATE_DOCS_IMG"):  # docs/pts-report.md: how the screenshot is made
        shutil.copy(tmp_path / "iops.png", Path(__file__).resolve().parents[2] / "docs" / "img" / "pts-iops.png")


def test_pdf_without_chromium_is_one_line(interrupted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSDTWIN_CHROMIUM", str(tmp_path / "no-such-chromium"))
    with pytest.raises(PtsError, match="could not print .* to PDF: FileNotFoundError") as e:
        report.print_pdf(interrupted / "index.html", tmp_path / "report.pdf")
    assert "\n" not in str(e.value) and not (tmp_path / "report.pdf").exists()


def test_report_pdf_prints_the_pdfs_path(interrupted: Path, tmp_path: Path) -> None:
    """`ssdtwin pts report DIR --pdf` (and `python -m ssdtwin.pts.report DIR --pdf`) print
    where report.pdf is, on stdout after index.html's. Was: only the index.html path. A
    stand-in for Chromium writes the PDF (SSDTWIN_CHROMIUM), so this runs without one."""
    from twin import run_cli

    folder = tmp_path / "rep"
    shutil.copytree(interrupted, folder)
    fake = tmp_path / "chromium"
    fake.write_text(
        '#!/bin/sh\nfor a in "$@"; do case "$a" in\n'
        "  --print-to-pdf=*) printf '%%PDF-1.4 stand-in' > \"${a#--print-to-pdf=}\";;\nesac; done\n"
    )
    fake.chmod(0o755)
    r = run_cli("pts", "report", folder, "--pdf", env={**os.environ, "SSDTWIN_CHROMIUM": str(fake)})
    assert r.stdout.splitlines() == [f"report: {folder / 'index.html'}", f"pdf: {folder / 'report.pdf'}"], r.stdout
    assert (folder / "report.pdf").read_bytes().startswith(b"%PDF-") and r.stderr == ""
    m = subprocess.run(
        [sys.executable, "-m", "ssdtwin.pts.report", str(folder), "--pdf"],
        capture_output=True,
        text=True,
        env={**os.environ, "SSDTWIN_CHROMIUM": str(fake)},
        timeout=120,
    )
    assert m.returncode == 0 and m.stdout.splitlines() == [str(folder / "index.html"), str(folder / "report.pdf")], m


def test_a_table_block_is_one_element_the_print_css_keeps_whole(full: Path) -> None:
    """A table's title, the table and the caption under it are one element, which the print
    style keeps on one page; headings stay with what follows them."""
    page = (full / "index.html").read_text()
    blocks = re.findall(r'<div class="table-block">\s*<h3>.*?</table>\s*(<div class="caption">.*?</div>)?\s*</div>', page, re.S)
    assert len(blocks) == page.count('<div class="table-block">') >= 5 and any(blocks)
    print_css = page.split("@media print {")[1].split("</style>")[0]
    assert re.search(r"[^}]*\.table-block[^{]*\{\s*break-inside: avoid;", print_css)
    assert re.search(r"h3[^{]*\{\s*break-after: avoid;", print_css)


PDFTOTEXT = shutil.which("pdftotext")


@pytest.mark.tools
@needs_chromium
@pytest.mark.skipif(PDFTOTEXT is None, reason="pdftotext not installed (Debian: apt install poppler-utils)")
def test_pdf_prints_each_table_with_its_title_and_caption(full: Path, tmp_path: Path) -> None:
    """In report.pdf every table block's title and caption are on one page. Was: the WSAT
    page's percentile table began at the foot of a page and its caption ended on the next."""
    assert PDFTOTEXT is not None
    pdf = report.print_pdf(full / "index.html", tmp_path / "report.pdf")
    text = subprocess.run([PDFTOTEXT, "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    pages = [re.sub(r"\s+", " ", p) for p in text.split("\f")]
    page = (full / "index.html").read_text()
    blocks = re.findall(r'<h3>([^<]*)<span class="links">(?:(?!<h3>).)*?</table>\s*<div class="caption">(.*?)</div>', page, re.S)
    assert len(blocks) >= 3
    at = 0  # blocks follow each other down the pages (two tests share a title)
    for title, caption in blocks:
        title = re.sub(r"\s+", " ", html.unescape(title)).strip()[:40]
        caption = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", caption))).strip()[:40]
        at = next(i for i in range(at, len(pages)) if title in pages[i])
        assert caption in pages[at], (title, caption, at)


@pytest.mark.tools
@needs_chromium
def test_pdf(interrupted: Path, tmp_path: Path) -> None:
    pdf = report.print_pdf(interrupted / "index.html", tmp_path / "report.pdf")
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF-") and len(data) > 50_000
