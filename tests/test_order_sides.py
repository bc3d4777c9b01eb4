"""Order and sides (DESIGN 2.10): every protocol presents its seats in an order drawn from an
order seed (the configured order without one), and a debate's sides can be swapped with the
verdict still crediting the seat that argued the winning side."""
from __future__ import annotations

from pathlib import Path

import pytest
from apptest_helpers import open_new_experiment, poll
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from streamlit.testing.v1 import AppTest

from engine import ConfigError, Seat, Store, run_debate, run_duel
from engine import experiments as ex
from engine.config import RunConfig
from engine.protocols import REGISTRY, arun_config, resolve_config, run_sync, seats_from_config
from engine.protocols.base import presentation_order, presented
from engine.protocols.sides import seat_sides, verdict_side, verdict_winner

# Protocols where one seat is never shown a list of others: their order is the flow's.
FIXED = {"peer-review", "single"}
QUESTION = "What is 6 times 7?"


def run(protocol: str, **kw) -> object:
    kw.setdefault("expected", "42")
    return run_sync(arun_config({"protocol": protocol}, QUESTION, **kw))


def presented_names(protocol: str) -> list[str]:
    """The seats a protocol orders, as configured."""
    kwargs = seats_from_config(REGISTRY[protocol], RunConfig(protocol=protocol))
    many = [slot for slot in REGISTRY[protocol].slots if slot.many]
    if many:
        return [seat.name for seat in kwargs[many[0].name]]
    names = {"debate": ("proponent", "opponent"), "duel": ("a", "b"),
             "peer-review": ("producer", "reviewer"), "single": ("agent",)}[protocol]
    return [kwargs[slot].name for slot in names]


# --------------------------------------------------------------------------- the helper
def test_presentation_order_is_a_reproducible_permutation():
    names = ["a", "b", "c", "d", "e"]
    assert presentation_order(names, None) == names
    assert presentation_order(names, 7) == presentation_order(names, 7)
    assert sorted(presentation_order(names, 7)) == names
    orders = {tuple(presentation_order(names, seed)) for seed in range(200)}
    assert len(orders) > 50  # many of the 120 permutations are drawn
    seats = [Seat(n, "simulated") for n in names]
    order, shown = presented(seats, 7)
    assert order == presentation_order(names, 7) == [s.name for s in shown]


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3", 2**63])
def test_a_bad_order_seed_is_refused_before_any_call(bad):
    with pytest.raises(ConfigError, match="order_seed"):
        run("vote", order_seed=bad)
    with pytest.raises(ConfigError, match="order_seed"):
        RunConfig.parse({"protocol": "vote", "order_seed": bad})


# --------------------------------------------------------------------------- every protocol
@pytest.mark.parametrize("protocol", sorted(REGISTRY))
def test_same_seed_same_order_and_none_keeps_the_configured_order(protocol):
    configured = presented_names(protocol)
    assert run(protocol).order == configured
    first, again = run(protocol, order_seed=11), run(protocol, order_seed=11)
    assert first.order == again.order
    assert sorted(first.order) == sorted(configured)


@pytest.mark.parametrize("protocol", sorted(set(REGISTRY) - FIXED))
def test_different_seeds_draw_different_orders(protocol):
    orders = {tuple(run(protocol, order_seed=seed).order) for seed in range(12)}
    assert len(orders) >= 2


@pytest.mark.parametrize("protocol", sorted(FIXED))
def test_a_protocol_that_shows_no_list_keeps_its_flow(protocol):
    assert run(protocol, order_seed=5).order == presented_names(protocol)


def test_a_roundtable_speaks_in_the_order_drawn():
    for seed in range(4):
        result = run("roundtable", order_seed=seed)
        assert [t.seat for t in result.turns if t.phase == "turn"] == result.order


def test_a_panel_critic_and_society_see_the_answers_in_the_order_drawn():
    for seed in range(4):
        result = run("panel", order_seed=seed)
        critique = next(t for t in result.turns if t.phase == "critique")
        text = critique.messages[-1]["content"]
        assert sorted(result.order, key=lambda n: text.index(f"[{n}]")) == result.order
        society = run("society", order_seed=seed)
        assert [t.seat for t in society.turns if t.round == 1] == society.order


