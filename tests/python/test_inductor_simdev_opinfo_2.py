"""torch's own operator samples (OpInfo, torch.testing._internal) compiled on
simdev by Inductor (Triton kernels run by Triton's interpreter) and compared
with eager on the CPU; where simdev fails or disagrees, the same sample
compiled on the CPU decides whether simdev is at fault (opinfo_cases.py says
which operators, dtypes and samples, and how). The operators of the second
alphabetical half: test_inductor_simdev_opinfo.py has the first, and says more."""

from __future__ import annotations

import pytest

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


@pytest.mark.parametrize("case", oc.cases(part=1), ids=oc.case_id)
def test_compiled_on_simdev_matches_eager_on_the_cpu(case):
    oc.check(*case)
