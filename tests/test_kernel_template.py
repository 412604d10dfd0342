"""Kernel processes forked from a warm template (`mkb_ray.kernel_runner.template`, CPU only): each walls itself
off from the template and from its siblings before any candidate code runs (problems/CONTRACT.md, "How the two
processes start"). The probe below is a hostile candidate: importing it runs the attacks, and it writes what it saw
into its own scratch directory, which the test reads from outside."""
from __future__ import annotations

import json
import os
import select
import signal

import pytest

from mkb_ray.judge.kernel_template import KernelTemplate, monitor_pid
from mkb_ray.judge.process import CheckerPool
from mkb_ray.checker.kernel_process import KernelProcess, Rejected
from mkb_ray.checker.sandbox import SandboxLimits

PROBE = r'''
import ctypes, errno, json, os, resource, socket

seen = {"pids": sorted(p for p in os.listdir("/proc") if p.isdigit()),
        "kids": os.listdir("/judge/kids"), "host_proc": os.listdir("/judge/hostproc"),
        "tmp": sorted(os.listdir("/tmp")) + sorted(os.listdir("/dev/shm")),
        "cpu_limit": resource.getrlimit(resource.RLIMIT_CPU)[1], "uid": os.getuid()}
with open("/proc/self/status") as status:
    seen["caps"] = {line.split(":")[0]: int(line.split()[1], 16) for line in status if line.startswith("Cap")}
libc = ctypes.CDLL(None, use_errno=True)
seen["umount_kids"] = libc.umount2(b"/judge/kids", 2) == 0
seen["mount_over_scratch"] = libc.mount(b"tmpfs", b"/judge/scratch", b"tmpfs", 0, None) == 0
try:
    os.kill(-1, 0)
    seen["signal_all"] = "someone is visible"
except OSError as err:
    seen["signal_all"] = errno.errorcode[err.errno]
client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    client.connect(b"\0mkb-kernel-template-probe")
    seen["sibling_socket"] = "connected"
except OSError as err:
    seen["sibling_socket"] = errno.errorcode[err.errno]
LISTENER = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # kept open while this kernel process lives
LISTENER.bind(b"\0mkb-kernel-template-probe")
LISTENER.listen()
for place in ("/tmp", "/dev/shm"):
    open(os.path.join(place, "left-behind"), "w").close()
with open("/judge/scratch/seen.json", "w") as out:
    json.dump(seen, out)


def solve(*inputs):
    return inputs
'''


def _probe(process: KernelProcess, tmp_path) -> dict:
    source = tmp_path / "probe.py"
    source.write_text(PROBE)
    (process.input_dir / "kernel.py").write_bytes(source.read_bytes())
    (process.input_dir / "kernel.py").chmod(0o644)
    process.wait_ready(120)
    process.request({"op": "load", "kind": "candidate", "file": "kernel.py", "dsl": "tirx"}, 120)
    return json.loads((process.staging / "scratch" / "seen.json").read_text())


@pytest.mark.judge
def test_forked_kernel_processes_see_neither_their_template_nor_each_other(tmp_path):
    limits = SandboxLimits()
    template = KernelTemplate(("tirx",), profiled=False, limits=limits)
    first = second = None
    try:
        first = KernelProcess(False, forked=template.fork())
        second = KernelProcess(False, forked=template.fork())
        seen_first = _probe(first, tmp_path)
        seen_second = _probe(second, tmp_path)  # the first is still running, listening, with its files left
        for seen in (seen_first, seen_second):
            assert seen["pids"] == ["1"], seen  # a PID namespace and a /proc of its own
            assert seen["kids"] == [] and seen["host_proc"] == [], seen  # siblings' directories covered
            # A fresh /tmp and /dev/shm: what the first left is not there (the sandbox's own mounts are, such as a
            # checkout under /tmp).
            assert "left-behind" not in seen["tmp"], seen
            assert not any(seen["caps"].values()), seen  # every capability set empty
            assert not seen["umount_kids"] and not seen["mount_over_scratch"], seen
            assert seen["signal_all"] == "ESRCH", seen  # no other process to signal
            assert seen["sibling_socket"] == "ECONNREFUSED", seen  # another network namespace
            assert seen["cpu_limit"] == limits.cpu_s and seen["uid"] != 0, seen
        assert first.process.poll() is None and second.process.poll() is None
        assert template.alive()
    finally:
        for process in (first, second):
            if process is not None:
                process.close()
        template.close()


@pytest.mark.judge
def test_a_forked_kernel_process_ends_with_its_checker_and_reports_how():
    with CheckerPool("cpu", spares=1, dsls=("tirx",)) as pool:
        assert pool.wait_warm(120)
        spare = pool._ready[0]
        assert spare.kernel_pidfd is not None, "this CPU pool did not fork its kernel process"
        assert monitor_pid(spare.kernel_pidfd) is not None
        baseline = spare.forked_pidfds.get("baseline")
        assert baseline is not None and monitor_pid(baseline) is not None, "no baseline process was forked"
        os.killpg(spare.process.pid, signal.SIGKILL)  # the checker dies; its lifelines close
        assert select.select([spare.kernel_pidfd], [], [], 30)[0], "the kernel process outlived its checker"
        assert select.select([baseline], [], [], 30)[0], "the baseline process outlived its checker"
        spare.close()

    template = KernelTemplate(("tirx",), profiled=False)
    try:
        process = KernelProcess(False, forked=template.fork())
        process.wait_ready(120)
        process.kill()
        with pytest.raises(Rejected, match="killed by signal 9"):
            process.request({"op": "compiles"}, 30)
        process.close()
    finally:
        template.close()


@pytest.mark.judge
def test_a_pool_whose_kernel_template_died_starts_kernel_processes_itself(tmp_path):
    with CheckerPool("cpu", spares=0, dsls=("tirx",)) as pool:
        dead = pool._kernel_template
        assert dead is not None
        dead.process.kill()
        dead.process.wait(timeout=30)
        checker = pool.start_checker("cpu", ("tirx",))
        try:
            assert checker.kernel_pidfd is None and pool._kernel_template is None
            assert checker.warm(120), "the checker did not start a kernel process of its own"
        finally:
            checker.close()
