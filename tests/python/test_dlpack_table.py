"""devbridge's DLPack exchange table: shape, install/uninstall, delegation."""

import ctypes

import pytest
import torch

import devbridge
from devbridge import dlpack_ctypes as dl


@pytest.fixture
def restore_install_state():
    was_installed = devbridge.is_installed()
    options = devbridge._C._get_options()
    yield
    devbridge.install(**options) if was_installed else devbridge.uninstall()
    devbridge._C._set_options(**options)


def test_table_version_and_functions():
    table = dl.Table(devbridge.exchange_api())
    assert table.version == (1, 3)
    assert not table.raw.header.prev_api
    for name, _ in dl.DLPackExchangeAPI._fields_[1:]:
        assert getattr(table.raw, name), f"{name} is NULL"


def test_capsule_is_named_and_static():
    capsule = devbridge.exchange_api()
    assert type(capsule).__name__ == "PyCapsule"
    assert devbridge.exchange_api() is capsule
    assert dl.capsule_pointer(capsule, b"dlpack_exchange_api") == dl.Table(capsule).address
    with pytest.raises(ValueError):
        dl.capsule_pointer(capsule, b"dltensor")


def test_torch_exchange_api_is_pytorchs_own():
    ours = dl.Table(devbridge.exchange_api()).address
    theirs = dl.Table(devbridge.torch_exchange_api()).address
    assert theirs != ours
    assert theirs == dl.capsule_pointer(torch._C._dlpack_exchange_api(), dl.EXCHANGE_CAPSULE)


def test_install_is_idempotent_and_uninstall_restores(restore_install_state):
    devbridge.uninstall()
    devbridge.uninstall()  # idempotent
    before = torch.Tensor.__dict__.get("__dlpack_c_exchange_api__")
    assert not devbridge.is_installed()

    devbridge.install()
    devbridge.install()  # idempotent: must not make our table its own delegate
    assert devbridge.is_installed()
    assert torch.Tensor.__dlpack_c_exchange_api__ is devbridge.exchange_api()
    # Discovered on the type, and inherited by subclasses such as Parameter.
    assert type(torch.nn.Parameter(torch.ones(1))).__dlpack_c_exchange_api__ is devbridge.exchange_api()
    assert devbridge._C._delegate_exchange_api_address() == dl.Table(before).address

    devbridge.uninstall()
    assert not devbridge.is_installed()
    assert torch.Tensor.__dict__.get("__dlpack_c_exchange_api__") is before


def test_install_sets_options_each_call(restore_install_state):
    devbridge.install(allow_null_stream=True, accept_ascend_device_type=True)
    assert devbridge._C._get_options() == {
        "allow_null_stream": True, "accept_ascend_device_type": True,
        "export_ascend_device_type": False}
    devbridge.install()
    assert not any(devbridge._C._get_options().values())


def test_options_are_keyword_only():
    with pytest.raises(TypeError):
        devbridge.install(True)


def test_delegate_cannot_be_our_own_table():
    with pytest.raises(ValueError, match="own exchange table"):
        devbridge._C._set_delegate_exchange_api(devbridge.exchange_api())
    with pytest.raises(ValueError, match="named 'dlpack_exchange_api'"):
        devbridge._C._set_delegate_exchange_api(devbridge.runtime_api())
    with pytest.raises(TypeError, match="PyCapsule"):
        devbridge._C._set_delegate_exchange_api(1234)


def test_cuda_stream_queries_are_delegated_to_pytorch(restore_install_state):
    """On this CPU build PyTorch's table answers NULL for CUDA; ours must give
    exactly what PyTorch's gives, for every device type devbridge does not own."""
    devbridge.install()
    ours = dl.Table(devbridge.exchange_api())
    theirs = dl.Table(devbridge.torch_exchange_api())

    def answer(table, device_type, device_id):
        # PyTorch may refuse a query (a device id beyond the GPUs present):
        # then ours must refuse it the same way.
        try:
            return ("stream", table.current_stream(device_type, device_id))
        except Exception as error:  # noqa: BLE001 - compared below
            return ("refused", type(error).__name__)

    for device_type in (dl.KDL_CUDA, dl.KDL_ROCM, dl.KDL_ONEAPI, 99):
        for device_id in (0, 1):
            assert answer(ours, device_type, device_id) == answer(theirs, device_type, device_id)


def test_delegation_forwards_the_call():
    """A delegate table written in Python (ctypes) sees the forwarded query."""
    seen = []

    @dl.CURRENT_STREAM_NOGIL
    def recording_current_work_stream(device_type, device_id, out):
        seen.append((device_type, device_id))
        out[0] = 0x5eed
        return 0

    fake = dl.DLPackExchangeAPI()
    fake.header.version = dl.DLPackVersion(1, 3)
    fake.current_work_stream = ctypes.cast(recording_current_work_stream, ctypes.c_void_p)
    capsule = dl.capsule_new(ctypes.addressof(fake), dl.EXCHANGE_CAPSULE, None)
    previous = devbridge._C._delegate_exchange_api_address()
    devbridge._C._set_delegate_exchange_api(capsule)
    try:
        ours = dl.Table(devbridge.exchange_api())
        assert ours.current_stream(dl.KDL_CUDA, 3) == 0x5eed
        assert ours.current_stream(dl.KDL_CPU, 0) == 0
        assert seen == [(dl.KDL_CUDA, 3)]
    finally:
        devbridge._C._set_delegate_exchange_api(devbridge.torch_exchange_api())
    assert devbridge._C._delegate_exchange_api_address() == previous
