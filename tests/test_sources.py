"""Sources: the repository cites public documents, never files that are not in it.

(1) No file tracked by git names the project's private research notes or their directory;
    README, --help, docs and preset sources cite documents by the keys of docs/sources.md.
(2) Every preset parameter is a `{ value, source }` entry whose source starts with one of the
    marks docs/sources.md defines, and every [SRC] source names a document listed there.
(3) Every [ASSUMED] preset parameter says why, has a bracket in docs/sources.md ("Brackets of
    the assumed preset parameters": range and what it changes), and an "as X" in its source
    holds X's value still (X's figure changed under a copy that kept the old one).

Pure Python and fast: it reads files from the checkout and needs no compiled extension.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRESETS = ROOT / "crates" / "ssdtwin-core" / "presets"
SOURCES = ROOT / "docs" / "sources.md"

# The private notes, spelled so that this file does not match itself.
PRIVATE = re.compile(r"\b(?:theory|formats|peers|style|DESIGN)\.md\b|seed[-]facts|/work/share[d]\b")
MARKS = ("[SRC]", "[DERIVED]", "[ASSUMED]", "[CALIBRATED]")
# [drive] entries that name the preset rather than state a measured or published figure.
IDENTITY = {"name", "vendor", "model", "summary", "firmware"}
# Tables of feature switches (booleans that turn a log page on), not parameters.
SWITCHES = {"logs"}


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [ROOT / name for name in out.decode().split("\0") if name]


def load_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib.loads(path.read_text())
    import tomlkit

    return tomlkit.parse(path.read_text()).unwrap()


def source_keys() -> list[str]:
    """The bold keys of the bibliography tables of docs/sources.md."""
    return re.findall(r"^\| \*\*(.+?)\*\* \|", SOURCES.read_text(), re.MULTILINE)


def presets() -> list[Path]:
    return sorted(PRESETS.glob("*.toml"))


def sourced_entries(doc: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(name, entry) of every parameter of a preset; a bare value yields (name, None)."""
    for table, body in doc.items():
        if isinstance(body, list):  # [[power_states]]
            for i, state in enumerate(body):
                yield f"{table}[{i}]", state
        elif isinstance(body, dict) and table not in SWITCHES:
            for key, entry in body.items():
                if table == "drive" and key in IDENTITY:
                    continue
                if isinstance(entry, dict) and "value" not in entry and "source" not in entry:
                    # A sub-table ([nvm_sets.plm]): its parameters carry the sources.
                    for sub, e in entry.items():
                        yield f"{table}.{key}.{sub}", e if isinstance(e, dict) else None
                    continue
                yield f"{table}.{key}", entry if isinstance(entry, dict) else None
        elif not isinstance(body, dict):
            yield table, None


def test_no_tracked_file_cites_the_private_notes() -> None:
    files = tracked_files()
    assert SOURCES in files and len(files) > 100
    hits = []
    for path in files:
        if not path.is_file():  # deleted in the work tree, not yet committed
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue  # binary
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if PRIVATE.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert hits == [], "cite docs/sources.md, not the private notes:\n" + "\n".join(hits)


def test_the_pattern_finds_what_it_must() -> None:
    # Each example is split in two so that this file does not match itself.
    for head, tail in (("see theory", ".md §2.1"), ("DESIGN", ".md"), ("seed", "-facts §1"), ("/work", "/shared/x")):
        assert PRIVATE.search(head + tail), head + tail
    for text in ("docs/models.md", "docs/sources.md", "docs/stylesheet.md", "theory.rs"):
        assert not PRIVATE.search(text), text


def test_sources_lists_the_documents_presets_cite() -> None:
    keys = source_keys()
    assert len(keys) == len(set(keys)) and len(keys) >= 20
    for seed in (
        "KIOXIA CM6 namespace brief",
        "Memblaze PBlaze5 namespaces talk",
        "Intel D5-P5316 IU white paper",
        "KIOXIA KumoScale vs Ceph study",
        "CM6/CD6 SNIA PTS review",
    ):
        assert seed in keys
    text = SOURCES.read_text()
    assert "## Calibrated figures" in text
    for figure in ("6,971 MB/s", "1,549,202 IOPS", "4,246 MB/s", "173,067 IOPS"):
        assert figure in text


@pytest.mark.parametrize("path", presets(), ids=lambda p: p.stem)
def test_every_preset_parameter_has_a_marked_source(path: Path) -> None:
    keys = source_keys()
    doc = load_toml(path)
    entries = list(sourced_entries(doc))
    assert len(entries) >= 30, f"{path.name}: only {len(entries)} parameters found"
    problems = []
    for name, entry in entries:
        source = entry.get("source") if entry is not None else None
        if not isinstance(source, str):
            problems.append(f"{name}: no source")
        elif not source.startswith(MARKS):
            problems.append(f"{name}: source does not start with one of {MARKS}: {source!r}")
        elif source.startswith("[SRC]") and not any(key in source for key in keys):
            problems.append(f"{name}: [SRC] names no document of docs/sources.md: {source!r}")
    assert problems == [], f"{path.name}:\n" + "\n".join(problems)


