"""The check conftest runs on the images of templates and module/session fixtures (shared by
tests, outside every test's own tmp_path) when the session ends: twin.check_shared_images."""

from __future__ import annotations

from pathlib import Path

import pytest

from twin import check_shared_images, copy_image


def current_gen(d: Path) -> Path:
    return d / (d / "CURRENT").read_text().strip()


def a_base(tmp_path: Path, small_template: Path) -> Path:
    """A base temp as pytest lays it out: fixture folders NAMEn, NAMEcurrent links to them,
    and a test's own folder."""
    base = tmp_path / "base"
    copy_image(small_template, base / "fixture0" / "cm6s")
    copy_image(small_template, base / "templates0" / "nested" / "cm6s")
    (base / "fixturecurrent").symlink_to(base / "fixture0")
    copy_image(small_template, base / "test_something0" / "cm6s")
    return base


def test_every_image_outside_the_tests_own_folders_is_checked_once(tmp_path: Path, small_template: Path) -> None:
    base = a_base(tmp_path, small_template)
    checked = check_shared_images(base, {"test_something0"})
    assert checked == [base / "fixture0" / "cm6s", base / "templates0" / "nested" / "cm6s"]


@pytest.mark.damages_image
def test_a_damaged_shared_image_fails_naming_it(tmp_path: Path, small_template: Path) -> None:
    base = a_base(tmp_path, small_template)
    (current_gen(base / "templates0" / "nested" / "cm6s") / "p2l.bin").unlink()
    with pytest.raises(AssertionError) as e:
        check_shared_images(base, {"test_something0"})
    lines = str(e.value).splitlines()
    assert lines[0] == "shared images left inconsistent:"
    assert len(lines) == 2 and lines[1].startswith(f"ssdtwin check {base / 'templates0' / 'nested' / 'cm6s'}: ")
    assert "p2l.bin" in lines[1]


@pytest.mark.damages_image
def test_a_tests_own_folder_and_an_image_marked_damaged_are_left_alone(tmp_path: Path, small_template: Path) -> None:
    base = a_base(tmp_path, small_template)
    (current_gen(base / "test_something0" / "cm6s") / "p2l.bin").unlink()  # its test checks it (or is marked)
    (current_gen(base / "fixture0" / "cm6s") / "p2l.bin").unlink()
    (base / "fixture0" / "cm6s" / "DAMAGED").touch()
    assert check_shared_images(base, {"test_something0"}) == [base / "templates0" / "nested" / "cm6s"]
