"""Building a resolved network into a torch module that checks what resolution could not."""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from .errors import StackError
from .resolved import ResolvedNetwork as Network
from .nodes import is_chain
from .propagate import propagate
from .shapes import COMPUTE_DTYPES, dtype_class, format_shape

_CHECKED_SHAPES_KEPT = 256


DEVICES = ("auto", "cpu", "cuda", "mps")  # what a user may ask for; auto picks the best


def _present() -> dict[str, bool]:
    mps = getattr(torch.backends, "mps", None)
    return {"cpu": True, "cuda": torch.cuda.is_available(),
            "mps": bool(mps) and torch.backends.mps.is_available()}


def available_devices() -> list[str]:
    """The `DEVICES` this machine can train on (``auto`` and ``cpu`` always)."""
    present = _present()
    return [device for device in DEVICES if device == "auto" or present[device]]


def pick_device(device: str | torch.device | None = "auto") -> torch.device:
    """``"auto"`` (or ``None``) picks cuda, then mps, then cpu; anything else is checked."""
    present = _present()
    if device is None or device == "auto":
        return torch.device(next(d for d in ("cuda", "mps", "cpu") if present[d]))
    try:
        chosen = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise StackError("E_ARG", f"{device!r} is not a device",
                         hint="use " + ", ".join(DEVICES[:-1]) + " or " + DEVICES[-1]) from err
    if not present.get(chosen.type, False):
        raise StackError("E_ARG", f"device {chosen.type!r} is not available on this machine",
                         hint="use auto (picks the best available) or cpu")
    return chosen


def graph_plan(network: Network) -> tuple[tuple[str, tuple, tuple], ...] | None:
    """How a branching network runs: per node, its name, the outputs it reads (None: the
    input) and the outputs no later node reads, to let go of after it; None for a chain."""
    if is_chain(network.nodes):
        return None
    last_read: dict[str | None, int] = {}
    for node in network.nodes:
        for read in node.reads:
            last_read[read] = node.index
    done: dict[int, list[str | None]] = {}
    for read, index in last_read.items():
        done.setdefault(index, []).append(read)
    return tuple((node.name, node.reads, tuple(done.get(node.index, ())))
                 for node in network.nodes)