def test_a_duel_opener_is_drawn_and_first_with_a_seed_is_refused():
    openers = {run("duel", order_seed=seed).turns[0].seat for seed in range(12)}
    assert len(openers) == 2
    for seed in range(6):
        result = run("duel", order_seed=seed)
        assert result.turns[0].seat == result.order[0]
    with pytest.raises(ConfigError, match="first or an order seed"):
        run_duel("t", a="simulated", b="simulated", first="b", order_seed=1)


def test_the_stored_configuration_says_its_order_seed(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'o.db'}")
    seeded = run("panel", order_seed=9, store=store)
    plain = run("panel", store=store)
    assert store.get(seeded.run_id)["config"]["order_seed"] == 9
    assert "order_seed" not in store.get(plain.run_id)["config"]
    again = run_sync(arun_config(store.get(seeded.run_id)["config"], QUESTION,
                                 expected="42"))
    assert again.order == seeded.order  # a re-run of the stored config presents alike
    assert resolve_config({"protocol": "vote", "order_seed": 4}).config.order_seed == 4
    assert store.get(seeded.run_id)["metrics"]["order"] == seeded.order


# --------------------------------------------------------------------------- sides
def judge_saying(verdict: str) -> FakeMessagesListChatModel:
    return FakeMessagesListChatModel(responses=[AIMessage(content=(
        f"1. VERDICT: {verdict}\n2. REASONING: r\n3. PRO SUMMARY: p\n4. CON SUMMARY: c\n"
        "5. CONFIDENCE: 0.8\nANSWER: yes"))])


def speaker(text: str) -> FakeMessagesListChatModel:
    return FakeMessagesListChatModel(responses=[AIMessage(content=text)] * 3)


def debate(verdict: str, swap: bool, **kw):
    return run_debate("Is it so?", proponent=Seat("Proponent", speaker("P-SEAT says")),
                      opponent=Seat("Opponent", speaker("O-SEAT says")),
                      judge=Seat("judge", judge_saying(verdict)), max_rounds=1,
                      swap_sides=swap, retries=0, **kw)


def test_swapped_sides_flip_who_argues_what():
    plain, swapped = debate("The proponent wins", False), debate("The proponent wins", True)
    assert plain.sides == {"Proponent": "for", "Opponent": "against"}
    assert swapped.sides == {"Proponent": "against", "Opponent": "for"}
    assert plain.rounds[0].proponent_argument == "P-SEAT says"
    assert swapped.rounds[0].proponent_argument == "O-SEAT says"  # the side in favour
    opening = swapped.turns[0]
    assert opening.seat == "Opponent" and "IN FAVOR" in opening.messages[-1]["content"]
    assert "AGAINST" in swapped.turns[1].messages[-1]["content"]
    assert swapped.turns[1].seat == "Proponent"


@pytest.mark.parametrize("verdict, swap, side, seat", [
    ("The proponent argued better.", False, "for", "Proponent"),
    ("The proponent argued better.", True, "for", "Opponent"),  # the side, not the seat name
    ("The opponent's case was stronger than the proponent's", True, "against", "Proponent"),
    ("Con wins: the risks dominate.", False, "against", "Opponent"),
    ("The side in favour carried it.", True, "for", "Opponent"),
    ("I cannot decide.", False, None, None),
])
def test_the_verdict_credits_the_seat_that_argued_the_winning_side(verdict, swap, side, seat):
    result = debate(verdict, swap)
    assert (result.winning_side, result.winner) == (side, seat)
    if seat is None:
        assert any("names neither side" in w for w in result.warnings)


def test_a_verdict_naming_a_seat_and_no_side_credits_that_seat():
    sides = seat_sides("Alice", "Bob", True)
    assert verdict_winner("Bob made the better case.", sides) == ("for", "Bob")
    assert verdict_winner("Alice and Bob tied.", sides) == (None, None)
    assert verdict_side("The PRO side wins", sides) == "for"


