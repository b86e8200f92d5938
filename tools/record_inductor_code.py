"""Record the code inductor generates on this machine's CPU for lesson 10's chains (exercise 3 reads it).

    PYTHONPATH=src python tools/record_inductor_code.py            # every chain
    PYTHONPATH=src python tools/record_inductor_code.py concat     # only the chains named, the others kept

Writes src/gpucourse/recorded/inductor_cpu.json: for each chain its source, its inputs and the text
`torch._inductor.utils.run_and_get_code` returned, with the torch version, the machine and the date. The lesson grades
the reading of this recorded code, so the grade does not depend on whether the grader's machine has a C++ compiler.
Re-record only on purpose (the lesson's hidden expected values are read from these exact files).
"""

from __future__ import annotations

import datetime
import inspect
import json
import platform
import re
import sys
from pathlib import Path

import torch

OUT = Path(__file__).resolve().parents[1] / "src" / "gpucourse" / "recorded" / "inductor_cpu.json"


def tanh_chain(x):
    return torch.tanh(x * 2 + 1) * x


def gated(a, b):
    return torch.sigmoid(a) * b + 1


def softmax_rows(x):
    return torch.softmax(x, dim=-1)


def around_a_matmul(x, w):
    return torch.relu((x * 2 + 1) @ w) * 3


def transposed(x):
    y = torch.exp(x).t()
    return y.reshape(-1, 2)[:, 0] + y.reshape(-1)[:3].sum()


def widen(x):
    return x.to(torch.float32) * 2 - 1


def around_a_sort(x):
    return torch.sort(x * 2)[0] + 1


def row_sums(x):
    return (x * x).sum(dim=-1)


def view_between(x, w):
    h = (torch.exp(x) * 2).view(-1, 8)
    return torch.sigmoid((h @ w).t()).reshape(-1) * 2


def return_a_view(x):
    return (x * 3).t().unsqueeze(0)


def gelu_nine(x):
    cube = x * x * x
    inner = (x + 0.044715 * cube) * 0.7978845608028654
    return 0.5 * x * (1.0 + torch.tanh(inner))


def concat(x, y):
    return torch.cat([x * 2, torch.sin(y)])


def sort_then_reuse(x):
    return torch.sort(x * 2)[0] + x


def a_slice(x):
    return x[:, :10] * 2


def sign_mask(x):
    return x * 2 > 0


# Exercise 3's pairs: two writings of one computation (a graph break in one, a library call split differently, or the
# same code for both). A function with a graph break compiles to several modules: "codes" keeps them all.
def sort_scale_before(x):
    return torch.sort(x * 2, dim=-1)[0] + 1


def sort_scale_after(x):
    return torch.sort(x, dim=-1)[0] * 2 + 1


def clip_by_item(x):
    return x * min(1.0, 2.0 / x.abs().max().item())


def clip_by_clamp(x):
    return x * torch.clamp(2.0 / x.abs().amax(), max=1.0)


def branch_by_if(x):
    if x.sum() > 0:
        return x * 2
    return x * 3


def branch_by_where(x):
    return torch.where(x.sum() > 0, x * 2, x * 3)


def gelu_by_hand(x):
    return 0.5 * x * (1.0 + torch.tanh((x + 0.044715 * x * x * x) * 0.7978845608028654))


def gelu_library(x):
    return torch.nn.functional.gelu(x, approximate="tanh")


def layer_norm_by_hand(x):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5)


def layer_norm_library(x):
    return torch.nn.functional.layer_norm(x, x.shape[-1:])


def scale_x_then_mm(x, w):
    return (x * 2) @ w + 1


def scale_w_then_mm(x, w):
    return x @ (w * 2) + 1


def mm_then_scale(x, w):
    return (x @ w) * 2 + 1


def normalise_then_mm(x, w):
    return (x / x.norm(dim=-1, keepdim=True)) @ w


def mm_then_normalise(x, w):
    return (x @ w) / x.norm(dim=-1, keepdim=True)


def mm_then_clip_by_item(x, w):
    h = x @ w
    return h * min(1.0, 4.0 / h.abs().max().item())


