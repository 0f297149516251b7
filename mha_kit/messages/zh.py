"""Chinese templates, by message id (see `messages`). Every id of en.py has one here, with the
same fields; code, shapes and names stay as they are, in `code` spans where they stand alone."""

from .zh_checks import TEMPLATES as CHECKS
from .zh_gradients import TEMPLATES as GRADIENTS
from .zh_mistakes import TEMPLATES as MISTAKES
from .zh_runner import TEMPLATES as RUNNER

TEMPLATES: dict[str, str] = {
    "ok": "通过",
    "text": "{text}",
    "quote": "`{text}`",
    "join.comma": "{first}，{second}",

    # The speed check and what it waits for
    "speed.graded_config": "",
    "speed.test_config": "，使用本套件的测试配置 `{variable}={name}`",
    "speed.one_run": "",
    "speed.median_of": "，取 {runs} 次测量的中位数",
    "speed.not_scored": "速度未计分：{reason}",
    "speed.not_scored_spot": "速度未计分：{reason}（forward 是不是缓存了结果或跳过了计算？）",
    "speed.no_measurement": "计时运行没有发回测量结果",
    "speed.other_config": "计时运行使用的配置或随机种子与评分程序要求的不同",
    "speed.malformed_times": "计时运行发回的时间格式不对",
    "speed.no_outputs": "计时运行没有发回输出",
    "speed.wrong_output": "第 {round} 轮计时中第 {call} 次调用的输出不对",
    "speed.over_wall": "报告的时间加起来超过了测量实际花费的 {wall:.2f} 秒",
    "speed.busy_beside": "在另一个进程里为本套件的基准计时时，你的代码所在的进程占用了 CPU 时间"
                         "（相当于那一轮的 {share:.0f}%）：那时你的代码不能运行",
    "waiting.speed": "MultiHeadAttention 的结果（包括计时所用的 is_causal=True）与 "
                  "nn.MultiheadAttention 一致之后才计时",
    "waiting.failing": "{what}；目前未通过：{checks}",
    "waiting.stand_ins": "{pieces} 中至少有一个通过自己的检查后才运行：如果全部换成套件自己的版本，"
                         "这里就不会运行你的任何代码",
    "standin.note": "{text}；本项用套件自己的 {pieces} 评分，因为你的没有通过 {checks}",

    # The score table, Gradescope and batches
    "gradescope.unconfined": "run_autograder：不评分：学生代码将以 root 身份运行，没有 Landlock "
                             "约束它（也没有可以降级的账户），因此它可以自己写这次评分的结果。"
                             "请使用带 Landlock 的内核，或让 `nobody` 能读取 Python、torch 和"
                             "本套件；或者设置 {variable}=1 仍然评分",
    "gradescope.no_assignment": "mha-kit gradescope：套件没有可在 Gradescope 上评分的作业 "
                                "{assignment}；可选：{known}",
    "gradescope.no_visibility": "mha-kit gradescope：--hidden {visibility} 不是隐藏输入测试的"
                                "可见性；可选：{known}",
    "report.check": "检查项",
    "report.points": "得分",
    "report.message": "说明",
    "report.total": "总分",
    "report.hidden_failed": "在隐藏输入上未通过（与可见输入的大小和数值不同，不予显示）："
                            "{mistakes}",
    "report.no_mistake": "没有已知的错误能解释它；可见的检查和笔记本自己的测试单元会在你能看到"
                         "的输入上检验同样的性质",
    "report.while_loading": "加载文件时：",
    "report.printed": "你的代码打印了：{printed}",
    "batch.grader_failed": "评分程序出错：{type}：`{error}`",
    "batch.grader_died": "评分进程在给这份提交评分时退出了（是不是它的代码杀死了评分程序？）",
    "batch.started": "正在用 {jobs} 个并行任务在 {device} 上评分 {assignment} 的 {count} 份提交 ……",
    "batch.summary": "用 {jobs} 个并行任务在 {seconds:.1f} 秒内评完 {count} 份提交",
    "batch.totals": "  总分：平均 {mean:.1f}，中位数 {median:g}，最低 {min:g}，最高 {max:g}",
    "batch.no_file": "  没有唯一的提交文件：{students}",
    "files.no_such_file": "{path}：文件不存在",
    "files.not_a_submission": "{path}：应当是 .py 文件或 .ipynb 笔记本",
    "files.unreadable": "{path}：无法读取（{type}：`{error}`）",
    "files.several": "有 {count} 个 {suffix} 文件，应当只有一个：{names}",
    "files.none": "没有找到 .ipynb 或 .py 文件",
    "files.upload": "{problem}：请上传你的笔记本（.ipynb）或 .py 文件",

    # Pictures
    "picture.labelled": "{call} 作用于带标签的数，x 的形状为 {shape}："
                        "格子 tT hH fF 存放词元 T 的头 H 的第 F 个特征",
    "picture.larger_case": "{title}（比文字所说的情形更大，便于看清）",
    "picture.token": "词元 t",
    "picture.feature": "特征",
    "picture.blocked": "{title}：权重为 0 的位置，即被屏蔽的键",
    "picture.panel": "{name} {shape}",
    "picture.input": "x",
    "picture.blocks": "最后两维之前的每个下标占一块",
    "picture.mask": "{name}（黑色 = 屏蔽）",
    "picture.key": "键 j",
    "picture.query": "查询 i",
    "picture.wrong": "错误",
    "picture.difference": "你的 - 应当是",
    "picture.head": "{name}，头 {head}",
    "picture.head_axis": "头",
    "picture.index": "{name}，{dim}={index}",

    # The command line and the notebook API
    "cli.grading": "正在 {device} 上按 {assignment} 评分 {path} ……",
    "cli.seconds": "（{seconds:.1f} 秒）",
    "cli.wrote": "已写入 {path}",
    "cli.wrote_both": "已写入 {path}，以及 {folder} 中的 {count} 个文件",
    "cli.unknown_checks": "{assignment} 没有这些检查项：{unknown}；可选：{ids}",
    "cli.no_cuda": "--device cuda：这个 torch（{torch}）没有 CUDA（CPU 版本，或者看不到 "
                   "GPU）。去掉 --device 就在 CPU 上评分；或者在有 GPU 的机器上安装 CUDA 版本的 "
                   "torch",
    "cli.jobs": "--jobs 至少为 1",
    "cli.broken_assignment": "mha-kit：作业 {name!r} 无法加载，已略去（其他作业照常可用）：{why}",
    "cli.not_a_folder": "{path}：不是文件夹",
    "cli.no_submissions": "{path}：没有提交（.py、.ipynb，或每个学生一个文件夹）",
    "cli.mixed_assignments": "{path}：这些提交属于不同的作业：{found}；请用 --assignment "
                             "指明要批改哪一个",
    "notebook.failed": "{check} 得 0 分（满分 {points}）：原因见上面 ✗ 开头的那一行",
    "notebook.unknown_check": "没有检查项 {check!r}；可选：{ids}",
    "training.yours": "你的 {name}",
    "training.losses": "{name}：损失 {first:.3f} -> {last:.3f}（训练 {steps} 步）",
    "training.step": "训练步数",
    "training.loss": "损失 (MSE)",
    "training.title": "能训练吗？相同的初始权重，相同的批次",
    "report.class_mistake": "{share:.0f}% {mistake}",
    "report.class_histogram": "{students} 名学生的总分分布",
    "report.class_total": "总分（满分 {max:g}）",
    "report.class_pass_rates": "每个检查项拿到满分的学生比例（%）",
    "report.class_mistakes": "最常被指出的 {top} 个错误（占学生的 %）",
    "report.class_no_mistakes": "这个班级里没有被指出的已知错误",
    "report.class_written": "已写出班级报告：{table} 和 {picture}",
    "trusted.problem": "在评分工具包的工作进程中评分提交的 notebook 时：{problem}",
    "trusted.hidden_failed": "你的代码在 notebook 的输入上通过了这项检查，但在隐藏测试的输入上"
                             "没有通过（隐藏测试的输入不公开）：请换其他尺寸（batch、序列长度、"
                             "头数）并加上掩码再试",

    # nbgrader 的 autograde
    "autograde.kernel_died": "内核在运行{cell}时退出了，之后的单元格都没有运行；"
                             "分数来自评分工具包自己的评分",
    "autograde.kernel_disk": "内核在运行{cell}时被中止：notebook 写入的文件占用了"
                             "超过 {gib:g} GiB 的磁盘空间，超出了评分程序的上限（已删除但仍"
                             "打开着的文件也计算在内），之后的单元格都没有运行；分数来自评分"
                             "工具包自己的评分",
    "autograde.kernel_stuck": "{cell}运行超过 {seconds} 秒，内核不再响应，"
                              "之后的单元格都没有运行；分数来自评分工具包自己的评分",
    "autograde.timed_out": "{cell}运行超过 Execute.timeout，已被中断",
    "autograde.demo_not_run": "自动评分时没有运行：这个演示不计分；请在你自己的 notebook "
                              "里运行它，查看输出",
    "autograde.kit_grades": "尚未评分：这个单元格的输出由 TrustedGrades 写入（它是否在 "
                            "Autograde.autograde_preprocessors 中、位于 StudentCells 之后？）",
    "autograde.other_assignment": "没有评分：这个 notebook 按 {assignment} 评分，"
                                  "其中没有这个检查项",
    "autograde.not_converted": "没有记录：nbgrader 无法自动评分它：{error}",
    "autograde.not_recorded": "没有记录：nbgrader 无法写入它的成绩：{error}",
    "autograde.zero": "已记录为每个测试单元格 0 分，并附上原因",
    "autograde.note": "{student}：{note}",
    "autograde.skipped": "{count} 份已经自动评过分的提交保持不变（--force 重新评分）：{students}",
    "autograde.report_leaves_out": "班级报告只包含本次评分的提交，不含保持不变的 {count} 份",
    "autograde.no_report": "没有写出班级报告：本次没有评分任何提交",
    "autograde.summary": "用 {jobs} 个并行任务在 {seconds:.1f} 秒内自动评完 {assignment} 的 "
                         "{count} 份提交；{recorded} 份已记录到 {gradebook}",
    "autograde.failures": "{count} 份提交无法记录：{students}",
    "autograde.no_gradebook": "{path}：没有成绩库；请先发布作业（`mha-kit release {assignment}` "
                              "或 `nbgrader generate_assignment {assignment}`）",
    "autograde.no_assignment": "{path} 中没有作业 {assignment}；请先发布它（`mha-kit release "
                               "{assignment}` 或 `nbgrader generate_assignment {assignment}`）",
    "autograde.not_sqlite": "mha-kit autograde 需要 SQLite 成绩库，而不是 {url}",
    "autograde.no_submissions": "{path} 中没有 {assignment} 的提交",
    "autograde.started": "正在用 {jobs} 个并行任务自动评分 {assignment} 的 {count} 份提交 ……",
    "autograde.misnamed": "没有评分：{folder} 中是 {found}，但 nbgrader 只评分 {assignment} 的 "
                          "{expected}：请把它重命名为 {expected}，然后再运行一次",
    "autograde.unknown_notebook": "没有评分：{folder} 中还有 {found}，但 nbgrader 只评分 "
                                  "{assignment} 的 {expected}；要改评它，请把它重命名为 "
                                  "{expected}，然后加 --force 再运行一次",

    # 新作业（scaffold）及其发布还缺什么（release.todo）
    "new.bad_name": "{name!r} 不能作为作业名：只用小写字母、数字和 _，以字母开头，且不以 "
                    "{endings} 结尾（那是译本的名字）",
    "new.exists": "{name!r} 已被占用：{path} 已经存在",
    "new.name_used": "{name!r} 已被占用：已有作业、提交定义的名字或检查项用了它，而脚手架"
                     "让这三者都用这个名字",
    "new.setting": "只有 {folder} 在 `assignments` 设置中时，mha-kit 才能找到 {name}："
                   "mha-kit 和 nbgrader 的每条命令的环境里都要有 {variable}={folder}",
    "new.next": "接下来，在 {course} 中：\n"
                "  1. 编写练习：{notebook} 解答单元格中的函数，{package}/checks.py 中的参考答案"
                "与错误，{package}/messages.py 中它们的句子\n"
                "  2. mha-kit check {notebook}：原样即得 100/100\n"
                "  3. mha-kit release {name}：若还缺套件测试所需的内容，它会说明\n"
                "  4. 翻译 {overlays}（python -m mha_kit.editions status），然后 "
                "mha-kit release {editions}",
    "course.unknown": "套件没有作业 {unknown}；可选：{known}",
    "course.exists": "未写入，这些文件已经存在（--force 会覆盖它们）：{paths}",
    "course.next": "接下来，在 {course} 中（每条命令都在那里运行）：\n"
                   "  1. 在 solutions/<作业>/ 中每个母本的第一个代码单元格里，把 {variable} "
                   "设为学生安装套件的地址\n"
                   "  2. mha-kit release：把学生的笔记本写入 assignments/，并写出 nbgrader 的 "
                   "gradebook.db\n"
                   "  3. 分发 assignments/<作业>/，收集到 submitted/<学生>/<作业>/，然后："
                   "mha-kit autograde <作业>；nbgrader generate_feedback <作业>；"
                   "nbgrader export\n"
                   "设置（限制、沙箱、密钥）写在 {config} 中，形如 c.MhaKit.<设置>。"
                   "完整步骤：套件仓库中的 docs/instructor-guide.md",
    "release.todo": "{assignment} 还需要：{what}",
    "release.no_test_cell": "在 {folder} 的笔记本中加一个锁定的测试单元格 `check(\"{check}\")`，"
                            "评分 id 为 {check}：nbgrader 只评有测试单元格的检查",
    "release.mistake_opening": "在 messages.py 中，`mistake.{mistake}` 的句子英文应以 `{en}` "
                               "开头，中文应以 `{zh}` 开头：反馈把它放在出错之处的说明之后",
    "release.listing": "在 {doc} 的作业表中加一行 | `{assignment}` | `{notebook}` | … |",
    "release.edition": "{overlay}：{problems}。套件自带的每个作业都有中文版：翻译这个覆盖文件"
                       "（python -m mha_kit.editions status），然后 mha-kit release "
                       "{edition}",
    "release.unmarked": "{ids} 的中文模板尚未记录为译自当前的英文：译好之后运行 {command}",
    **CHECKS,
    **GRADIENTS,
    **MISTAKES,
    **RUNNER,
}
