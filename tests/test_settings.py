"""The kit's settings (mha_kit/settings.py): one module reads them, each has a type, a
default and a help text, nbgrader_config.py can set every one, and docs/settings.md is made
from them."""

from __future__ import annotations

import os
import re

import pytest
from conftest import ROOT, run_cli
from traitlets.config import Config

from mha_kit import settings
from mha_kit.course_settings import MhaKit, configured
from mha_kit.runner.policy import Limits

SETTINGS = ROOT / "mha_kit" / "settings.py"
KIT_CODE = [p for p in (*(ROOT / "mha_kit").rglob("*.py"),
                        ROOT / "mha_kit" / "gradescope" / "run_autograder")
            if p != SETTINGS]


def test_only_the_settings_module_names_a_kit_variable_or_reads_the_environment_for_one():
    """Other modules ask `settings.current()`; a message names a variable as a parameter."""
    named = {str(p.relative_to(ROOT)) for p in KIT_CODE
             if "MHA_KIT_" in p.read_text(encoding="utf-8")}
    assert named == set()
    reads = re.compile(r"os\.(environ|getenv)\b[^\n]*(settings\.|PREFIX|variable\()")
    assert [str(p) for p in KIT_CODE if reads.search(p.read_text(encoding="utf-8"))] == []


def test_docs_hold_the_table_the_settings_make():
    """Regenerate with `python -m mha_kit.settings` (the table between the markers)."""
    docs = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert settings.table() in docs


def test_the_environment_then_what_an_entry_point_chooses(monkeypatch):
    monkeypatch.setenv(settings.variable("call_timeout"), "7")
    monkeypatch.setenv(settings.variable("forbidden"), "torch.einsum, nn.MultiheadAttention")
    assert settings.current().call_timeout == 7.0
    assert settings.current().forbidden == ("torch.einsum", "nn.MultiheadAttention")
    with settings.chosen(call_timeout=30, lang=None) as chosen:
        assert chosen.call_timeout == 30.0 and Limits.from_settings().call_s == 30.0
        assert settings.current().environment()[settings.variable("call_timeout")] == "30.0"
    assert settings.current().call_timeout == 7.0  # nothing is left behind


def test_a_child_process_gets_back_the_settings_in_force():
    chosen = settings.Settings().replace(memory_gib="3", total_timeout=1234567.25, forbidden="",
                                         sandbox="landlock",
                                         worker_user="", allow_unconfined="1")
    assert settings.from_environment(chosen.environment()) == chosen
    assert settings.from_environment({}) == settings.Settings()


@pytest.mark.parametrize(("name", "value", "said"), [
    ("call_timeout", "soon", "call_timeout ($MHA_KIT_CALL_TIMEOUT): 'soon' is not a number"),
    ("memory_gib", "0", "memory_gib ($MHA_KIT_MEMORY_GIB) must be positive"),
    ("lang", "fr", "lang ($MHA_KIT_LANG): 'fr' is not one of en, zh"),
    ("allow_unconfined", "maybe", "allow_unconfined ($MHA_KIT_ALLOW_UNCONFINED): 'maybe' is not"),
])
def test_a_bad_value_names_its_setting_and_where_it_came_from(monkeypatch, name, value, said):
    monkeypatch.setenv(settings.variable(name), value)
    with pytest.raises(settings.SettingError, match=re.escape(said)):
        settings.current()


def test_a_bad_variable_is_one_line_from_the_cli():
    """In a fresh interpreter: the kit's imports read no setting that could fail them."""
    run = run_cli("check", str(ROOT / "tests" / "corpus" / "template.py"),
                  env={settings.variable("check_timeout"): "-1"})
    assert run.returncode == 2 and run.stderr.strip() == \
        "mha-kit: check_timeout ($MHA_KIT_CHECK_TIMEOUT) must be positive, not '-1'", run.stderr


def test_nbgrader_config_sets_every_setting_with_its_type():
    assert set(MhaKit.class_trait_names(config=True)) == set(settings.FIELDS) - {"assignments"}
    config = Config()
    config.MhaKit.call_timeout = 30
    config.MhaKit.forbidden = ["torch.einsum"]
    config.MhaKit.lang = "zh"
    assert configured(config) == {"call_timeout": 30.0, "forbidden": ["torch.einsum"],
                                  "lang": "zh"}
    with settings.chosen(**configured(config)) as chosen:
        assert (chosen.call_timeout, chosen.forbidden, chosen.lang) == (30.0, ("torch.einsum",),
                                                                        "zh")
    config.MhaKit.lang = "fr"
    with pytest.raises(Exception, match="fr"):  # traitlets' TraitError, naming the value
        configured(config)


def test_a_submission_that_says_no_assignment_is_graded_as_the_setting_says(tmp_path,
                                                                           monkeypatch):
    from mha_kit.grading.files import detect_assignment

    silent = tmp_path / "silent.py"
    silent.write_text("import torch\n")
    assert detect_assignment(silent) == "mha"
    monkeypatch.setenv(settings.variable("default_assignment"), "shapes")
    assert detect_assignment(silent) == "shapes"


def test_an_editions_language_falls_back_where_no_lang_is_given(monkeypatch):
    monkeypatch.delenv(settings.variable("lang"), raising=False)
    assert settings.unless_given("lang", "zh") == "zh"
    with settings.chosen(lang="en"):
        assert settings.unless_given("lang", "zh") is None
    monkeypatch.setenv(settings.variable("lang"), "en")
    assert settings.unless_given("lang", "zh") is None


def _grader_settings(_: str) -> tuple[str, bool | None]:
    """In a batch's grader process: its `sandbox` setting, and whether its zygote (started as
    the process started) runs under bubblewrap (None: no zygote)."""
    from mha_kit.runner import zygote

    started = zygote._zygote
    return settings.current().sandbox, None if started is None else started.sandboxed


def test_the_courses_settings_apply_before_the_graders_and_their_zygotes_start(tmp_path,
                                                                              monkeypatch):
    """`mha-kit autograde`: c.MhaKit in the course's nbgrader_config.py decides how each grader
    process's zygote is wrapped, as it decides the kernels' (no submission needs grading)."""
    from nbgrader.api import Gradebook

    from mha_kit.course_autograde import CourseAutograde
    from mha_kit.grading.batch import in_parallel
    from mha_kit.release import with_interpreter_on_path

    (tmp_path / "nbgrader_config.py").write_text(
        (ROOT / "nbgrader_config.py").read_text() + "\nc.MhaKit.sandbox = 'landlock'\n")
    monkeypatch.setenv(settings.variable("sandbox"), "auto")  # bubblewrap too, where it runs
    monkeypatch.setenv("PATH", with_interpreter_on_path(dict(os.environ))["PATH"])  # alembic
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        gradebook.add_assignment("mha")
    with CourseAutograde(tmp_path, "mha") as course:
        graded = dict(in_parallel(["alice"], 1, _grader_settings, lambda _: ("died", None),
                                  str(course.scratch.folder)))
    assert graded == {"alice": ("landlock", False)}
    assert settings.current().sandbox == "auto"  # the course's settings end with its run