def test_a_swapped_debate_is_stored_with_its_option_and_winner(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    result = debate("The proponent wins", True, store=store, order_seed=2)
    row = store.get(result.run_id)
    assert row["config"]["options"]["swap_sides"] is True
    assert row["config"]["order_seed"] == 2
    assert row["metrics"]["winner"] == "Opponent"
    assert row["metrics"]["carried"] == ["Opponent"]
    assert row["metrics"]["seat_for"] == "Opponent"
    with pytest.raises(ConfigError, match="swap_sides"):
        debate("x", "yes")  # type: ignore[arg-type]


def test_the_judge_reads_the_sides_in_the_order_drawn():
    for seed in range(6):
        result = debate("The proponent wins", False, order_seed=seed)
        transcript = result.turns[-1].messages[-1]["content"]
        first = "Proponent:" if result.order[0] == "Proponent" else "Opponent:"
        other = "Opponent:" if first == "Proponent:" else "Proponent:"
        assert transcript.index(first) < transcript.index(other)
        assert result.winner == "Proponent"  # the order moves no credit


def test_cli_takes_order_seed_and_swap_sides(tmp_path, capsys):
    from engine.cli.main import main
    db = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["run", "debate", "Is it so?", "--order-seed", "3", "--swap-sides",
                 "--db", db]) == 0
    out = capsys.readouterr().out
    assert "proponent argued against, opponent argued for" in out
    assert main(["run", "vote", "q", "--swap-sides", "--db", db]) == 2
    assert "has no sides" in capsys.readouterr().err


# --------------------------------------------------------------------------- experiments
QUESTIONS = [{"question": "What is 6 times 7?", "expected": "42"},
             {"question": "What is 2 plus 2?", "expected": "4"}]
DEBATE = {"protocol": "debate", "label": "debate", "options": {"max_rounds": 1}}


def spec(**kw):
    return {"questions": QUESTIONS, "configs": [DEBATE, {"protocol": "vote", "label": "vote"}],
            "repeats": 2, **kw}


def test_spec_values_are_checked():
    for key, bad, says in (("order", "random", "order must be configured or shuffled"),
                           ("sides", "two", "sides must be one or both"),
                           ("seed", -3, "seed must be a whole number")):
        with pytest.raises(ConfigError, match=says):
            ex.plan(spec(**{key: bad}))
    with pytest.raises(ConfigError, match="needs a configuration whose protocol has sides"):
        ex.plan({"questions": QUESTIONS, "configs": [{"protocol": "vote"}], "sides": "both"})


def test_sides_both_plans_a_swapped_twin_of_each_debate():
    plan = ex.plan(spec(sides="both"))
    assert plan.labels == ["debate", "vote", "debate · sides swapped"]
    assert plan.configs[2]["options"] == {"max_rounds": 1, "swap_sides": True}
    assert plan.side_pairs == [{"label": "debate", "swapped": "debate · sides swapped"}]
    assert plan.runs == 2 * 3 * 2
    again = ex.plan(plan.spec())  # a stored spec planned again: the twin is not added twice
    assert again.labels == plan.labels and again.side_pairs == plan.side_pairs
    with_baseline = ex.plan(spec(sides="both", baseline="equal-compute"))
    assert ex.plan(with_baseline.spec()).labels == with_baseline.labels
    assert sum(label.endswith("sides swapped") for label in with_baseline.labels) == 1


def test_order_shuffled_seeds_each_question_and_repeat_reproducibly():
    from engine.experiments.arrangement import cell_order_seed
    plan = ex.plan(spec(order="shuffled", seed=5))
    seeds = {cell: plan.order_seed_of(cell) for cell in plan.cells()}
    assert all(isinstance(s, int) for s in seeds.values())
    assert seeds[ex.Cell(0, 0, 0)] == seeds[ex.Cell(0, 1, 0)]  # configurations meet one draw
    assert len({seeds[ex.Cell(q, 0, r)] for q in range(2) for r in range(2)}) == 4
    assert seeds[ex.Cell(1, 0, 1)] == cell_order_seed(5, QUESTIONS[1]["question"], 1)
    assert ex.plan(spec(order="shuffled", seed=6)).order_seed_of(ex.Cell(0, 0, 0)) != \
        seeds[ex.Cell(0, 0, 0)]
    assert ex.plan(spec()).order_seed_of(ex.Cell(0, 0, 0)) is None
    assert plan.spec()["order"] == "shuffled" and plan.spec()["seed"] == 5


