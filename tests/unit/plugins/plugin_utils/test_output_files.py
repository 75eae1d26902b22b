"""The controller's output files (output_file's operations): directories made with their mode and every missing parent's,
an existing directory's mode kept or set, files replaced whole with their mode, an unchanged file left alone, force
false never writing over a file, verify, check mode that writes nothing, and errors that name the path and the fix."""
from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils.output_files import (
    OutputFileError, ensure_directory, parse_mode, write_file)


def mode_of(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("given,bits", [("0644", 0o644), ("700", 0o700), (0o750, 0o750)])
def test_a_mode_is_read_as_octal(given, bits):
    assert parse_mode(given) == bits


@pytest.mark.parametrize("given", ["rw-r--r--", "0899", "", True, "77777"])
def test_a_mode_that_is_not_octal_permission_bits_is_refused_with_the_fix(given):
    with pytest.raises(OutputFileError, match="mode"):
        parse_mode(given)


def test_a_missing_directory_and_each_missing_parent_are_created_with_the_mode(tmp_path):
    target = tmp_path / "a" / "b" / "c"
    result = ensure_directory(str(target), 0o700)
    assert result["changed"] and result["created"] == [str(tmp_path / "a"), str(tmp_path / "a" / "b"), str(target)]
    assert [mode_of(p) for p in (tmp_path / "a", tmp_path / "a" / "b", target)] == [0o700] * 3
    assert ensure_directory(str(target), 0o700) == {"path": str(target), "state": "directory", "created": [], "changed": False, "mode": "0700"}


def test_an_existing_directory_keeps_its_mode_unless_told_to_set_it(tmp_path):
    existing = tmp_path / "shared"
    existing.mkdir()
    existing.chmod(0o1777)
    kept = ensure_directory(str(existing), 0o750)
    assert not kept["changed"] and kept["mode"] == "1777" and mode_of(existing) == 0o1777
    planned = ensure_directory(str(existing), 0o700, existing_mode="set", check=True)
    assert planned["changed"] and planned["mode_before"] == "1777" and mode_of(existing) == 0o1777
    done = ensure_directory(str(existing), 0o700, existing_mode="set")
    assert done["changed"] and mode_of(existing) == 0o700
    assert not ensure_directory(str(existing), 0o700, existing_mode="set")["changed"]


def test_check_mode_creates_no_directory(tmp_path):
    result = ensure_directory(str(tmp_path / "new" / "dir"), 0o755, check=True)
    assert result["changed"] and len(result["created"]) == 2 and not (tmp_path / "new").exists()


def test_a_file_in_the_way_of_a_directory_is_named_with_the_fix(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputFileError, match=r"file exists and is not a directory\. Fix: move it away"):
        ensure_directory(str(tmp_path / "file" / "sub"), 0o755)
    with pytest.raises(OutputFileError, match="existing_mode 'always' is neither keep nor set"):
        ensure_directory(str(tmp_path), 0o755, existing_mode="always")


def test_a_file_is_written_with_its_mode_and_a_second_write_changes_nothing(tmp_path):
    path = tmp_path / "report.json"
    first = write_file(str(path), "{}\n", 0o640)
    assert first["changed"] and first["written"] and not first["existed"] and first["diff"]["after"] == "{}\n"
    assert path.read_text() == "{}\n" and mode_of(path) == 0o640
    second = write_file(str(path), "{}\n", 0o640)
    assert not second["changed"] and not second["written"] and second["existed"] and not second.get("diff")
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]   # no temporary file left behind


def test_a_changed_text_replaces_the_file_and_shows_before_and_after(tmp_path):
    path = tmp_path / "report.md"
    path.write_text("old\n")
    result = write_file(str(path), "new\n", 0o644)
    assert result["changed"] and result["diff"]["before"] == "old\n" and result["diff"]["after"] == "new\n"
    assert path.read_text() == "new\n"


def test_only_the_mode_of_an_unchanged_file_is_corrected(tmp_path):
    path = tmp_path / "evidence.json"
    path.write_text("same")
    path.chmod(0o666)
    result = write_file(str(path), "same", 0o644)
    assert result["changed"] and not result["written"] and result["mode_before"] == "0666" and mode_of(path) == 0o644


def test_force_false_never_writes_over_an_existing_file(tmp_path):
    path = tmp_path / "backup.yaml"
    path.write_text("kept: true\n")
    path.chmod(0o600)
    result = write_file(str(path), "kept: false\n", 0o644, force=False, verify=True)
    assert result["existed"] and not result["changed"] and not result["written"] and result["mode"] == "0600"
    assert path.read_text() == "kept: true\n" and mode_of(path) == 0o600


def test_check_mode_writes_nothing_but_says_what_would_change(tmp_path):
    path = tmp_path / "report.json"
    result = write_file(str(path), "{}", 0o644, check=True)
    assert result["changed"] and not result["written"] and not path.exists()


def test_a_written_file_that_reads_back_otherwise_fails_verify(tmp_path, monkeypatch):
    from ansible_collections.kubevirt_ops.rebalance.plugins.plugin_utils import output_files
    reads = iter([None, b"torn"])
    monkeypatch.setattr(output_files, "_read", lambda path: next(reads))
    with pytest.raises(OutputFileError, match=r"does not read back as what was written\. Fix: check the disk"):
        write_file(str(tmp_path / "backup.yaml"), "whole\n", 0o600, verify=True)


def test_paths_that_cannot_be_written_are_named_with_the_fix(tmp_path):
    with pytest.raises(OutputFileError, match=r"the directory of .*missing/report.json does not exist\. Fix: create it first"):
        write_file(str(tmp_path / "missing" / "report.json"), "{}", 0o644)
    with pytest.raises(OutputFileError, match=r"is a directory\. Fix: give the path of a file in it"):
        write_file(str(tmp_path), "{}", 0o644)
    if os.geteuid() != 0:   # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(OutputFileError, match=r"cannot write a file in .*locked: Permission denied\. Fix: choose a path"):
            write_file(str(locked / "report.json"), "{}", 0o644)
