"""The documentation site builds with MkDocs in strict mode (a broken link, a missing page
or a docstring the API reference cannot read fails), and its hand-written pages never cite
the internal specification."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_site_builds_in_strict_mode(tmp_path):
    mkdocs = Path(sys.executable).with_name("mkdocs")
    if not mkdocs.exists():
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    site = tmp_path / "checkout"
    shutil.copytree(ROOT / "docs", site / "docs", ignore=shutil.ignore_patterns("images"))
    (site / "docs" / "images").mkdir()
    for shot in (ROOT / "assets" / "screenshots").glob("*.png"):
        shutil.copy(shot, site / "docs" / "images" / shot.name)
    for name in ("mkdocs.yml", "ARCHITECTURE.md"):
        shutil.copy(ROOT / name, site / name)
    shutil.copytree(ROOT / "lib", site / "lib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "assets" / "lessons", site / "assets" / "lessons")  # docs' example
    done = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=site, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "ops" / "pos_embed" / "index.html").exists()
    assert "resolve" in (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")


def test_no_page_a_user_reads_cites_the_spec():
    pages = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *(ROOT / "docs").rglob("*.md")]
    citation = re.compile(r"SPEC(\.md| ?§)|\bthe spec(ification)?\b", re.I)
    citing = [str(page.relative_to(ROOT)) for page in pages
              if citation.search(page.read_text(encoding="utf-8"))]
    assert not citing
