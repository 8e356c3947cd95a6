"""stacklab.serve.workers: the training pool, its jobs and their transports (a local process
or a Ray actor)."""
