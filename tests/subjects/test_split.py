"""Who gets which subject (a keyed hash: the same on every run, about even shares) and the
decision on people's clicks per message: a winner, a tie, or too few clicks to tell."""

from __future__ import annotations

from collections import Counter

from newsletter.subjects.split import MIN_CLICKS, Split, Tally, decide

SECRET = b"split-tests-secret-0123456789abcdef"


def test_the_sample_and_the_variants_are_even_and_the_same_on_every_run() -> None:
    split = Split(SECRET, 14, "main", 0.2, 2)
    keys = [f"r{n}@example.org" for n in range(10_000)]
    sampled = [k for k in keys if split.in_sample(k)]
    assert 1_800 < len(sampled) < 2_200
    shares = Counter(split.variant(k) for k in sampled)
    assert 900 < shares[0] < 1_100
    assert 900 < shares[1] < 1_100
    again = Split(SECRET, 14, "main", 0.2, 2)
    assert [again.variant(k) for k in sampled] == [split.variant(k) for k in sampled]
    other_issue = Split(SECRET, 15, "main", 0.2, 2)
    assert [k for k in keys if other_issue.in_sample(k)] != sampled  # a new draw per send


def test_more_peoples_clicks_per_message_win() -> None:
    decision = decide(("Alpha", "Beta"), [Tally(100, 3), Tally(50, 8)])
    assert (decision.winner, decision.reason) == (1, "clicks")
    assert "'Beta' won on people's clicks per message" in decision.detail
    assert "'Alpha': 100 sent, 3 clicked by people (3.0%)" in decision.detail


def test_a_tie_or_too_few_clicks_keep_the_first_subject_and_say_so() -> None:
    tie = decide(("Alpha", "Beta"), [Tally(50, 6), Tally(50, 6)])
    assert (tie.winner, tie.reason) == (0, "tie")
    assert "A tie: the first subject stays." in tie.detail
    few = decide(("Alpha", "Beta"), [Tally(50, 0), Tally(50, MIN_CLICKS - 1)])
    assert (few.winner, few.reason) == (0, "too few clicks")
    assert "Too few people's clicks to tell (9, fewer than 10)" in few.detail