def test_a_shuffled_two_sided_experiment_runs_and_resumes_without_duplicates(tmp_path):
    from engine.experiments.arrangement import cell_order_seed
    store = Store(f"sqlite:///{tmp_path / 'e.db'}")
    plan = ex.plan(spec(order="shuffled", sides="both", seed=1))
    experiment_id = ex.create(store, plan)
    stop = __import__("threading").Event()
    done_once = []

    def stop_after_three(state):
        done_once.append(state.done)
        if state.done >= 3:
            stop.set()
    ex.run_experiment(store, experiment_id, stop_event=stop, on_progress=stop_after_three)
    assert 0 < len(ex.pending_cells(store, experiment_id)) < plan.runs
    state = ex.run_experiment(store, experiment_id)
    assert state.status == "completed" and ex.pending_cells(store, experiment_id) == []
    runs = store.runs(experiment_id=experiment_id)
    done = runs[runs["status"] == "completed"]
    cells = [ex.Cell.from_tags(tags) for tags in done["tags"]]
    assert len(cells) == len(set(cells)) == plan.runs  # every cell once, none twice
    for _, row in done.iterrows():
        cell = ex.Cell.from_tags(row["tags"])
        seed = cell_order_seed(1, QUESTIONS[cell.q]["question"], cell.r)
        assert row["config"]["order_seed"] == seed
        swapped = plan.labels[cell.c].endswith("sides swapped")
        if row["protocol"] == "debate":
            assert row["config"]["options"]["swap_sides"] is swapped
            assert row["metrics"]["seat_for"] == ("opponent" if swapped else "proponent")
    assert ex.run_experiment(store, experiment_id).status == "completed"
    assert len(store.runs(experiment_id=experiment_id)) == len(runs)  # nothing redone


# --------------------------------------------------------------------------- the Run page
def test_the_run_page_takes_an_order_seed_and_swaps_a_debate_s_sides(db_url):
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"),
                           default_timeout=120)
    at.run()
    at.switch_page("pages/run.py").run()
    at.selectbox(key="run-0-protocol").select("debate").run()
    at.text_area(key="run-0-question").input("Is it so?").run()
    at.text_input(key="run-0-model").input("simulated").run()
    assert at.number_input(key="run-0-order-seed").value is None  # blank: configured order
    at.number_input(key="run-0-order-seed").set_value(5).run()
    at.checkbox(key="run-0-debate-option-swap_sides").check().run()
    assert not at.error, [e.value for e in at.error]
    at.button(key="run-start").click().run()
    assert not at.exception, at.exception
    run_id = at.session_state["run_page_run"]
    store = Store(db_url)
    poll(at, lambda a: store.get(run_id)["status"] != "running")
    run = store.get(run_id)
    assert run["config"]["order_seed"] == 5
    assert run["config"]["options"]["swap_sides"] is True
    assert run["result"]["sides"] == {"proponent": "against", "opponent": "for"}
    assert run["result"]["order"] == presentation_order(["opponent", "proponent"], 5)


def test_the_experiments_form_plans_shuffled_orders_and_both_sides(db_url):
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"),
                           default_timeout=120)
    at.run()
    at.switch_page("pages/experiments.py").run()
    open_new_experiment(at)
    at.selectbox(key="exp-set").select("demo").run()
    at.multiselect(key="exp-configs").select("debate · defaults").select("vote · defaults").run()
    at.checkbox(key="exp-shuffled").check().run()
    at.checkbox(key="exp-both-sides").check().run()
    assert not at.error, [e.value for e in at.error]
    runs = next(m for m in at.metric if m.label == "Runs")
    assert runs.value == "12"  # 4 demo questions x (debate, vote, debate swapped)
    at.button(key="exp-start").click().run()
    assert not at.exception, at.exception
    spec = ex.get(Store(db_url), at.session_state["experiments_page_selected"])["spec"]
    assert spec["order"] == "shuffled" and spec["sides"] == "both"
    assert [c["label"] for c in spec["configs"]][-1] == "debate · defaults · sides swapped"


def test_run_detail_names_the_order_seed(tmp_path):
    from engine.reports.runs import run_detail
    store = Store(f"sqlite:///{tmp_path / 'd.db'}")
    seeded, plain = run("vote", order_seed=8, store=store), run("vote", store=store)
    assert ("Order seed", "8") in run_detail(store, seeded.run_id).facts
    assert all(label != "Order seed" for label, _ in run_detail(store, plain.run_id).facts)
