"""The per-tensor state of functionalization: FunctionalTensor and the FunctionalStorage its aliases share.

Place in the pipeline: the wrapper objects ``FunctionalTensorMode`` (``functional_tensor.py``)
hands to the user program; the mode swaps their value (``elem``) when they are mutated.
Mirrors ``torch/_subclasses/functional_tensor.py`` (``FunctionalTensor``) and the C++
state torch keeps beneath it (``aten/src/ATen/FunctionalTensorWrapper.cpp``,
``FunctionalStorageImpl.cpp``); Note [Wrapper subclass plus mode, as torch does] in
``functional_tensor.py`` says why the state lives on a Python wrapper.
"""

from __future__ import annotations

import torch

from minidynamo._torch_private import mirror_conj_neg
from minidynamo.aot.schemas import ViewMeta


class FunctionalizationError(RuntimeError):
    """Functionalization met something it cannot rewrite (the message names the op)."""


class FunctionalStorage:
    """What a group of aliasing FunctionalTensors share (torch: ``FunctionalStorageImpl``).

    ``base_value`` is the current value of the root base; ``generation`` goes up
    at every data mutation of any alias. The counters feed ``InputAliasInfo``:
    torch counts mutations, mutations under no_grad/inference mode, and
    mutations marked hidden from autograd, and compares them.
    """

    def __init__(self, base_value: torch.Tensor):
        self.base_value = base_value
        self.original_base = base_value
        self.generation = 0
        self.mutation_counter = 0
        self.mutation_counter_no_grad_or_inference_mode = 0
        self.mutation_counter_hidden_from_autograd = 0
        # set_() moved some tensor off this storage: further writes to it are refused
        # (torch: FunctionalStorageImpl::freeze, Note [set_() on a FunctionalTensor]).
        self.frozen = False


class FunctionalTensor(torch.Tensor):
    """A wrapper whose value (``elem``) the mode swaps when the tensor is mutated."""

    elem: torch.Tensor
    storage_: FunctionalStorage
    chain: tuple[ViewMeta, ...]
    generation: int

    @staticmethod
    def __new__(cls, elem: torch.Tensor, storage: FunctionalStorage, chain: tuple = (),
                original_storage: FunctionalStorage | None = None):
        out = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.shape,
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            device=elem.device,
            requires_grad=False,  # autograd, above us, sets it on the outputs of ops
        )
        # torch's FunctionalTensor mirrors the Conjugate and Negative keys of its inner tensor
        # (``_extra_dispatch_keys``), so that ``is_conj()``/``is_neg()`` answer as eager's would.
        mirror_conj_neg(elem, out)
        out.elem = elem
        out.storage_ = storage
        out.chain = tuple(chain)
        out.generation = storage.generation
        # torch: FunctionalTensorWrapper::was_storage_changed_ (set by set_())
        out.storage_changed = False
        # torch: FunctionalTensorWrapper::has_metadata_mutation_ (a view-like in-place step, or resize_)
        out.has_metadata_mutation = False
        # Note [Two storages after set_()]: torch's Python FunctionalTensor has a storage of
        # its own, shared by its views (return_and_correct_aliasing) and never moved by set_().
        # Aliasing questions about outputs are asked of that one; ours is this field.
        out.original_storage = original_storage or storage
        return out

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        # Only reached when no FunctionalTensorMode is active (the mode runs first).
        raise FunctionalizationError(
            f"{func} was called on a FunctionalTensor outside its FunctionalTensorMode; "
            "use mode.from_fun(t) to get its value out"
        )

    def __repr__(self, *, tensor_contents=None) -> str:
        chain = " -> ".join(map(str, self.chain)) or "base"
        return f"FunctionalTensor({tuple(self.shape)}, {chain})"
