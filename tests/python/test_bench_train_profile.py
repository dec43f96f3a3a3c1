"""bench/train_profile.py's device time: the device-side events' own time, as
torch.profiler's table footers sum it, not events.total_average() (which also
counts the kernels credited to the CPU operators that launched them and the
spans of record_function annotations). Checked on profiler events made here:
one operator launching a 30 us kernel, and an Optimizer.step annotation whose
span on the device is 100 us."""

import os
import pathlib
import subprocess
import sys
import textwrap

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"


def test_device_time_is_the_kernels_not_their_operators_or_annotations(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(BENCH)!r})
        from torch.autograd import DeviceType
        from torch.autograd.profiler_util import EventList, FunctionEvent
        import train_profile

        def event(name, start, end, **kw):
            return FunctionEvent(id=0, name=name, thread=0, start_us=start, end_us=end, use_device="cuda", **kw)

        operator = event("aten::mm", 0, 10)
        operator.append_kernel("gemm", 0, 30)
        kernel = event("gemm", 10, 40, device_type=DeviceType.CUDA)
        annotation = event("Optimizer.step#AdamW.step", 0, 100, device_type=DeviceType.CUDA,
                           is_user_annotation=True)
        events = EventList([operator, kernel, annotation])
        print("BUSY", train_profile.device_busy_us(events), events.total_average().self_device_time_total)
    """)
    env = {**os.environ, "DEVBRIDGE_BENCH_CACHE": str(tmp_path / "cache")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    busy, overcounted = result.stdout.split("BUSY ")[1].split()
    assert float(busy) == 30.0
    assert float(overcounted) > 30.0  # what the script summed before: the reason for device_busy_us
