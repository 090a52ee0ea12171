"""Devices from Python: where a tensor lives, moving it, and what a machine without a GPU says.
The GPU paths themselves (values on cuda, DLPack exchange of GPU memory with PyTorch) are checked
on a GPU by scripts/gpu-check.sh; here they must refuse clearly."""

import numpy as np
import pytest

import eddy


def test_a_tensor_says_where_it_lives_and_moves_to_where_it_is():
    x = eddy.tensor([1.0, 2.0, 3.0])
    assert x.device == "cpu"
    assert x.to("cpu").device == "cpu"
    np.testing.assert_array_equal(x.cpu().numpy(), [1.0, 2.0, 3.0])


def test_moving_is_differentiable():
    x = eddy.tensor([0.5, -1.0]).requires_grad_()
    y = eddy.sum(eddy.square(x.to("cpu")))
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, -2.0])


@pytest.mark.parametrize("name", ["gpu", "cuda:", "cuda:x", "tpu:0"])
def test_an_unknown_device_name_is_refused(name):
    with pytest.raises(eddy.Error, match=f"unknown device '{name}'"):
        eddy.tensor([1.0]).to(name)


def test_without_a_gpu_cuda_is_refused_with_the_reason():
    if eddy.cuda_available():
        pytest.skip("a GPU is present: the refusal cannot be seen here")
    reason = eddy.cuda_unavailable_reason()
    assert reason  # the driver missing, no device, or a build without the CUDA backend
    with pytest.raises(eddy.Error, match="cuda:0"):
        eddy.tensor([1.0]).to("cuda")
    with pytest.raises(eddy.Error, match="cuda:0"):
        eddy.tensor([1.0]).cuda()


def test_dlpack_names_the_cpu_device():
    x = eddy.tensor([1.0, 2.0])
    assert x.__dlpack_device__() == (1, 0)  # kDLCPU
    np.testing.assert_array_equal(np.from_dlpack(x), [1.0, 2.0])


def test_gpu_memory_crosses_to_pytorch_and_back_without_copies():
    if not eddy.cuda_available():
        pytest.skip(f"no GPU: {eddy.cuda_unavailable_reason()}")
    torch = pytest.importorskip("torch")
    source = torch.arange(6, dtype=torch.float64, device="cuda").reshape(2, 3)
    shared = eddy.from_dlpack(source)
    assert shared.device == "cuda:0"
    source += 1  # the same memory: eddy sees the change
    np.testing.assert_array_equal(shared.cpu().numpy(), np.arange(1.0, 7.0).reshape(2, 3))
    result = torch.from_dlpack(eddy.tanh(shared))
    assert result.device.type == "cuda"
    torch.testing.assert_close(result, torch.tanh(source))


def test_default_device_blocks_nest_and_end_with_their_block():
    assert eddy.get_default_device() == "cpu"
    with eddy.default_device("cpu"):
        assert eddy.get_default_device() == "cpu"
        assert eddy.zeros([2]).device == "cpu"
        assert eddy.tensor([1.0, 2.0]).device == "cpu"
    assert eddy.get_default_device() == "cpu"
    with pytest.raises(eddy.Error, match="unknown device 'gpu'"):
        eddy.default_device("gpu")


def test_without_a_gpu_a_default_device_block_refuses_to_make_tensors_there():
    if eddy.cuda_available():
        pytest.skip("a GPU is present: the refusal cannot be seen here")
    with pytest.raises(eddy.Error, match="cuda:0"):
        with eddy.default_device("cuda"):
            assert eddy.get_default_device() == "cuda:0"
            eddy.zeros([2])
    assert eddy.get_default_device() == "cpu"  # the block ended with the error
    assert eddy.zeros([2]).device == "cpu"
