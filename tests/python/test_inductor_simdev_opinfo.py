"""torch's own operator samples (OpInfo, torch.testing._internal) compiled on
simdev by Inductor (Triton kernels run by Triton's interpreter) and compared
with eager on the CPU; where simdev fails or disagrees, the same sample
compiled on the CPU decides whether simdev is at fault (opinfo_cases.py says
which operators, dtypes and samples, and how). The operators of the first
alphabetical half; test_inductor_simdev_opinfo_2.py has the second."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")
pytest.importorskip("expecttest", reason="torch's OpInfo database imports expecttest: pip install expecttest")

import opinfo_cases as oc  # noqa: E402
from inductor_support import private_inductor  # noqa: E402
from launch_support import skip_without_simdev  # noqa: E402

pytestmark = skip_without_simdev


@pytest.fixture(scope="module", autouse=True)
def inductor_for_simdev(tmp_path_factory):
    with private_inductor(tmp_path_factory.mktemp("inductor-cache")):
        yield


hang_watchdog = pytest.fixture(autouse=True)(oc.watchdog)


@pytest.mark.parametrize("case", oc.cases(part=0), ids=oc.case_id)
def test_compiled_on_simdev_matches_eager_on_the_cpu(case):
    oc.check(*case)


def test_every_named_operator_is_in_this_torchs_op_db():
    """A name that is not (renamed, removed) would leave its operator
    untested without a word."""
    names = {op.full_name for op in oc.op_db}
    missing = [name for group in oc.SELECTED_GROUPS.values() for name in group
               if name not in names and name not in oc.NOT_IN_EVERY_TORCH]
    assert not missing, f"opinfo_cases.SELECTED_GROUPS names no OpInfo of torch {torch.__version__}: {missing}"
    assert len(oc.cases(0)) + len(oc.cases(1)) == len(oc.cases())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_an_in_place_operator_writes_its_input(dtype):
    """The one in-place representative: Tensor.add_ on a graph input, which
    Inductor compiles into a kernel that stores into the input's memory;
    the function returns that input, so the comparison reads simdev's copy
    of it. Samples that broadcast the input are not valid in place."""
    add = next(op for op in oc.op_db if op.full_name == "add")

    def add_(x, *args, **kwargs):
        add.inplace_variant(x, *args, **kwargs)
        return x

    samples = [s for s in oc.first_samples(add, dtype, 6) if not s.broadcasts_input][:oc.OTHER_SAMPLES]
    oc.check(add, dtype, fn=add_, samples=samples)
