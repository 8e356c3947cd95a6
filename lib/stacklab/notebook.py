"""stacklab in Jupyter: live training and an interactive panel.

    import stacklab
    run = stacklab.train(task="reverse", live=True)   # a progress bar, figures redrawn live
    panel = stacklab.notebook.Panel(task="shift")     # stack, settings, Train, Stop
    panel                                             # shown; panel.run: the finished Run
    panel = stacklab.notebook.Panel.lesson("positions", 2)  # a lesson's step, ready to train
    panel.train(); panel.wait(); panel.check()        # (True, 1.0, 'held-out accuracy ...')

Outside Jupyter `train` is the library's, unchanged. The widgets come from ipywidgets and
the progress bar from tqdm (``pip install stacklab[notebook]``), imported only here and
only when a notebook asks. Runs the panel finishes go to the run store under their key, as
the app's do, so ``stacklab.open_run(KEY)`` opens a run in either direction.
"""

from __future__ import annotations

import html
import inspect
import threading
import time
import warnings

from .core.errors import StackError, annotate
from .lab.figures import pattern_figure, training_curves
from .lab.figures.export import live_frames
from .lab.lessons import Step, check, open_step, step_from_link
from .lab.settings import SETTINGS, TrainConfig, settings_signature
from .lab.runs.store import STORED_STATUSES, RunStore
from .lab.tasks import TASKS
from .lab.train.record import Run, Status
from .core.threads import use_training_threads
from .lab.train.plan import fit_network
from .lab.train.trainer import Trainer
from .lab.train.trainer import train as _train
from .serve.links.experiment import preset_changes

__all__ = ["train", "open_run", "Panel", "in_jupyter", "LiveFigures"]

REDRAW_SECONDS = 0.5  # live figures are redrawn at most this often


