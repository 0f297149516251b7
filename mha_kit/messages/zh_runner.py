"""Chinese templates of the runner (see en_runner.py, which has the same ids and fields). Text
from the student's code or from Python (`{error}`, `{text}`) is quoted as code: it stays as it
was written."""

TEMPLATES: dict[str, str] = {
    # Calling student code
    "runner.not_implemented": "`{name}` 还没有实现",
    "runner.missing": "`{name}` 没有定义，应当是 `{signature}`",
    "runner.missing_after_problems": "`{name}` 没有定义，应当是 `{signature}`（加载文件时出了问题，"
                                     "见下文）",
    "runner.at_line": "（{cell}第 {line} 行）",
    "line.cell": "定义 `{function}` 的单元格中",
    "runner.refused_threads": "`{name}` 启动了一个线程{line}：被评分的代码不能这样做（评分程序"
                              "只监视调用你代码的那个线程上的 torch 调用；例如 ThreadPoolExecutor、"
                              "DataLoader 的 pin-memory 线程）。请在调用你的线程上完成计算",
    "runner.refused_processes": "`{name}` 启动了一个进程或会话{line}（os.fork、multiprocessing、"
                                "带 worker 的 DataLoader、os.setsid）：被评分的代码不能这样做。"
                                "请在调用你的进程里完成计算",
    "runner.raised": "`{name}` 抛出了 {type}{line}",
    "runner.raised_text": "`{name}` 抛出了 {type}{line}：`{error}`",
    "runner.float32_overflow": "{raised}。一个 float64 的值被写进了 float32 张量：评分程序也会用 "
                               "float64 的输入调用你的代码，而不指定 dtype 创建的张量是 float32"
                               "（不带 dtype= 的 torch.zeros(...)、torch.full(...)、"
                               "torch.tensor(...)，或 .float() 转换）。请用输入的 dtype 创建它："
                               "dtype=x.dtype，或 x.new_full(...)",
    "runner.float32_meets_float64": "{raised}。一个 float32 张量遇到了 float64 张量：评分程序也会"
                                    "用 float64 的输入调用你的代码，而转换成 float32 的张量"
                                    "（.float()、.to(torch.float32)、softmax(..., "
                                    "dtype=torch.float32)）会一直是 float32。请在它与输入相遇"
                                    "之前转换回来：.to(x.dtype) 或 .type_as(x)",
    "runner.view_not_contiguous": "{raised}。.view 复用张量的内存，所以需要能给出新形状的"
                                  "步长（stride），而 .transpose、.permute 或 .expand 之后的"
                                  "张量步长不同（例如在 .transpose(1, 2) 之后用 .view(B, T, E) "
                                  "合并各头）。请用 .reshape（必要时会复制），或 "
                                  ".contiguous().view",
    "runner.device_mix": "{raised}。创建张量时没有写 device=x.device（torch.zeros(shape)、"
                         "torch.arange(n)、torch.tensor(...)），它就在 CPU 上，而输入不在"
                         "（设备检查把输入放在 meta 上；实际使用时是 GPU）。请在输入所在的设备"
                         "上创建它：device=x.device，或 torch.zeros_like(x)、x.new_zeros(...)",
    "runner.out_of_memory": "`{name}` 内存不足{size}{limit}：这个练习只需要与输入同样大小的张量",
    "runner.asked_for": "（一次申请了 {gib:,.1f} GiB）",
    "runner.memory_limit": "；评分程序允许 {gib:g} GiB",
    "runner.kit_code": "`{name}` 让评分程序自己的代码替它计算（{function}）：分数要靠你自己的代码"
                       "挣得，而不是套件的。请自己实现",
    "runner.kit_read": "`{name}` 读取了评分套件自己的文件 {path}：被评分的代码不能读取套件的文件；"
                       "请自己编写代码",
    "runner.forbidden": "`{name}` 调用了 {api}，而这个练习要求你自己实现它：被评分的代码不能调用它",
    "runner.bad_layout": "`{name}` 返回了 {device} 上的 {layout} 张量；请返回普通的稠密张量",
    "runner.subclass": "`{name}` 返回了张量子类 {type}；请返回普通的 torch.Tensor",
    "runner.too_deep": "`{name}` 返回的列表或元组嵌套太深；请返回 torch.Tensor",
    "runner.bad_type": "`{name}` 返回了类型为 {type} 的值；请返回 torch.Tensor",
    "runner.not_module": "`{name}(...)` 不是 nn.Module",
    "runner.no_submodule": "`{owner}` 没有子模块 `{holder}`：评分程序要通过它读写权重"
                           "（`{signature}`）",
    "runner.not_none": "bias=False 时 `{owner}.{param}` 应当是 None",
    "runner.no_param": "缺少 `{owner}.{param}`：应当是形状为 {shape} 的参数",
    "runner.param_shape": "`{owner}.{param}` 的形状是 {got}，应当是 {expected}",

    # Loading the file
    "load.cell_defining": "定义 `{name}` 的单元格",
    "load.cell_ran": "单元格 In [{count}]",
    "load.cell_starting": "以 `{line}` 开头的单元格",
    "load.syntax": "{where}：第 {line} 行有语法错误：`{error}`",
    "load.not_compiled": "{where}：无法编译：`{error}`",
    "load.raised": "{where}{line}抛出了 {type}：`{error}`",
    "load.kit_read": "{where}{line}读取了评分套件自己的文件 {path}：被评分的代码不能读取套件的"
                     "文件；请自己编写代码",
    "load.raised_bare": "{where}{line}抛出了 {type}",
    "load.not_installed": "{where}{line}导入了 {module}，但这里没有安装它：请运行 "
                          "pip install \"mha-kit[{extra}]\"（Colab 的 torch 自带它）",
    "load.unreadable": "无法读取 {path}：{type}：`{error}`",

    # The worker process
    "worker.cap": "没有运行：这份提交的评分用时达到了总上限 {limit:g} 秒",
    "worker.load_timeout": "加载文件超过 {limit:g} 秒仍未完成（顶层代码是不是有死循环？）",
    "worker.slow_cell": "加载到 {limit:g} 秒上限时，notebook 的{cell}仍在运行：它被中止并略过，"
                        "其中定义的内容缺失（之后的单元格照常运行）",
    "worker.load_crash": "加载文件时你的代码让评分进程退出了（{status}）",
    "worker.no_answer": "它不再响应",
    "worker.killed": "被 {signal} 终止",
    "worker.killed_oom": "被 {signal} 终止（内存不足？）",
    "worker.killed_abort": "被 {signal} 终止（原生代码崩溃，或内存不足）",
    "worker.killed_crash": "被 {signal} 终止（原生代码崩溃）",
    "worker.exit_code": "退出码 {code}：学生代码里是不是调用了 sys.exit 或 os._exit？",
    "worker.check_cap": "`{what}` 被中止：检查项 {check} 用时达到上限 {limit:g} 秒"
                        "（代码是不是太慢了？）",
    "worker.total_cap": "`{what}` 被中止：这份提交的评分用时达到了总上限 {limit:g} 秒",
    "worker.timeout": "`{what}` 运行超过 {limit:g} 秒被中止（是不是死循环？）",
    "worker.disk_cap": "`{what}` 被中止：你的代码写入的文件占用了超过 {gib:g} GiB 的磁盘空间，"
                       "超出了评分程序对每份提交的上限（已删除但仍打开着的文件也计算在内）",
    "worker.crash": "`{what}` 让评分进程退出了（{status}）",
    "worker.crash_triton": "{crash}。在 Triton 解释器中，这多半是 tl.load 或 tl.store 越过了张量的"
                           "末尾：给每个加上 mask（比如 rows < T），并给加载加上 `other=`，"
                           "作为被屏蔽位置的取值",
    "worker.unreadable_reply": "`{what}` 返回的不只是普通的张量和值（`{error}`），"
                               "评分程序不读取这样的结果",
    "worker.malformed_reply": "`{what}`：评分子进程发回的回复格式不对",
    "worker.unsendable": "`{what}` 返回的东西无法传回（{type}）：请返回普通的张量",
    "worker.grader_error": "{type}：`{error}`",
    "worker.cannot_start": "评分子进程无法启动{user}：{error}",
    "worker.as_user": "（以用户 {user!r} 运行；可用 {variable} 换一个）",
    "worker.printed": "`{text}`",
    "worker.printed_more": "`{text}` ……（共 {count:,} 个字符）",
    "runner.params_in_forward": "`{name}` 每次调用都会新建参数（共 {count} 个，第一个在一个 "
                                "{layer} 中{where}）：在 forward 里创建的层每次都有新的随机权重，"
                                "评分程序无法把自己的权重载入其中，训练也永远看不到它。请在 "
                                "__init__ 里把每个层只创建一次（self.proj = nn.Linear(...)），"
                                "在 forward 里只调用它",
    "worker.timing": "{name}（计时）",
    "sandbox.off": "警告：学生代码在沙箱之外运行（{reason}）：它运行所用的账户能读写的地方它都能"
                   "读写（本工具包的安装目录、课程目录、其他学生的提交、你的主目录），也能访问网络。"
                   "Linux 的 Landlock（内核 5.13 或更新）或 bubblewrap"
                   "（apt-get install bubblewrap）可以保护它们（不设置 `{variable}`）。",
    "sandbox.on": "学生代码在沙箱中运行（{layers}）：它只能写自己的临时目录，也无法访问网络",
    "sandbox.disabled": "`{variable}=off`",
    "sandbox.missing": "找不到 `{bwrap}`",
    "sandbox.broken": "`{bwrap}` 无法在这里建立沙箱：`{error}`",
    "sandbox.no_landlock": "这个内核没有 Landlock（{error}）",
    "sandbox.not_linux": "Landlock 只有 Linux 有，这里是 {platform}",
    "sandbox.no_network": "Landlock ABI {abi} 没有 seccomp 就无法切断网络，而本工具包在 "
                          "{machine} 上不设置 seccomp",
    "runner.warned": "PyTorch 在你代码的{cell}第 {line} 行发出警告：{warning}",
    "runner.warned_code": "PyTorch 在你代码的{cell}第 {line} 行（`{code}`）发出警告：{warning}",
    "warning.x_t": "对多于 2 维的张量用 x.T 会把所有维度倒过来（(B, H, T, D) 变成 (D, T, H, B)）："
                   "只交换最后两维请用 x.transpose(-2, -1) 或 x.mT",
    "warning.softmax_dim": "不写 dim= 的 softmax 会自己猜维度：请写明，softmax(scores, dim=-1)",
}
