"""The tests' image digest (twin.image_digest): equal exactly when the bytes are equal.

Tests that say a command left an image unchanged compare digests before and after; the digest
skips the holes of the sparse map files, so it must still see every byte that differs and
must not see how the file system stores equal bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twin import file_digest, image_digest, run_cli

SIZE = 3 << 20


def sparse(path: Path, writes: dict[int, bytes], size: int = SIZE) -> Path:
    """A file of `size` bytes holding `writes` (offset: bytes) and holes elsewhere."""
    with open(path, "wb") as f:
        f.truncate(size)
        for offset, data in writes.items():
            f.seek(offset)
            f.write(data)
    return path


def dense(path: Path, writes: dict[int, bytes], size: int = SIZE) -> Path:
    """The same bytes as `sparse`, every one of them written (a write past `size` extends it,
    as it does the sparse file)."""
    size = max([size, *(offset + len(chunk) for offset, chunk in writes.items())])
    data = bytearray(size)
    for offset, chunk in writes.items():
        data[offset : offset + len(chunk)] = chunk
    path.write_bytes(bytes(data))
    return path


writes_st = st.dictionaries(st.integers(0, SIZE - 1), st.binary(min_size=1, max_size=9000), max_size=6)


@settings(max_examples=40, deadline=None)
@given(writes=writes_st)
def test_a_sparse_file_and_its_bytes_written_out_digest_alike(tmp_path_factory: pytest.TempPathFactory, writes: dict[int, bytes]) -> None:
    d = tmp_path_factory.mktemp("digest")
    # Overlapping writes: the later one wins in both files, in the same order.
    assert file_digest(sparse(d / "a", writes)) == file_digest(dense(d / "b", writes))


@settings(max_examples=40, deadline=None)
@given(writes=writes_st, at=st.integers(0, SIZE - 1), value=st.integers(1, 255))
def test_one_changed_byte_changes_the_digest(
    tmp_path_factory: pytest.TempPathFactory, writes: dict[int, bytes], at: int, value: int
) -> None:
    d = tmp_path_factory.mktemp("digest")
    a = sparse(d / "a", writes)
    before = file_digest(a)
    with open(a, "r+b") as f:
        f.seek(at)
        old = f.read(1)[0]
        f.seek(at)
        f.write(bytes([old ^ value]))
    assert file_digest(a) != before


def test_the_length_is_part_of_the_digest(tmp_path: Path) -> None:
    a = sparse(tmp_path / "a", {10: b"x"})
    b = sparse(tmp_path / "b", {10: b"x"}, size=SIZE + 1)  # one more zero byte at the end
    assert file_digest(a) != file_digest(b)


def test_a_fresh_image_digests_without_reading_its_holes(tmp_path: Path) -> None:
    """A fresh image's maps are holes; a one-byte change in one is still seen."""
    img = tmp_path / "img"
    run_cli("create", img, "--model", "kioxia-cm6-r-3.84t", "--scale", "1/454")
    before = image_digest(img)
    maps = [p for p in img.rglob("*.bin") if p.stat().st_size > 0]
    assert maps and all(p.stat().st_blocks * 512 < p.stat().st_size for p in maps)  # sparse
    target = maps[0]
    with open(target, "r+b") as f:
        f.seek(target.stat().st_size // 2)
        f.write(b"\x01")
    assert image_digest(img) != before
    with open(target, "r+b") as f:
        f.seek(target.stat().st_size // 2)
        f.write(b"\x00")  # the same bytes again, now written rather than a hole
    assert image_digest(img) == before


def test_a_settled_files_digest_is_kept_until_the_file_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file whose mtime is old is hashed once while it stays as it is (every copy of a
    template shares its maps: copy_image hard-links them); a write, even of the same size
    and a moment later, is a new state and is hashed again."""
    import os

    import twin

    hashed: list[Path] = []
    real = twin._file_digest
    monkeypatch.setattr(twin, "_file_digest", lambda p: hashed.append(p) or real(p))
    a = sparse(tmp_path / "a", {4096: b"x" * 100})
    old = a.stat().st_mtime_ns - 10 * twin.DIGEST_SETTLED_NS
    os.utime(a, ns=(old, old))  # as if written ten seconds ago
    first = file_digest(a)
    link = tmp_path / "link"
    os.link(a, link)  # a copy of a template, as copy_image makes it
    assert file_digest(a) == file_digest(link) == first and hashed == [a]
    with open(link, "r+b") as f:
        f.seek(4096)
        f.write(b"y")
    changed = file_digest(a)
    assert changed != first and changed == twin._file_digest(sparse(tmp_path / "b", {4096: b"y" + b"x" * 99}))
    assert hashed[:2] == [a, a]  # hashed again (its mtime is now: not kept yet)
    fresh = sparse(tmp_path / "c", {0: b"z"})
    file_digest(fresh)
    file_digest(fresh)
    assert hashed[-2:] == [fresh, fresh]  # a file written just now is hashed every time


@pytest.mark.damages_image
def test_a_copy_checked_once_is_checked_again_once_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """check_image passes an image of the bytes of one it checked without checking it again
    (an untouched copy of a template); a copy whose map changed is checked, and fails."""
    import os

    import twin
    from ssdtwin import Drive

    checks: list[str] = []
    real = Drive.check
    monkeypatch.setattr(Drive, "check", lambda self: checks.append("x") or real(self))
    img = tmp_path / "img"
    run_cli("create", img, "--model", "kioxia-cm6-r-3.84t", "--scale", "1/454")
    run_cli("precondition", img, "--seq", "128k", "--loops", "1", "-q")
    for p in img.rglob("*"):
        old = p.stat().st_mtime_ns - 10 * twin.DIGEST_SETTLED_NS
        os.utime(p, ns=(old, old))  # a template made ten seconds ago
    twin.check_image(twin.copy_image(img, tmp_path / "a"))
    twin.check_image(twin.copy_image(img, tmp_path / "b"))
    assert len(checks) == 1
    l2p = twin.own_copy(next((tmp_path / "b").rglob("l2p.bin")))
    with open(l2p, "r+b") as f:
        f.write(b"\xff" * 64)  # the first LBAs mapped nowhere the FTL wrote
    with pytest.raises(AssertionError, match="ssdtwin check"):
        twin.check_image(tmp_path / "b")
    assert len(checks) == 2
