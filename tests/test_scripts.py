"""The scripts in scripts/ are run by hand, not by the suite: every kit or test-helper name
they import must still exist (a renamed helper broke one unnoticed)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest
from conftest import CORPUS, ROOT

SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))
# Where the scripts' own imports come from, besides the kit: the tests' helpers and corpora.
HELPERS = (ROOT / "tests", CORPUS, CORPUS / "llm", CORPUS / "triton")
OURS = ("mha_kit", *(p.stem for folder in HELPERS for p in folder.glob("*.py")))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_name_a_script_imports_exists(script: Path, monkeypatch):
    for folder in HELPERS:
        monkeypatch.syspath_prepend(str(folder))
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                and node.module.split(".")[0] in OURS):
            module = importlib.import_module(node.module)
            missing = [a.name for a in node.names if not hasattr(module, a.name) and not (
                hasattr(module, "__path__")  # a package: the name may be a module of it
                and importlib.util.find_spec(f"{node.module}.{a.name}"))]
            assert not missing, f"{script.name}: {node.module} has no {missing}"


def test_a_missing_name_is_found(tmp_path: Path, monkeypatch):
    script = tmp_path / "broken.py"
    script.write_text("from notebook_helpers import SPEED_OF_LIGHT\n")
    with pytest.raises(AssertionError, match="SPEED_OF_LIGHT"):
        test_every_name_a_script_imports_exists(script, monkeypatch)


def test_the_install_takes_pips_sources_with_the_environment_over_the_files(tmp_path: Path,
                                                                           monkeypatch):
    spec = importlib.util.spec_from_file_location("uv_install", ROOT / "scripts" / "uv_install.py")
    uv_install = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(uv_install)
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nfind-links = /from/the/file\nindex-url = https://one/simple\n"
                      "[install]\nindex-url = https://two/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    monkeypatch.setenv("PIP_FIND_LINKS", "/from/the/environment")
    settings = uv_install.pip_settings()
    assert settings["find-links"] == "/from/the/environment"
    assert settings["index-url"] == "https://two/simple"