def mm_then_clip_by_clamp(x, w):
    h = x @ w
    return h * torch.clamp(4.0 / h.abs().amax(), max=1.0)


def pick_by_if(flag, x, y):
    if flag.sum() > 0:
        return x * 2
    return y * 3


def pick_by_where(flag, x, y):
    return torch.where(flag.sum() > 0, x * 2, y * 3)


def scale_if_long(x):
    if x.shape[0] > 64:
        return x * 2 + 1
    return x * 3 + 1


def scale_plain(x):
    return x * 2 + 1


def scale_and_sine_logged(x, y):
    u = x * 2
    print("scaled")
    return u, torch.sin(y)


def scale_and_sine(x, y):
    return x * 2, torch.sin(y)


def sort_then_scale_reuse(x):
    return torch.sort(x)[0] * 2 + x


def columns_normalised(x):
    return x / x.norm(dim=0, keepdim=True)


def columns_normalised_by_rows(x):
    return (x.t() / x.t().norm(dim=-1, keepdim=True)).t()


def mm_gelu_by_hand(x, w):
    h = x @ w
    return 0.5 * h * (1.0 + torch.tanh((h + 0.044715 * h * h * h) * 0.7978845608028654))


def mm_gelu_library(x, w):
    return torch.nn.functional.gelu(x @ w, approximate="tanh")


def sort_logged_then_scale(x):
    a = torch.sort(x)[0]
    print("sorted")
    return a * 2


def sort_then_scale(x):
    return torch.sort(x)[0] * 2


def sine_around_two_mm(x, w):      # one generated kernel, launched twice (inductor reuses identical code)
    return torch.mm(torch.mm(x.sin(), w).sin(), w).sin()


def sine_after_two_mm(x, w):
    return torch.mm(torch.mm(x, w), w).sin()


