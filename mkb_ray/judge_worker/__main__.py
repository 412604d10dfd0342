"""Entry point of the judging subprocess: `python -m mkb_ray.judge_worker`.

Protocol: the parent writes one JSON object to stdin — {"request": {...}, "nonce": str, "result_fd": int,
"mode": "judge" | "screen"} —
and closes it. The verdict goes back as {"nonce": ..., "verdict": {...}} on the inherited pipe `result_fd`,
never on stdout, so text the kernel prints cannot pose as a verdict.
"""
from __future__ import annotations

import json
import os
import sys


def main() -> int:
    # CuTe DSL without a GPU compiles for sm_100a unless told otherwise; our suite's GPU is sm_90a (Hopper). Set
    # here, where the judging process starts, so a bare `python -m mkb_ray.judge_worker` behaves as the parent's.
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    message = json.loads(sys.stdin.read())
    sys.stdin.close()
    result = os.fdopen(int(message.pop("result_fd")), "w")
    nonce = message.pop("nonce")
    # Imported only now so that a broken torch/DSL install still yields a readable error on stderr.
    if message.get("mode") == "screen":
        from .screens import run_screens

        try:
            verdict = run_screens(**message["request"])
        except Exception as err:  # a broken problem is a finding of the screen, not a crash
            verdict = {"error": f"{type(err).__name__}: {err}"}
    else:
        from .pipeline import run
        from .request import JudgeRequest

        verdict = run(JudgeRequest.from_json_dict(message["request"]))
    result.write(json.dumps({"nonce": nonce, "verdict": verdict}, default=str))
    result.close()
    sys.stdout.flush()
    # Skip interpreter teardown: DSL runtimes can hang or crash in their atexit hooks, after the verdict is out.
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
