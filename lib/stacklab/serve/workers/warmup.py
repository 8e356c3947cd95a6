"""Imported once, by the fork server that worker processes are forked from (see
`stacklab.serve.workers.worker`): two training steps and a pattern figure, on the CPU and on one
thread, so that every worker starts with torch's kernels, the optimizer and plotly ready.
A fresh process pays about 0.8 s for those on its first run; forked from here, none.

CUDA is never touched here: a process forked after CUDA started cannot use it.
"""

import torch

from ...lab.figures import pattern_figure
from ...lab.train.trainer import train

torch.set_num_threads(1)  # no OpenMP thread pool before forking
pattern_figure(train(task="reverse", steps=2, eval_every=1, device="cpu"))
