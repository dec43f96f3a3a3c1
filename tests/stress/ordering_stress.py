"""Reproducer: cross-stream ordering on the PrivateUse1 plugin, many times.

    python tests/stress/ordering_stress.py --iterations 400 [--delay-us 2000] [--device simdev:0]

Each iteration: zeros on the default stream, device synchronize, then on a
producer stream fill_(3) / add_(4) / mul_(1) and an event; a consumer stream
waits on the event and clones. Every element must read 7. Anything else is an
ordering bug (4 means add_ read the tensor before fill_ had written it).

History (docs/gpu.md): 39 bad of 400 on the H200 host with torch 2.11, 0 of
2,300 on the CI machine with torch 2.13. Cause: torch 2.11's
torch.accelerator.synchronize() is a no-op for a PrivateUse1 device whose
module has no _lazy_init() (simdev had none), so the zeros were still being
written. Keep it for plugins: run it on new torch versions and new hosts.
"""

from __future__ import annotations

import argparse

import torch


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--delay-us", type=int, default=2000,
                        help="plugin debug delay per queued op (simdev: set_op_delay_us)")
    parser.add_argument("--device", default=None, help="default: the accelerator's device 0")
    args = parser.parse_args()
    if args.device is None:
        import torch_simdev  # noqa: F401  (the reference plugin, unless autoloaded)
    device = torch.device(args.device or f"{torch.accelerator.current_accelerator().type}:0")
    module = torch.get_device_module(device.type)
    if hasattr(module, "set_op_delay_us"):
        module.set_op_delay_us(args.delay_us)
    bad = 0
    for i in range(args.iterations):
        producer, consumer = torch.Stream(device=device), torch.Stream(device=device)
        source = torch.zeros(1 << 16, device=device)
        torch.accelerator.synchronize(device)
        with producer:
            source.fill_(3.0)
            source.add_(4.0)
            source.mul_(1.0)
            done = torch.Event()
            done.record(producer)
        with consumer:
            consumer.wait_event(done)
            seen = source.clone()
        consumer.synchronize()
        producer.synchronize()
        values = seen.cpu()
        if not bool((values == 7.0).all()):
            bad += 1
            if bad <= 5:
                print(f"iteration {i}: values {sorted(set(values.tolist()))}, expected [7.0]")
    print(f"bad {bad} of {args.iterations} on {device}, torch {torch.__version__}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