def test_presets_exist() -> None:
    assert len(presets()) >= 7


BRACKETS = "### Brackets of the assumed preset parameters"
# [ASSUMED] strings that describe the drive (no range to give).
DESCRIPTIVE = {"drive.model_number", "drive.interface", "nand.part"}
# "as X" in an [ASSUMED] source: the preset X names, whose same parameter must hold the value.
AS_PRESET = re.compile(r"\bas (?:the )?(CM6-R 3\.84 TB|CM6|CM5|P5316)(?: preset)?(?=$|\s*[(;:,]|\s+\()")
AS_FILE = {"CM6-R 3.84 TB": "kioxia-cm6-r-3.84t", "CM6": "kioxia-cm6-r-3.84t", "CM5": "kioxia-cm5-r-3.84t", "P5316": "intel-p5316-15.36t"}


def bracket_rows() -> dict[str, list[str]]:
    """Parameter -> the cells of its row in docs/sources.md's table of brackets."""
    text = SOURCES.read_text()
    assert BRACKETS in text, f"docs/sources.md has no '{BRACKETS}'"
    part = text.split(BRACKETS, 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in part.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        names = re.findall(r"`([^`]+)`", cells[0])
        table = names[0].rsplit(".", 1)[0] if "." in names[0] else ""
        for n in names:
            rows[n if "." in n or not table else f"{table}.{n}"] = cells[1:]
    return rows


def _entry_value(doc: dict[str, Any], name: str) -> Any:
    node: Any = doc
    for part in name.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node.get("value") if isinstance(node, dict) else None


@pytest.mark.parametrize("path", presets(), ids=lambda p: p.stem)
def test_every_assumed_preset_parameter_says_why_and_its_bracket(path: Path) -> None:
    rows = bracket_rows()
    doc = load_toml(path)
    problems = []
    for name, entry in sourced_entries(doc):
        source = entry.get("source") if entry is not None else None
        if not isinstance(source, str) or "[ASSUMED]" not in source:
            continue
        key = re.sub(r"\[\d+\]$", "", name)
        reason = source.replace("[ASSUMED]", "").strip(" ;:,.")
        if len(reason.split()) < 3:
            problems.append(f"{name}: [ASSUMED] without saying what is assumed and why: {source!r}")
        value = entry.get("value")
        if key not in DESCRIPTIVE and not isinstance(value, str):
            cells = rows.get(key)
            if cells is None:
                problems.append(f"{name}: [ASSUMED] and no row in docs/sources.md '{BRACKETS}'")
            elif len(cells) != 3 or not all(cells):
                problems.append(f"{name}: its bracket row needs the assumed value, the range and what it changes: {cells}")
        after = source.split("[ASSUMED]", 1)[1] if source.startswith("[ASSUMED]") else ""
        for m in AS_PRESET.finditer(after):
            other = PRESETS / f"{AS_FILE[m.group(1)]}.toml"
            if other == path:
                continue
            theirs = _entry_value(load_toml(other), key)
            if theirs is not None and theirs != value:
                problems.append(f"{name}: says 'as {m.group(1)}' but {other.stem} holds {theirs!r}, this preset {value!r}")
    assert problems == [], f"{path.name}:\n" + "\n".join(problems)


def test_the_bracket_check_catches_what_it_must(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A stale copy (the PM983 kept the CM5's old 25 us program suspend under "as the CM5
    # preset" after the CM5 moved to 11 us) and an [ASSUMED] with no bracket row are refused.
    text = (PRESETS / "samsung-pm983-3.84t.toml").read_text()
    stale = re.sub(r'^(t_prog_suspend_ns = \{ value = \d+, source = ")[^"]*(" \})', r"\1[ASSUMED] as the CM5 preset\2", text, flags=re.M)
    unbracketed = stale.replace("[dram_namespace]", "").replace(
        "channels = { value = ", 'made_up_knob = { value = 1, source = "[ASSUMED] a made-up knob of the test" }\nchannels = { value = ', 1
    )
    bad = tmp_path / "bad.toml"
    bad.write_text(unbracketed)
    with pytest.raises(AssertionError) as e:
        test_every_assumed_preset_parameter_says_why_and_its_bracket(bad)
    assert "timing.t_prog_suspend_ns: says 'as CM5' but kioxia-cm5-r-3.84t holds 11000" in str(e.value), e.value
    assert "nand.made_up_knob: [ASSUMED] and no row" in str(e.value), e.value
