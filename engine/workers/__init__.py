"""The pool of workers: an experiment's cells as jobs of a PostgreSQL-backed queue
(procrastinate, in the store's own database), run by `python -m engine worker` processes on
any machine that reaches the database. `engine.workers.pool` holds the queue (submit, stop,
settle) and `engine.workers.worker` a worker process; the store's side is
`engine.store.workers`."""
