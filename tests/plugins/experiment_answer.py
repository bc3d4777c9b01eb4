"""A scripted experiment for the tests of an experiment's answer (its sentence, table and
question-by-configuration matrix): completed real runs written straight to the store."""
from __future__ import annotations

from engine import Store
from engine.cells import Cell
from engine.models import RunResult, Turn
from engine.store.experiments import add_experiment

QUESTIONS = [{"question": "What is 2 + 2?", "expected": "4"},
             {"question": "What is 3 + 3?", "expected": "6"},
             {"question": "Name a colour.", "expected": None}]


def save(store: Store, experiment_id: str, spec: dict, q: int, c: int, r: int, answer: str,
         votes: list | None = None) -> str:
    """One completed, real run of cell (q, c, r) with its final answer and round votes."""
    item, config = spec["questions"][q], spec["configs"][c]
    model = "openai:gpt-4o-mini"
    run_id = store.start_run(config["protocol"], item["question"], config={
        "protocol": config["protocol"], "seats": {"voters": [{"model": model}]}},
        tags=[Cell(q, c, r).tag], expected=item["expected"], experiment_id=experiment_id,
        label=config["label"])
    turns = [Turn(index=i, phase="vote", seat=f"s{i}", model=model) for i in range(3)]
    store.finish_run(run_id, RunResult(
        protocol=config["protocol"], expected=item["expected"],
        correct=None if item["expected"] is None else answer == item["expected"],
        unanswered=item["expected"] is not None and not answer, turns=turns),
        {"answer": answer, **({"round_votes": votes} if votes else {})})
    return run_id


def experiment(store: Store, questions: list, configs: list, repeats: int) -> tuple[str, dict]:
    spec = {"name": "the answer", "questions": questions, "repeats": repeats,
            "configs": configs}
    return add_experiment(store, "the answer", spec, len(questions) * len(configs) * repeats), \
        spec


def scripted_experiment(db_url: str) -> str:
    """Two configurations, two repeats: A right on 2 + 2 both times and wrong on 3 + 3 once;
    B wrong on 2 + 2 once and silent on it once, right on 3 + 3; the colour question has no
    expected answer; B never ran it."""
    store = Store(db_url)
    experiment_id, spec = experiment(store, QUESTIONS, [{"protocol": "vote", "label": "A"},
                                                        {"protocol": "vote", "label": "B"}], 2)
    for q, c, r, answer in [(0, 0, 0, "4"), (0, 0, 1, "4"), (1, 0, 0, "6"), (1, 0, 1, "7"),
                            (2, 0, 0, "blue"), (2, 0, 1, "blue"),
                            (0, 1, 0, "5"), (0, 1, 1, ""), (1, 1, 0, "6"), (1, 1, 1, "6")]:
        save(store, experiment_id, spec, q, c, r, answer)
    return experiment_id
