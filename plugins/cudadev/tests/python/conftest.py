"""cudadev tests: run on a machine with a CUDA GPU, a CUDA build of torch and
torch_cudadev installed; skipped, visibly, everywhere else.

The plugin is imported here explicitly. With several PrivateUse1 plugins
installed, run with TORCH_DEVICE_BACKEND_AUTOLOAD=0 so that autoload does not
load another one first (only one plugin can own PrivateUse1 in a process).
"""

import importlib.util
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
SKIP_REASON = "cudadev needs a CUDA GPU and a CUDA build of torch; not available here"


def _why_cudadev_cannot_run():
    if torch.version.cuda is None or not torch.cuda.is_available():
        return SKIP_REASON
    if importlib.util.find_spec("torch_cudadev") is None:
        return (
            f"{SKIP_REASON} (torch_cudadev is not installed: "
            "pip install --no-build-isolation plugins/cudadev)"
        )
    claimed_by = torch._C._get_privateuse1_backend_name()
    if claimed_by not in ("privateuseone", "cudadev"):
        return (
            f"{SKIP_REASON} (PrivateUse1 is already claimed by '{claimed_by}' in this "
            "process; run with TORCH_DEVICE_BACKEND_AUTOLOAD=0)"
        )
    return None


CANNOT_RUN = _why_cudadev_cannot_run()
if CANNOT_RUN is None:
    import torch_cudadev  # noqa: F401  (claims PrivateUse1 as "cudadev")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gpu: needs a CUDA GPU and the cudadev plugin (skipped, visibly, elsewhere)"
    )


def pytest_collection_modifyitems(config, items):
    # A session-wide hook: mark only the tests under this directory.
    if CANNOT_RUN is None:
        return
    skip = pytest.mark.skip(reason=CANNOT_RUN)
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _start_on_default_streams():
    """Each test starts on cudadev:0 and the default streams; the GPU is idle after it."""
    if CANNOT_RUN is not None:
        yield
        return
    torch.cudadev.set_device(0)
    for index in range(torch.cudadev.device_count()):
        torch.accelerator.set_stream(torch.cudadev.default_stream(index))
    torch.accelerator.set_device_index(0)
    yield
    torch.cuda.synchronize()
