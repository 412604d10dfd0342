"""The checker: the trusted judging process, one per submission; no candidate code ever runs in it.

It imports only the standard library, torch, numpy and the DSL under test, so that it runs on a bare GPU host
from a plain checkout (`PYTHONPATH=. python -m mkb_ray.checker`). The parent side (`mkb_ray.judge`) sends a
request on stdin and reads the verdict from a private pipe; nothing the kernel prints can pass for a verdict.

`request` holds what the parent asks for (`JudgeOptions`, `JudgeRequest`: the one definition of the judging
options, which the parent side and the command line take their defaults from). Modules, in pipeline order:
`static_checks` (source rules) → `problem_loader` (problem + sidecar + presets) → `sandbox` (its
bubblewrap command line from `bwrap`, which the agents' sandbox shares), `kernel_process`,
`session` (the candidate's sandboxed process and the memory shared with it; what runs there is
`mkb_ray.kernel_runner`) → `correctness` (MKB tolerance) → `timing`, `baselines` → `pipeline` (the whole
judgement, a plain dict out).
"""