class StackModule(nn.Module):
    """The built stack: one submodule per node, named after it, applied in order (in a
    branching stack, each to the outputs it reads, kept while a later node reads them).

    ``forward`` first checks the input (its dtype class, its shape against every op and
    the symbolic requirements such as ``T <= 32``) and raises `StackError`; a shape that
    passed once is remembered, so the check costs a dict lookup on later calls.
    """

    def __init__(self, network: Network, layers: list[tuple[str, nn.Module]]):
        super().__init__()
        self.network = network
        for name, layer in layers:
            self.add_module(name, layer)
        self._checked_shapes: set[tuple[int, ...]] = set()
        self._plan = graph_plan(network)

    def layers(self, role: str) -> list[tuple[str, nn.Module]]:
        """``(node name, layer)`` of every node whose op declares ``role`` (`spec.ROLES`)."""
        return [(node.name, self._modules[node.name]) for node in self.network.nodes
                if node.spec.role == role]

    def set_value_checks(self, enabled: bool) -> "StackModule":
        """Turn the run-time checks of the data (token ids in range) on or off in every layer
        that has them (a ``check_values`` attribute): each costs a host sync per call, and a
        trainer whose data is in range by construction turns them off."""
        for layer in self.children():
            if hasattr(layer, "check_values"):
                layer.check_values = enabled
        return self

    def use_network(self, network: Network) -> "StackModule":
        """Serve a re-resolved ``network`` (e.g. a longer input) with the same parameters."""
        if (network.dtype, network.input_dtype) != (self.network.dtype, self.network.input_dtype):
            raise StackError("E_DTYPE", f"the model was built for dtype={self.network.dtype}, "
                             f"input_dtype={self.network.input_dtype}, but this network has "
                             f"dtype={network.dtype}, input_dtype={network.input_dtype}",
                             hint="re-resolve with the dtypes the model was built with")
        mine = {k: tuple(v.shape) for k, v in self.named_parameters()}
        if network.state_shapes() != mine or [n.name for n in network.nodes] != list(self._modules):
            raise StackError("E_SHAPE", "this network does not have the parameters of the built "
                             "model (other ops, names or sizes)",
                             hint="re-resolve the same stack with another length, keeping the "
                                  "feature sizes, or build the new network")
        self.network = network
        self._checked_shapes = set()
        self._plan = graph_plan(network)
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._check_input(x)
        name = None
        try:
            if self._plan is None:
                for name, layer in self._modules.items():
                    x = layer(x)
                return x
            outputs: dict[str | None, torch.Tensor] = {None: x}
            for name, reads, done in self._plan:
                outputs[name] = self._modules[name](*(outputs[read] for read in reads))
                for read in done:  # no later node reads it: let its memory go
                    del outputs[read]
        except StackError as err:
            raise self._placed(err, name) from None
        return outputs[name]

    def forward_from(self, node: str, x: torch.Tensor, until: str | None = None) -> torch.Tensor:
        """Run the nodes after ``node`` on ``x`` as ``node``'s output, up to ``until``
        (exclusive; None: the end), each on the outputs it reads, and return the last one:
        how the analysis sends a table's rows alone through the rest of a (branching) stack.
        A node on the way that reads one from before ``node`` is `StackError` (``E_SHAPE``)."""
        nodes = self.network.nodes
        start = next(index for index, n in enumerate(nodes) if n.name == node)
        outputs, name = {node: x}, node
        try:
            for later in nodes[start + 1:]:
                if later.name == until:
                    break
                missing = next((read for read in later.reads if read not in outputs), False)
                if missing is not False:
                    raise later.call.error(
                        "E_SHAPE", f"{later.name} reads {missing or 'the input'}, which comes "
                        f"before {node}", node=later.name,
                        hint=f"this runs only the nodes after {node}, on its output")
                name = later.name
                outputs[name] = self._modules[name](*(outputs[read] for read in later.reads))
        except StackError as err:
            raise self._placed(err, name) from None
        return outputs[name]

    def _placed(self, err: StackError, name: str) -> StackError:
        """The error of a layer, pointed at its node and source line."""
        if err.line is not None:
            return err
        node = self.network.node(name)
        return node.call.error(err.code, err.message, node=name, hint=err.hint)

    def _check_input(self, x: torch.Tensor) -> torch.Tensor:
        network = self.network
        if not isinstance(x, torch.Tensor):
            raise StackError("E_VALUE", f"the model takes a tensor, not {type(x).__name__}",
                             hint="pass a torch.Tensor")
        if dtype_class(network.input_dtype) == "index":
            if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
                raise StackError("E_DTYPE", f"the model takes integer token ids, not {x.dtype}",
                                 hint="pass a torch.long (int64) tensor of ids")
        elif not x.is_floating_point():
            raise StackError("E_DTYPE", f"the model takes floating-point values, not {x.dtype}",
                             hint=f"convert with x.to(torch.{network.dtype})")
        elif x.dtype != COMPUTE_DTYPES[network.dtype]:
            x = x.to(COMPUTE_DTYPES[network.dtype])
        shape = tuple(x.shape)
        if shape not in self._checked_shapes:
            self._check_shape(shape)
            if len(self._checked_shapes) >= _CHECKED_SHAPES_KEPT:
                self._checked_shapes.clear()
            self._checked_shapes.add(shape)
        return x

    def _check_shape(self, shape: tuple[int, ...]) -> None:
        network = self.network
        expected = network.input_shape
        symbols: dict[str, int] = {}
        fits = len(shape) == len(expected)
        for want, have in zip(expected, shape):
            if isinstance(want, int):
                fits = fits and want == have
            else:
                fits = fits and symbols.setdefault(want, have) == have
        if not fits:
            raise StackError(
                "E_SHAPE", f"the model was resolved for inputs {format_shape(expected)}, but got "
                f"{format_shape(shape)}",
                hint="for another length, re-resolve the stack with it and call "
                     "model.use_network(network); or resolve with a symbol such as T")
        bound = [(n.index, n.name, n.spec, n.args, n.call) for n in network.nodes]
        nodes, _, _ = propagate(bound, shape, network.input_dtype, network.dtype)
        for built, seen in zip(network.nodes, nodes):
            if built.params != seen.params:
                have = ", ".join(f"{k} {list(s)}" for k, s in built.params)
                need = ", ".join(f"{k} {list(s)}" for k, s in seen.params)
                raise built.call.error(
                    "E_SHAPE", f"{built.name} was built with {have}, but an input of "
                    f"{format_shape(shape)} needs {need}", node=built.name,
                    hint=f"feed inputs like {format_shape(network.input_shape)}, or build a "
                         "new model for this shape")


def build(network: Network, seed: int | None = None,
          device: str | torch.device | None = None) -> StackModule:
    """Construct the modules of ``network`` in order; see `Network.build`."""
    rng = torch.random.fork_rng(devices=[]) if seed is not None else contextlib.nullcontext()
    with rng:
        if seed is not None:
            torch.default_generator.manual_seed(seed)  # the CPU generator only; CUDA's is untouched
        layers = [(node.name, node.spec.module(node.env, network.dtype)) for node in network.nodes]
    model = StackModule(network, layers)
    if device is not None:
        model.to(pick_device(device))
    return model
