"""torch.nn.Module.to() onto cudadev and back keeps every Parameter object:
cudadev answers aten::_has_compatible_shallow_copy_type (csrc/tensor_ops.cpp),
which torch leaves to a PrivateUse1 plugin. Without it, Module.to() wrapped
each moved parameter in a new Parameter, module by module, and weights two
modules share came apart: a GPT-2 model of `transformers` had its output
weights and its token embedding as two parameters on cudadev, one on cuda."""

import pytest
import torch
from torch import nn

pytestmark = pytest.mark.gpu


class TiedLanguageModel(nn.Module):
    def __init__(self, vocabulary=32, width=8):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, width)
        self.head = nn.Linear(width, vocabulary, bias=False)
        self.head.weight = self.embedding.weight  # tied, as GPT-2's are


@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_tied_weights_stay_one_parameter_onto_cudadev_and_back(dtype):
    model = TiedLanguageModel()
    parameters = list(model.parameters())
    model.to(device="cudadev", dtype=dtype)
    assert model.head.weight is model.embedding.weight
    assert list(model.parameters()) == parameters, "the same Parameter objects, moved"
    assert all(p.device.type == "cudadev" for p in parameters)
    model.cpu()
    assert model.head.weight is model.embedding.weight


def test_the_answer_is_yes_for_dense_tensors_and_no_for_other_kinds():
    on_device = torch.ones(3, device="cudadev")
    for dense in (torch.ones(3), torch.ones(3, device="cuda"), torch.zeros(5, device="cudadev")):
        assert torch._has_compatible_shallow_copy_type(on_device, dense)
        assert torch._has_compatible_shallow_copy_type(dense, on_device)
    assert not torch._has_compatible_shallow_copy_type(on_device, torch.eye(3).to_sparse())


def test_a_transformers_gpt2_model_has_as_many_parameters_on_cudadev_as_on_cuda():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=64)
    counts = {}
    for device in ("cuda", "cudadev"):
        torch.manual_seed(0)
        model = transformers.GPT2LMHeadModel(config).to(device=device, dtype=torch.bfloat16)
        counts[device] = len(list(model.parameters()))
        assert model.lm_head.weight is model.transformer.wte.weight
    assert counts["cudadev"] == counts["cuda"], counts