def in_jupyter() -> bool:
    """Whether this runs in a Jupyter kernel (not a terminal, not IPython in a console)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class LiveFigures:
    """A trainer's progress in a notebook: the standard notebook progress bar and, with
    ``figures``, the training curves and the task's pattern figure, redrawn in place at
    each evaluation (at most every `REDRAW_SECONDS`) and left as the final figures."""

    def __init__(self, figures: bool = True, show=None):
        self.figures = figures
        self.show = show or self._in_the_cell  # where the figures go (a `Panel`: its output)
        self.shown: list = []  # the plotly figures on show now
        self._bar = None
        self._handles = None
        self._drawn = 0.0

    def callbacks(self) -> dict:
        """``{event: callback}`` for `Trainer.add_callback` (or ``train(callbacks=...)``)."""
        return {"on_start": self.on_start, "on_batch_end": self.on_batch_end,
                "on_eval": self.on_eval, "on_end": self.on_end}

    def attach(self, trainer: Trainer) -> None:
        for event, fn in self.callbacks().items():
            trainer.add_callback(event, fn)

    def on_start(self, run: Run) -> None:
        from tqdm.auto import tqdm  # the notebook bar in Jupyter

        self._bar = tqdm(total=run.config.steps, desc=f"{run.task.name} T={run.config.seq_len}",
                         unit="step", leave=True)

    def on_batch_end(self, run: Run) -> None:
        if self._bar is not None:
            self._bar.update(run.step - self._bar.n)

    def on_eval(self, run: Run) -> None:
        if self._bar is not None and run.history:
            self._bar.set_postfix(acc=f"{run.history[-1]['accuracy']:.3f}", refresh=False)
        if self.figures and time.monotonic() - self._drawn >= REDRAW_SECONDS:
            self.draw(run)

    def on_end(self, run: Run) -> None:
        if self._bar is not None:
            self._bar.set_description(f"{run.task.name} T={run.config.seq_len}: {run.status}")
            self._bar.close()
        if self.figures and run.history:
            self.draw(run, final=True)  # the figures of the model the run ends with stay

    def draw(self, run: Run, final: bool = False) -> None:
        """Show (first time) or replace (later) the curves and the pattern figure."""
        self._drawn = time.monotonic()
        shown = [training_curves(run.history, run.train_loss)]
        try:
            pattern = pattern_figure(run)
        except (RuntimeError, ValueError):  # a figure never ends a run
            pattern = None
        if pattern is not None:
            figure = pattern.figure
            figure.update_layout(title=dict(text=f"{pattern.title} at step {run.step}"
                                                 + (f": {pattern.score}" if pattern.score else "")))
            shown.append(figure)
        self.shown = shown
        self.show(live_frames(shown, run.history, run.train_loss, final))

    def _in_the_cell(self, bundles: list[dict]) -> None:
        """One output per figure, its payload replaced at each redraw (displayed raw: a
        plotly figure's own ``_ipython_display_`` ignores ``display_id``, so each update
        would add an output)."""
        from IPython.display import display

        if self._handles is None:
            self._handles = []
        for handle, bundle in zip(self._handles, bundles):
            handle.update(bundle, raw=True)
        for bundle in bundles[len(self._handles):]:  # a figure drawn for the first time
            self._handles.append(display(bundle, raw=True, display_id=True))


def train(source: str | None = None, *, live: bool = False, **settings) -> Run:
    """Train ``source`` (default: the task's preset) on ``task`` with the settings of
    `TrainConfig` (each one a keyword: the signature lists them with their types and
    defaults); return the `Run`. In Jupyter it shows a progress bar, and with ``live=True``
    the curves and the task's pattern figure, one output each, redrawn in place as it
    trains; elsewhere ``live`` changes nothing. Torch trains with `training_threads` threads.

    Raises `StackError` before training when the task is missing or unknown, a keyword is
    not a setting (with the setting it most likely meant), a setting is invalid or the
    stack does not fit the task; a run that fails later ends with ``status`` ``failed`` or
    ``diverged``.
    """
    use_training_threads()
    if in_jupyter():
        given = settings.pop("callbacks", {})
        callbacks = {event: [fn] for event, fn in LiveFigures(figures=live).callbacks().items()}
        for event, fns in given.items():
            callbacks.setdefault(event, []).extend(fns if isinstance(fns, (list, tuple)) else [fns])
        settings["callbacks"] = callbacks
    return _train(source, **settings)


LIVE = inspect.Parameter("live", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=bool)
CALLBACKS = inspect.Parameter("callbacks", inspect.Parameter.KEYWORD_ONLY, default=None,
                              annotation=dict | None)
train.__signature__ = settings_signature(LIVE, CALLBACKS, returns=Run)


def open_run(key: str, store: RunStore | None = None) -> Run:
    """The stored run of ``key`` (trained by the app, the panel or a sweep), tensors and all;
    `StackError` when the store has no such run."""
    store = store or RunStore()
    run = store.load(store.find(key) or key)  # a whole key, or its first 8+ characters
    if run is None:
        raise StackError("E_VALUE", f"no run {str(key)[:40]!r} in the run store ({store.root})",
                         hint="copy the key from run=... of the app's link, or train it here")
    return run


class Panel:
    """An ipywidgets panel: the stack (resolved as you type), the task and every setting of
    the settings table, Train and Stop, the status in words, and the live figures.

    Training runs in a thread, so other cells run meanwhile; Stop ends the run within a
    step. The Python API drives it as the buttons do (and the tests use it)::

        lab = Panel(task="reverse", steps=300)
        lab.source = "embedding(16, 64)\\npos_embed(32)\\n..."   # the text box
        lab.set(seed=3)                                        # a setting's control
        lab.train(); lab.wait(); lab.run.final                 # Train, then the result
    """

    def __init__(self, task: str = "reverse", source: str | None = None,
                 store: RunStore | None = None, **settings):
        import ipywidgets as w

        if task not in TASKS:
            raise StackError("E_ARG", f"there is no task called {task!r}",
                             hint="choose one of " + ", ".join(TASKS))
        self.store = store or RunStore()
        self.run: Run | None = None
        self.step: Step | None = None  # the lesson step it was opened on (`Panel.lesson`)
        self.status: str = "ready"
        self.error: StackError | None = None
        self._trainer: Trainer | None = None
        self._thread: threading.Thread | None = None
        self._live: LiveFigures | None = None
        self._following = False  # a preset is being applied: its own changes follow nothing
        defaults = TrainConfig(task=task).filled()
        self._text = w.Textarea(value=source or TASKS[task].preset(defaults.seq_len),
                                layout=w.Layout(width="100%", height="150px"),
                                description="Stack")
        self._report = w.HTML()
        self._controls: dict[str, w.Widget] = {}
        for row in SETTINGS.values():
            if not row.link or row.name == "device":
                continue
            value = settings.get(row.name, getattr(defaults, row.name))
            self._controls[row.name] = _control(w, row, value)
        for name in settings:
            if name not in self._controls:
                raise StackError("E_ARG", f"the panel has no setting {name!r}",
                                 hint="one of " + ", ".join(self._controls))
        self._train_button = w.Button(description="Train", button_style="primary", icon="play")
        self._stop_button = w.Button(description="Stop", icon="stop", disabled=True)
        self._status = w.HTML()
        self._figures = w.Output()
        self._train_button.on_click(lambda _: self.train())
        self._stop_button.on_click(lambda _: self.stop())
        self._text.observe(lambda _: self._resolve(), names="value")
        for name in ("task", "seq_len"):
            self._controls[name].observe(lambda change, name=name: self._follow(name, change),
                                         names="value")
        grid = w.GridBox(list(self._controls.values()),
                         layout=w.Layout(grid_template_columns="repeat(3, 1fr)"))
        self.widget = w.VBox([self._text, self._report, grid,
                              w.HBox([self._train_button, self._stop_button]),
                              self._status, self._figures])
        self._resolve()
        self._show_status()

    @classmethod
    def lesson(cls, lesson: str, step: int | str = 1, store: RunStore | None = None) -> "Panel":
        """A panel opened on ``step`` of ``lesson`` (as ``/learn?lesson=ID&step=N`` opens it in
        the app): the step's stack and settings in the controls, what it asks above them.
        Train it, then `check` says what the run measured and whether the lesson holds::

            lab = Panel.lesson("positions", 2)
            lab.train(); lab.wait(); lab.check()   # (True, 1.0, 'held-out accuracy 1.00: ...')
        """
        import ipywidgets as w

        found_lesson, found = step_from_link(lesson, step)
        config, source = open_step(lesson, step)
        filled = config.filled()
        settings = {row.name: getattr(filled, row.name) for row in SETTINGS.values()
                    if row.link and row.name not in ("task", "device")}
        lab = cls(task=filled.task, source=source, store=store, **settings)
        lab.step = found
        number = found_lesson.steps.index(found) + 1
        asked = w.HTML(f"<b>{html.escape(found_lesson.title)}</b>, step {number} of "
                       f"{len(found_lesson.steps)}: <b>{html.escape(found.title)}</b><br>"
                       f"{html.escape(found.text)}<br><i>Predict:</i> "
                       f"{html.escape(found.question)}")
        lab.widget.children = (asked, *lab.widget.children)
        return lab

    def check(self) -> tuple[bool, float | None, str]:
        """Whether the finished run shows what the lesson step says (`lessons.check`):
        ``(held, the measured value, a sentence saying both)``."""
        if self.step is None:
            raise StackError("E_ARG", "this panel was not opened on a lesson step",
                             hint='open one with Panel.lesson("positions", 2)')
        if self.run is None:
            raise StackError("E_VALUE", "the panel has no finished run to check yet",
                             hint="press Train (lab.train(); lab.wait()), then check")
        return check(self.step, self.run)

    # -- the Python API, what the controls do --------------------------------------

    @property
    def source(self) -> str:
        return self._text.value

    @source.setter
    def source(self, text: str) -> None:
        self._text.value = text

    def set(self, **settings) -> None:
        """Set controls by name (``lab.set(steps=200, seed=1)``)."""
        for name, value in settings.items():
            if name not in self._controls:
                raise StackError("E_ARG", f"the panel has no setting {name!r}",
                                 hint="one of " + ", ".join(self._controls))
            self._controls[name].value = _control_value(SETTINGS[name], value)

    def config(self) -> TrainConfig:
        """The settings the controls hold now (checked when training starts)."""
        values = {}
        for name, control in self._controls.items():
            row, value = SETTINGS[name], control.value
            if row.optional and isinstance(value, str):  # a text box: empty or "none" is off
                text = value.strip()
                if text.lower() in ("", "none"):
                    value = None
                else:
                    try:
                        value = row.parse_flag(text)
                    except ValueError as err:
                        raise StackError("E_ARG", f"{name}: {err}",
                                         hint=f"{row.help}") from None
            values[name] = value
        return TrainConfig(**values)

    def train(self) -> bool:
        """Press Train: start a run in a thread (False, with the reason shown, when the
        stack or a setting is wrong, or a run is going)."""
        if self._thread is not None and self._thread.is_alive():
            return False
        use_training_threads()
        try:
            trainer = Trainer(self.source, self.config())
        except StackError as err:
            self.error, self.status = err, "cannot start"
            self._show_status()
            return False
        self.error, self.run, self.status, self._trainer = None, None, "running", trainer
        self._figures.outputs = ()
        self._live = LiveFigures(figures=True, show=self._show_in_panel)
        self._live.attach(trainer)
        self._train_button.disabled, self._stop_button.disabled = True, False
        self._show_status()
        self._thread = threading.Thread(target=self._work, args=(trainer,), name="stacklab-lab",
                                        daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        """Press Stop: the run ends after its current step."""
        if self._trainer is not None:
            self._trainer.stop()

    def wait(self, timeout: float | None = None) -> Run | None:
        """Block until the run ends (for scripts and tests); the finished `Run`."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.run

    @property
    def figures(self) -> list:
        """The plotly figures on show in the panel (the curves and the pattern figure)."""
        return list(self._live.shown) if self._live is not None else []

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)

    # -- inside ----------------------------------------------------------------------

    def _show_in_panel(self, bundles: list[dict]) -> None:
        """Replace the panel's figures (set from the training thread: the widget's outputs
        are a trait, sent to the notebook as they change)."""
        self._figures.outputs = tuple({"output_type": "display_data", "metadata": {},
                                       "data": bundle} for bundle in bundles)

    def _work(self, trainer: Trainer) -> None:
        run = trainer.run()
        if run.status in STORED_STATUSES:
            try:
                self.store.save(run)  # the app (and open_run) find it by its key
            except OSError:
                pass
        self.run, self.status = run, str(run.status)
        self._train_button.disabled, self._stop_button.disabled = False, True
        self._show_status()

    def _follow(self, name: str, change: dict) -> None:
        """A new task or T (``name``), by the app's rule (`preset_changes`): a preset stack
        follows, and a new task brings its settings; a hand-written stack stays."""
        if self._following:
            return
        now = {"task": self._controls["task"].value, "seq_len": self._controls["seq_len"].value,
               name: change["old"]}
        changes = preset_changes(self.source, now["task"], now["seq_len"],
                                 **{f"new_{name}": change["new"]})
        self._following = True
        try:
            self.set(**{field: value for field, value in changes.items()
                        if field in self._controls})
            if "stack" in changes:
                self.source = changes["stack"]
        finally:
            self._following = False
        self._resolve()

    def _resolve(self) -> None:
        """The network report of the stack as typed, or its error with code and caret."""
        try:
            config = self.config().filled()
            network = fit_network(self.source, TASKS[config.task], config.seq_len)
        except StackError as err:
            self._report.value = _pre(f"{err.code}: {err.message}\n"
                                      + (annotate(self.source, err) + "\n" if err.line else "")
                                      + f"fix: {err.hint}", error=True)
            return
        self._report.value = _pre(network.table())

    def _show_status(self) -> None:
        words = {"ready": "ready", "running": "running", "cannot start": "cannot start"}
        text = f"Status: <b>{html.escape(words.get(self.status, self.status))}</b>"
        if self.error is not None:
            text += f" — {html.escape(self.error.code)}: {html.escape(self.error.message)} " \
                    f"(fix: {html.escape(self.error.hint)})"
        elif self.run is not None:
            final = self.run.final
            text += (f" — {self.run.step} steps, held-out accuracy {final['accuracy']:.1%}; "
                     f"key <code>{self.run.key}</code>")
            if self.run.status != Status.FINISHED and self.run.error:
                text += f" ({html.escape(self.run.error)})"
        self._status.value = text


