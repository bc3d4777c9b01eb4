"""Runs to search: a completed run of given turns and final answer (`stored`), and four of
them whose words sit in a reply, a question, an answer and non-ASCII text (`fixture_runs`)."""
from __future__ import annotations

from engine import Store
from engine.models import RunResult, Turn


def stored(store: Store, question: str, replies: list[tuple[str, str, int, str]],
           answer: str | None = None) -> str:
    """A completed run of `question` whose turns are (seat, phase, round, reply), with
    `answer` as its final answer; returns its id."""
    run_id = store.start_run("vote", question)
    turns = [Turn(index=i, seat=seat, phase=phase, round=rnd, reply=reply)
             for i, (seat, phase, rnd, reply) in enumerate(replies)]
    store.add_turns([(run_id, turn) for turn in turns])
    metrics = {"outcome": "done"} if answer is None else {"outcome": "done", "answer": answer}
    store.finish_run(run_id, RunResult(protocol="vote", turns=turns), metrics)
    return run_id


def fixture_runs(store: Store) -> dict[str, str]:
    return {
        "reply": stored(store, "Which database should we pick?",
                        [("Ada", "opening", 1, "I favour PostgreSQL for its durability."),
                         ("Bo", "rebuttal", 2, "The quokka benchmark says otherwise.")],
                        answer="PostgreSQL"),
        "question": stored(store, "Is the quokka the happiest animal?",
                           [("Ada", "vote", 0, "Probably yes.")]),
        "answer": stored(store, "Name a prime number.", [("Cy", "vote", 0, "Seven.")],
                         answer="kumquat"),
        "unicode": stored(store, "Wie ist das Wetter in Zürich?",
                          [("Dora", "vote", 0, "Es regnet, λόγος und naïve café 東京.")]),
    }
