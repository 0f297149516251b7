"""Chinese templates of the gradient and device checks (see en_gradients.py, which has the same
ids and fields)."""

TEMPLATES: dict[str, str] = {
    # Gradients
    "grad.detached": "`{name}` 的输出没有 grad_fn，而输入是需要梯度的：输出与 autograd "
                     "计算图断开了，它之前的一切都无法训练。请检查从输入到输出之间有没有 "
                     "`.detach()`、`.data`、`torch.no_grad()`、`.numpy()` 或 `torch.tensor(x)`",
    "grad.detached_part": "`{name}` 返回的 `{output}` 没有 grad_fn，而输入是需要梯度的：它与 "
                          "autograd 计算图断开了，它之前的一切都无法训练。请检查通往 `{output}` "
                          "的路上有没有 `.detach()`、`.data`、`torch.no_grad()`、`.numpy()` 或 "
                          "`torch.tensor(x)`",
    "grad.needs_no_grad": "`{name}` 只有在关闭 autograd 时才能运行：输入需要梯度时它抛出 "
                          "`{error}`。请让每一步都在 torch 里、在传入的张量上完成（不要用 "
                          "`.numpy()`，不要用 `.data`），梯度才能传回去",
    "grad.none": "{what} 是 None，而输出是依赖它的：它在途中脱离了 autograd 计算图"
                 "（`.data`、`.detach()`、`torch.no_grad()`、`.numpy()`）",
    "grad.none_param": "{what} 是 None，而输出是依赖它的：它在 autograd 计算图之外被使用了"
                       "（`.data`、`.detach()`、`torch.no_grad()`），或者它不是需要梯度的 "
                       "`nn.Parameter`",
    "grad.zero": "{what} 全是 0，而输出是依赖它的：请检查使用它的地方有没有 `.detach()` 或 "
                 "`.data`",
    "grad.of_input": "`{name}` 对输入 `{input}` 的梯度",
    "grad.of_param": "`{name}` 对 `{param}` 的梯度",
    "grad.inplace": "backward() 失败：`{code}`{where} 原地修改了 autograd 为反向传播保存的张量"
                    "（`{error}`）。请改写成 `{fix}`：非原地的运算不会改动保存下来的张量",
    "grad.inplace_clone": "backward() 失败：`{code}`{where} 原地修改了 autograd 为反向传播保存"
                          "的张量（`{error}`）。请在它前面加上 `{fix}`，让保存下来的张量保持原样；"
                          "或者用非原地的方式得到结果（`torch.where`、`masked_fill`）",
    "grad.inplace_unknown": "经过 `{name}` 的 backward() 失败：autograd 为反向传播保存的张量"
                            "被原地修改了（`{error}`）。请找出原地运算（`masked_fill_`、"
                            "`exp_`、`+=`、`*=`、`x[...] = ...`），改成非原地的写法："
                            "`x = x.masked_fill(mask, value)`、`x = x * s`",
    "grad.at_line": "（{cell}第 {line} 行）",
    "grad.raised": "经过 `{name}` 的 backward() 抛出了 {type}：`{error}`",
    "grad.gradient_count": "经过 `{name}` 的 backward() 抛出了 {type}：`{error}`。自定义 "
                           "autograd.Function 的 backward 要为 forward 除 ctx 外的每个参数各返回"
                           "一个值，这里是 {expected} 个：每个张量输入的梯度，其余参数（开关、"
                           "块大小）返回 None。你的返回了 {got} 个",
    "grad.missing": "`{name}` 的输出值正确，但没有得到梯度",
    "case.backward": "{case}；对输出乘以随机权重做反向传播",

    # Devices
    "device.cpu_tensor": "`{name}` 在 cpu 上创建了张量，而输入在 meta 设备上（实际使用时是 "
                         "GPU）{where}：请用 device=x.device 创建它",
    "device.where": "，{cell}第 {line} 行",
    "device.where_code": "，{cell}第 {line} 行：`{code}`",
    "device.output": "`{name}` 返回了 {device} 上的张量，而输入在 meta 设备上（实际使用时是 "
                     "GPU）：请用 device=x.device 创建它",
    "device.output_argument": "以 device=meta（实际使用时是 GPU）调用 `{name}` 时，它返回的"
                              "张量在 {device} 上：请在传入的设备上创建它（device=device）",
    "case.meta": "{case}，输入和权重都在 meta 设备上",
}