def _control(w, row, value):
    """The ipywidgets control of a setting, from its row of the settings table."""
    layout = w.Layout(width="auto")
    style = {"description_width": "initial"}
    if row.choices:
        return w.Dropdown(options=list(row.choices), value=value, description=row.label,
                          layout=layout, style=style)
    if row.items or row.optional:
        return w.Text(value=_control_value(row, value), description=row.label, layout=layout,
                      style=style, placeholder=row.empty_hint)
    if row.whole:
        return w.BoundedIntText(value=value, min=int(row.low), max=int(row.high),
                                description=row.label, layout=layout, style=style)
    return w.BoundedFloatText(value=value, min=row.low, max=row.high, step=row.step,
                              description=row.label, layout=layout, style=style)


def _control_value(row, value):
    """A setting's value as its control holds it: a text box holds text ("" for none)."""
    if row.items or row.optional:
        return "" if value is None else str(value)
    return value


def _pre(text: str, error: bool = False) -> str:
    color = "#a00" if error else "#222"
    return (f"<pre style='color:{color}; font-size: 12px; line-height: 1.3'>"
            f"{html.escape(text)}</pre>")




def __getattr__(name: str):
    """``Lab``, `Panel`'s old name: its first use warns (then bound, so no later one does)."""
    if name != "Lab":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn("stacklab.notebook.Lab is now stacklab.notebook.Panel; Lab will go in a "
                  "later release", DeprecationWarning, stacklevel=2)
    globals()["Lab"] = Panel
    return Panel