CHAINS = {  # name -> (function, inputs)
    "tanh_chain": (tanh_chain, [((1000,), torch.float16)]),
    "gated": (gated, [((37, 53), torch.float32), ((53,), torch.float32)]),
    "softmax_rows": (softmax_rows, [((37, 53), torch.float32)]),
    "around_a_matmul": (around_a_matmul, [((9, 7), torch.float32), ((7, 5), torch.float32)]),
    "transposed": (transposed, [((6, 10), torch.float32)]),
    "widen": (widen, [((3, 333), torch.float16)]),
    "around_a_sort": (around_a_sort, [((333,), torch.float16)]),
    "row_sums": (row_sums, [((45, 77), torch.bfloat16)]),
    "view_between": (view_between, [((6, 12), torch.float32), ((8, 5), torch.float32)]),
    "return_a_view": (return_a_view, [((7, 11), torch.float16)]),
    "gelu_nine": (gelu_nine, [((4096,), torch.float32)]),
    "concat": (concat, [((37, 53), torch.float32), ((11, 53), torch.float32)]),
    "sort_then_reuse": (sort_then_reuse, [((333,), torch.float32)]),
    "a_slice": (a_slice, [((37, 53), torch.float32)]),
    "sign_mask": (sign_mask, [((45, 7), torch.bfloat16)]),
    "sort_scale_before": (sort_scale_before, [((24, 30), torch.float32)]),
    "sort_scale_after": (sort_scale_after, [((24, 30), torch.float32)]),
    "clip_by_item": (clip_by_item, [((300, 70), torch.float32)]),
    "clip_by_clamp": (clip_by_clamp, [((300, 70), torch.float32)]),
    "branch_by_if": (branch_by_if, [((129, 33), torch.float16)]),
    "branch_by_where": (branch_by_where, [((129, 33), torch.float16)]),
    "gelu_by_hand": (gelu_by_hand, [((77, 64), torch.bfloat16)]),
    "gelu_library": (gelu_library, [((77, 64), torch.bfloat16)]),
    "layer_norm_by_hand": (layer_norm_by_hand, [((300, 70), torch.float32)]),
    "layer_norm_library": (layer_norm_library, [((300, 70), torch.float32)]),
    "scale_x_then_mm": (scale_x_then_mm, [((300, 70), torch.float32), ((70, 8), torch.float32)]),
    "scale_w_then_mm": (scale_w_then_mm, [((300, 70), torch.float32), ((70, 8), torch.float32)]),
    "mm_then_scale": (mm_then_scale, [((300, 70), torch.float32), ((70, 8), torch.float32)]),
    "normalise_then_mm": (normalise_then_mm, [((300, 70), torch.float32), ((70, 8), torch.float32)]),
    "mm_then_normalise": (mm_then_normalise, [((300, 70), torch.float32), ((70, 8), torch.float32)]),
    "mm_then_clip_by_item": (mm_then_clip_by_item, [((96, 40), torch.float32), ((40, 72), torch.float32)]),
    "mm_then_clip_by_clamp": (mm_then_clip_by_clamp, [((96, 40), torch.float32), ((40, 72), torch.float32)]),
    "pick_by_if": (pick_by_if, [((16,), torch.float32), ((256, 192), torch.float16), ((256, 192), torch.float16)]),
    "pick_by_where": (pick_by_where, [((16,), torch.float32), ((256, 192), torch.float16), ((256, 192), torch.float16)]),
    "scale_if_long": (scale_if_long, [((300, 70), torch.bfloat16)]),
    "scale_plain": (scale_plain, [((300, 70), torch.bfloat16)]),
    "scale_and_sine_logged": (scale_and_sine_logged, [((37, 53), torch.float32), ((11, 53), torch.float32)]),
    "scale_and_sine": (scale_and_sine, [((37, 53), torch.float32), ((11, 53), torch.float32)]),
    "sort_then_scale_reuse": (sort_then_scale_reuse, [((333,), torch.float32)]),
    "columns_normalised": (columns_normalised, [((300, 70), torch.float32)]),
    "columns_normalised_by_rows": (columns_normalised_by_rows, [((300, 70), torch.float32)]),
    "mm_gelu_by_hand": (mm_gelu_by_hand, [((64, 48), torch.float32), ((48, 40), torch.float32)]),
    "mm_gelu_library": (mm_gelu_library, [((64, 48), torch.float32), ((48, 40), torch.float32)]),
    "sort_logged_then_scale": (sort_logged_then_scale, [((333,), torch.float32)]),
    "sort_then_scale": (sort_then_scale, [((333,), torch.float32)]),
    "sine_around_two_mm": (sine_around_two_mm, [((64, 64), torch.float32), ((64, 64), torch.float32)]),
    "sine_after_two_mm": (sine_after_two_mm, [((64, 64), torch.float32), ((64, 64), torch.float32)]),
}


def main() -> None:
    from torch._inductor.utils import run_and_get_code

    torch.manual_seed(0)
    only = sys.argv[1:]          # names given: record only those chains and keep the rest of the recording
    old = json.loads(OUT.read_text(encoding="utf-8")) if only else None
    chains = dict(old["chains"]) if only else {}
    for name, (fn, specs) in CHAINS.items():
        if only and name not in only:
            continue
        torch._dynamo.reset()
        inputs = [torch.randn(shape).to(dtype) for shape, dtype in specs]
        _, codes = run_and_get_code(torch.compile(fn), *inputs)
        codes = [re.sub(r"(# kernel path: ).*", r"\1<inductor cache>", code) for code in codes]   # no machine paths
        chains[name] = {"source": inspect.getsource(fn),
                        "inputs": [{"shape": list(shape), "dtype": str(dtype)} for shape, dtype in specs],
                        "code": codes[0]}
        if len(codes) > 1:       # a graph break: one module per graph, in the order they ran
            chains[name]["codes"] = codes
        print(name, len(codes), "module(s)", sum(map(len, codes)), "characters")
    record = {"what": "Code generated by torch.compile (inductor, C++ backend) on a CPU, recorded with "
                      "tools/record_inductor_code.py",
              "torch": torch.__version__, "python": platform.python_version(),
              "machine": f"{platform.machine()} CPU, {platform.system()}",
              "date": datetime.date.today().isoformat(), "chains": chains}
    if only and (old["torch"], old["machine"]) != (record["torch"], record["machine"]):
        raise SystemExit(f"the recording was made with torch {old['torch']} on {old['machine']}: re-record it all")
    OUT.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print("written", OUT, OUT.stat().st_size, "bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
