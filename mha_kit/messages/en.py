"""English templates, by message id (see `messages`): the shared ones, the speed check and the
grading front ends here; the checks, the known mistakes and the runner in `en_*.py`."""

from .en_checks import TEMPLATES as CHECKS
from .en_gradients import TEMPLATES as GRADIENTS
from .en_mistakes import TEMPLATES as MISTAKES
from .en_runner import TEMPLATES as RUNNER

TEMPLATES: dict[str, str] = {
    "ok": "ok",
    "text": "{text}",  # text that comes from elsewhere as it is: printed output, a file name
    "quote": "{text}",  # text as it was written elsewhere (Python's, a program's output)
    "join.comma": "{first}, {second}",  # see messages.joined

    # What every timed check says (speed.verdict); each assignment words its own measurement
    # (assignments/mha/messages.py: the fused module against the looped one)
    "speed.graded_config": "",
    "speed.test_config": ", at the kit's test config `{variable}={name}`",
    "speed.one_run": "",
    "speed.median_of": ", the median of {runs} measurements",
    "speed.not_scored": "speed not scored: {reason}",
    "speed.not_scored_spot": "speed not scored: {reason} (is forward caching or skipping work?)",
    "speed.no_measurement": "the timing run sent no measurement",
    "speed.other_config": "the timing run used another config or seed than the grader asked for",
    "speed.malformed_times": "the timing run sent malformed times",
    "speed.no_outputs": "the timing run sent no outputs",
    "speed.wrong_output": "the output of call {call} in timing round {round} is not the right "
                          "answer",
    "speed.over_wall": "the reported times add up to more than the {wall:.2f} s the measurement "
                       "took",
    "speed.busy_beside": "your code's process used CPU time while the kit's baseline was timed "
                         "in another process ({share:.0f}% of that round's): nothing of yours "
                         "may run then",
    "waiting.speed": "timed only once MultiHeadAttention matches nn.MultiheadAttention, with "
                  "is_causal=True as the timing calls it",
    "waiting.failing": "{what}; failing now: {checks}",
    "waiting.stand_ins": "run once one of {pieces} passes its own check: with the kit's versions "
                         "in place of all of them, none of your code would run here",
    "standin.note": "{text}; graded with the kit's {pieces}, since yours failed {checks}",

    # The score table and Gradescope (grading.report), batches (grading.batch, grading.files)
    "gradescope.unconfined": "run_autograder: not grading: student code would run as root "
                             "with no Landlock to confine it (and no account to drop to), so it "
                             "could write this grading's results itself. Give the image a kernel "
                             "with Landlock, or make Python, torch and the kit readable by "
                             "`nobody`; or set {variable}=1 to grade anyway",
    "gradescope.no_assignment": "mha-kit gradescope: the kit has no assignment {assignment} "
                                "to grade on Gradescope; choose from {known}",
    "gradescope.no_visibility": "mha-kit gradescope: --hidden {visibility} is no visibility of "
                                "the hidden-input tests; choose from {known}",
    "report.check": "check",
    "report.points": "points",
    "report.message": "message",
    "report.total": "total",
    "report.hidden_failed": "fails on the hidden inputs (other sizes and values than the visible "
                            "ones; they are not shown): {mistakes}",
    "report.no_mistake": "no known mistake explains it; the visible checks and the notebook's "
                         "own test cells try the same properties on inputs you can see",
    "report.while_loading": "While loading your file:",
    "report.printed": "your code printed: {printed}",
    "batch.grader_failed": "the grader failed: {type}: {error}",
    "batch.grader_died": "the grading process died while grading this submission (did its code "
                         "kill the grader?)",
    "batch.started": "grading {count} submissions of {assignment} with {jobs} jobs on {device} ...",
    "batch.summary": "graded {count} submissions in {seconds:.1f} s with {jobs} jobs",
    "batch.totals": "  total: mean {mean:.1f}, median {median:g}, min {min:g}, max {max:g}",
    "batch.no_file": "  no single submission file: {students}",
    "files.no_such_file": "{path}: no such file",
    "files.not_a_submission": "{path}: expected a .py file or an .ipynb notebook",
    "files.unreadable": "{path}: cannot be read ({type}: {error})",
    "files.several": "{count} {suffix} files, expected one: {names}",
    "files.none": "no .ipynb or .py file found",
    "files.upload": "{problem}: upload your notebook (.ipynb) or .py file",

    # Pictures (grading.pictures)
    "picture.labelled": "{call} on labelled numbers, x of shape {shape}: the cell tT hH fF holds "
                        "feature F of head H of token T",
    "picture.larger_case": "{title} (a larger case than the text's, to be seen better)",
    "picture.token": "token t",
    "picture.feature": "feature",
    "picture.blocked": "{title}: where the weights are 0, the keys blocked",
    "picture.panel": "{name} {shape}",
    "picture.input": "x",
    "picture.blocks": "one block per index of the dims before the last two",
    "picture.mask": "{name} (black = blocked)",
    "picture.key": "key j",
    "picture.query": "query i",
    "picture.wrong": "wrong",
    "picture.difference": "yours - expected",
    "picture.head": "{name}, head {head}",
    "picture.head_axis": "head",
    "picture.index": "{name}, {dim}={index}",

    # The command line (cli) and the notebook API (notebook)
    "cli.grading": "Grading {path} as {assignment} on {device} ...",
    "cli.seconds": "({seconds:.1f} s)",
    "cli.wrote": "wrote {path}",
    "cli.wrote_both": "wrote {path} and {count} files in {folder}",
    "cli.unknown_checks": "unknown check id(s) for {assignment}: {unknown}; choose from {ids}",
    "cli.no_cuda": "--device cuda: this torch ({torch}) has no CUDA (a CPU build, or no GPU "
                   "is visible). Leave out --device to grade on the CPU, or install a CUDA "
                   "build of torch on a machine with a GPU",
    "cli.jobs": "--jobs must be at least 1",
    "cli.broken_assignment": "mha-kit: assignment {name!r} cannot be loaded and is left out "
                             "(the others work as usual): {why}",
    "cli.not_a_folder": "{path}: not a folder",
    "cli.no_submissions": "{path}: no submissions (.py, .ipynb or one folder per student)",
    "cli.mixed_assignments": "{path}: the submissions are of different assignments: {found}; "
                             "name the one to grade with --assignment",
    "notebook.failed": "{check} earned 0 of {points} points: the ✗ line above says why",
    "notebook.unknown_check": "unknown check {check!r}; choose from {ids}",
    "training.yours": "your {name}",
    "training.losses": "{name}: loss {first:.3f} -> {last:.3f} after {steps} steps",
    "training.step": "training step",
    "training.loss": "loss (MSE)",
    "training.title": "Does it train? Same weights, same batches",
    "report.class_mistake": "{share:.0f}% {mistake}",
    "report.class_histogram": "total scores of {students} students",
    "report.class_total": "total (out of {max:g})",
    "report.class_pass_rates": "students with full points, per check (%)",
    "report.class_mistakes": "the {top} mistakes named most often (% of students)",
    "report.class_no_mistakes": "no known mistake was named in this class",
    "report.class_written": "wrote the class report: {table} and {picture}",
    "trusted.problem": "while grading the submitted notebook in the kit's worker: {problem}",
    "trusted.hidden_failed": "your code passes this check on the notebook's inputs but fails "
                             "it on the hidden test's inputs, which stay hidden: try other "
                             "sizes (batch, sequence length, number of heads) and a mask",

    # nbgrader's autograde: the kernel (trusted_autograde), a course at once (course_autograde)
    "autograde.kernel_died": "the kernel died while running {cell}, so the cells after it "
                             "did not run; the points come from the kit's own grading",
    "autograde.kernel_disk": "the kernel was stopped while running {cell}: the files the "
                             "notebook wrote take more than {gib:g} GiB of disk, the grader's "
                             "limit (files it deleted but still holds open count too), so the "
                             "cells after it did not run; the points come from the kit's own "
                             "grading",
    "autograde.kernel_stuck": "{cell} ran past {seconds} s and the kernel stopped "
                              "answering, so the cells after it did not run; the points come "
                              "from the kit's own grading",
    "autograde.timed_out": "{cell} ran past Execute.timeout and was interrupted",
    "autograde.demo_not_run": "not run by the autograder: this demo earns no points; run it in "
                              "your own notebook to see its output",
    "autograde.kit_grades": "not graded yet: TrustedGrades writes this cell's outputs (is it in "
                            "Autograde.autograde_preprocessors, after StudentCells?)",
    "autograde.other_assignment": "not graded: this notebook is graded as {assignment}, whose "
                                  "checks do not include this one",
    "autograde.not_converted": "not recorded: nbgrader could not autograde it: {error}",
    "autograde.not_recorded": "not recorded: nbgrader could not write its grades: {error}",
    "autograde.zero": "recorded with 0 points in every test cell, and the reason",
    "autograde.note": "{student}: {note}",
    "autograde.skipped": "{count} submissions autograded already were left as they are "
                         "(--force grades them again): {students}",
    "autograde.report_leaves_out": "the class report is of this run's submissions only, not of "
                                   "the {count} left as they are",
    "autograde.no_report": "no class report: no submission was graded in this run",
    "autograde.summary": "autograded {count} submissions of {assignment} in {seconds:.1f} s with "
                         "{jobs} jobs; {recorded} recorded in {gradebook}",
    "autograde.failures": "{count} submissions could not be recorded: {students}",
    "autograde.no_gradebook": "{path}: no gradebook; release the assignment first (`mha-kit "
                              "release {assignment}` or `nbgrader generate_assignment "
                              "{assignment}`)",
    "autograde.no_assignment": "{path} has no assignment {assignment}; release it first "
                               "(`mha-kit release {assignment}` or `nbgrader "
                               "generate_assignment {assignment}`)",
    "autograde.not_sqlite": "mha-kit autograde needs a SQLite gradebook, not {url}",
    "autograde.no_submissions": "no submissions of {assignment} in {path}",
    "autograde.started": "autograding {count} submissions of {assignment} with {jobs} jobs ...",
    "autograde.misnamed": "not graded: {folder} holds {found}, but nbgrader grades only "
                          "{expected} for {assignment}: rename it to {expected} and run again",
    "autograde.unknown_notebook": "not graded: {folder} also holds {found}, but nbgrader grades "
                                  "only {expected} for {assignment}; to grade that one instead, "
                                  "rename it to {expected} and run again with --force",

    # A new assignment (scaffold) and what its release still lacks (release.todo)
    "new.bad_name": "{name!r} cannot name an assignment: use lowercase letters, digits and _, "
                    "begin with a letter, and do not end in {endings} (an edition's name)",
    "new.exists": "{name!r} is taken: {path} exists already",
    "new.name_used": "{name!r} is taken: an assignment, a name a submission defines or a "
                     "check already has it, and the scaffold gives all three this name",
    "new.setting": "mha-kit finds {name} while {folder} is in the `assignments` setting: "
                   "{variable}={folder} in the environment of every command, mha-kit's and "
                   "nbgrader's",
    "new.next": "Next, in {course}:\n"
                "  1. write the exercise: the function in the solution cell of {notebook}, its "
                "oracle and its mistake in {package}/checks.py, their sentences in "
                "{package}/messages.py\n"
                "  2. mha-kit check {notebook}: 100/100 as written\n"
                "  3. mha-kit release {name}: it says what the kit's tests still need, if "
                "anything\n"
                "  4. translate {overlays} (python -m mha_kit.editions status), then "
                "mha-kit release {editions}",
    # A course folder apart from the kit (course_folder)
    "course.unknown": "the kit has no assignment {unknown}; choose from {known}",
    "course.exists": "not written, these exist already (--force overwrites them): {paths}",
    "course.next": "Next, in {course} (every command runs there):\n"
                   "  1. set {variable} in the first code cell of each master in "
                   "solutions/<assignment>/ to where your students install the kit from\n"
                   "  2. mha-kit release: writes the students' notebooks in assignments/ and "
                   "nbgrader's gradebook.db\n"
                   "  3. hand out assignments/<assignment>/, collect into "
                   "submitted/<student>/<assignment>/, then: mha-kit autograde <assignment>; "
                   "nbgrader generate_feedback <assignment>; nbgrader export\n"
                   "Settings (limits, sandbox, secret) go in {config} as c.MhaKit.<setting>. "
                   "The steps in full: docs/instructor-guide.md in the kit's repository",
    "release.todo": "{assignment}, still to do: {what}",
    "release.no_test_cell": "add a locked test cell `check(\"{check}\")` with grade id {check} "
                            "to the notebook in {folder}: nbgrader grades only the checks that "
                            "have one",
    "release.mistake_opening": "begin the sentence of `mistake.{mistake}` in its messages.py "
                               "with `{en}` in English and `{zh}` in Chinese: the feedback "
                               "shows it after what went wrong",
    "release.listing": "add a row | `{assignment}` | `{notebook}` | … | to the table of "
                       "assignments in {doc}",
    "release.edition": "{overlay}: {problems}. Each of the kit's own assignments has a Chinese "
                       "edition: translate the overlay (python -m mha_kit.editions status), "
                       "then mha-kit release {edition}",
    "release.unmarked": "the Chinese templates of {ids} are not recorded as translating "
                        "today's English: once they do, run {command}",
    **CHECKS,
    **GRADIENTS,
    **MISTAKES,
    **RUNNER,
}
