"""An experiment to view against a baseline: the definite set twice over on the simulated
vote and panel, run to its end."""
from __future__ import annotations

from engine import Store
from engine import experiments as ex


def experiment(db_url: str) -> str:
    store = Store(db_url)
    plan = ex.plan({"name": "baseline view", "questions": "definite", "repeats": 2,
                    "configs": [{"label": "vote", "protocol": "vote", "model": "simulated"},
                                {"label": "panel", "protocol": "panel",
                                 "model": "simulated"}]}, store)
    experiment_id = ex.create(store, plan)
    ex.run_experiment(store, experiment_id)
    return experiment_id
