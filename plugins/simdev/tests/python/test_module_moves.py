"""torch.nn.Module.to() onto simdev and back keeps every Parameter object:
simdev answers aten::_has_compatible_shallow_copy_type (csrc/ops/Factory.cpp),
which torch leaves to a PrivateUse1 plugin. Without it, Module.to() wraps each
moved parameter in a new Parameter, module by module: weights two modules
share (a language model's tied embedding and output weights) came apart, and
an optimizer made before the move held the old objects."""

import pytest
import torch
from torch import nn


class TiedLanguageModel(nn.Module):
    def __init__(self, vocabulary=32, width=8):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, width)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocabulary, bias=False)
        self.head.weight = self.embedding.weight  # tied, as GPT-2's are

    def forward(self, tokens):
        return self.head(self.norm(self.embedding(tokens)))


@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_tied_weights_stay_one_parameter_onto_simdev_and_back(dtype):
    model = TiedLanguageModel()
    parameters = list(model.parameters())
    model.to(device="simdev", dtype=dtype)
    assert model.head.weight is model.embedding.weight
    assert [p for p in model.parameters()] == parameters, "the same Parameter objects, moved"
    assert all(p.device.type == "simdev" for p in parameters)
    model.cpu()
    assert model.head.weight is model.embedding.weight
    assert all(p.device.type == "cpu" for p in parameters)


def test_an_optimizer_made_before_the_move_trains_the_moved_model():
    torch.manual_seed(0)
    reference = TiedLanguageModel()
    model = TiedLanguageModel()
    model.load_state_dict(reference.state_dict())
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.5) for m in (reference, model)]
    model.to("simdev")
    tokens = torch.randint(0, 32, (4, 6))
    for m, optimizer, device in ((reference, optimizers[0], "cpu"), (model, optimizers[1], "simdev")):
        loss = m(tokens.to(device)).float().logsumexp(-1).mean()
        loss.backward()
        optimizer.step()
    # One tied weight, given both modules' gradients, updated by the optimizer.
    torch.testing.assert_close(model.embedding.weight.detach().cpu(), reference.embedding.weight.detach())
    assert model.head.weight is model.embedding.weight


def test_the_answer_is_yes_for_dense_tensors_and_no_for_other_kinds():
    on_device = torch.ones(3, device="simdev")
    dense = torch.ones(3)
    assert torch._has_compatible_shallow_copy_type(dense, on_device)
    assert torch._has_compatible_shallow_copy_type(on_device, dense)
    assert torch._has_compatible_shallow_copy_type(on_device, torch.zeros(5, device="simdev"))
    assert not torch._has_compatible_shallow_copy_type(on_device, torch.eye(3).to_sparse())
