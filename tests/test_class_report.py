"""The class report: score histogram, pass rate per check, the mistakes named most often."""

from __future__ import annotations

import csv
import sys
import warnings

import matplotlib.image
import pytest
from conftest import CORPUS, DETERMINISTIC, TEMPLATE

from mha_kit.grading import class_report, pictures
from mha_kit.grading.batch import write_csv
from mha_kit.grading.files import StudentFile
from mha_kit.grading.registry import run_checks
from mha_kit.grading.report import gradescope_results
from mha_kit.messages import msg
from mha_kit.runner.inprocess import InProcessSubmission

sys.path.insert(0, str(CORPUS))
from mutants import MUTANTS  # noqa: E402

SCALE = [m for m in MUTANTS if m.mistake == "scale_by_embed_dim"][:1]
MASK = [m for m in MUTANTS if m.mistake == "mask_inverted"][:1]


def payload(path):
    return gradescope_results(run_checks(InProcessSubmission.from_path(path),
                                         only=DETERMINISTIC))


def test_a_class_of_three(tmp_path):
    files = []
    for i, mutant in enumerate(SCALE + MASK):
        files.append(tmp_path / f"m{i}.py")
        files[-1].write_text(mutant.source())
    payloads = [payload(TEMPLATE), *map(payload, files)]
    report = class_report.summarise(payloads)
    assert report.students == 3 and sum(report.histogram) == 3
    assert report.histogram[-1] == 1  # the template: 90 of the 90 points graded here
    named = dict(report.mistakes)
    assert named["scale_by_embed_dim"] == 1 and named["mask_inverted"] == 1
    for check in DETERMINISTIC:  # the template passes all; each mutant fails its own set
        passing = 1 + sum(check not in m.fails for m in SCALE + MASK)
        assert report.pass_rates[check] == passing / 3, check
    assert class_report.mistake_label("scale_by_embed_dim", 1 / 3) == "33% scale_by_embed_dim"

    table, picture = class_report.write(report, tmp_path / "class")
    rows = list(csv.DictReader(table.open(encoding="utf-8")))
    assert {"score", "check passed", "mistake named"} == {r["section"] for r in rows}
    assert {"section": "mistake named", "item": "mask_inverted", "students": "1",
            "share": "0.33"} in rows
    assert matplotlib.image.imread(picture).shape[1] > 1000

    sheet = tmp_path / "grades.csv"  # mha-kit grade's sheet names the same mistakes, by id
    write_csv(sheet, {f"s{i}": (StudentFile(f"s{i}", path), p) for i, (path, p)
                      in enumerate(zip([TEMPLATE, *files], payloads))}, list(DETERMINISTIC))
    mistakes = [r["mistakes"] for r in csv.DictReader(sheet.open(encoding="utf-8"))]
    assert mistakes == ["", "scale_by_embed_dim", "mask_inverted"]


@pytest.mark.parametrize("fonts", ["none", "known"])
def test_a_chinese_class_picture_has_no_missing_characters(tmp_path, monkeypatch, fonts):
    """Drawn as the pictures of a failure are: with a font that has Chinese characters, or in
    English where matplotlib knows none (it drew rows of empty boxes, a warning per glyph)."""
    if fonts == "none":
        monkeypatch.setattr(pictures, "CJK_FONTS", ())
    elif pictures.cjk_font() is None:
        pytest.skip("no font with Chinese characters here (CI installs fonts-wqy-microhei)")
    monkeypatch.setenv("MHA_KIT_LANG", "zh")
    report = class_report.summarise([payload(TEMPLATE)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        class_report.write(report, tmp_path / "class")
    assert [str(w.message) for w in caught if "missing from" in str(w.message)] == []


def test_a_class_with_no_known_mistake_says_so_over_the_empty_panel(tmp_path):
    assert class_report.mistakes_title(0).id == "report.class_no_mistakes"
    assert class_report.mistakes_title(3) == msg("report.class_mistakes", top=3)
    report = class_report.summarise([payload(TEMPLATE)])
    assert report.mistakes == []
    _, picture = class_report.write(report, tmp_path / "class")
    assert matplotlib.image.imread(picture).shape[1] > 1000
