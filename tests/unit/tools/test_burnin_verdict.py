"""Which side set the latency (pushserver_measure.verdict): named only when the last steps
agree, "undecided" rather than flipping on one sample."""

from __future__ import annotations

from pushserver_measure.verdict import Point, latency_side, verdict


def point(step: int, crowd: float, probe: float | None, loadgen: float = 50.0) -> Point:
    return Point(step, step * 1000, crowd, probe, 40.0, 5.0, loadgen, 5.0, "")


def test_the_load_generator_is_named_when_the_last_three_steps_agree() -> None:
    points = [point(1, 0.1, 0.09), point(2, 0.3, 0.1), point(3, 0.5, 0.1), point(4, 0.9, 0.2)]
    side = latency_side(points)
    assert side.startswith("latency set by the load generator")
    assert "in 3 steps" in side


def test_the_server_is_named_when_the_probe_saw_it_too_in_every_step() -> None:
    points = [point(1, 0.2, 0.15), point(2, 0.5, 0.4), point(3, 1.2, 1.0)]
    assert latency_side(points).startswith("latency set by the server (the probe saw it too")


def test_one_odd_sample_gives_undecided_not_a_flip() -> None:
    # the case: the probe fell from 181 ms to 1.5 ms while the crowd rose to 290 ms
    points = [point(1, 0.15, 0.14), point(2, 0.2, 0.181), point(3, 0.29, 0.0015)]
    side = latency_side(points)
    assert side.startswith("latency source undecided (crowd/probe worst over the last 3 steps")
    assert "1.1, 1.1, 193.3" in side


def test_a_single_step_is_too_few_to_tell() -> None:
    assert latency_side([point(1, 0.9, 0.01)]).startswith("latency source undecided (one step")


def test_without_a_probe_the_side_short_of_cpu_is_named() -> None:
    side = latency_side([point(1, 0.9, None, loadgen=95.0)])
    assert side.startswith("latency set by the load generator (short of CPU, no probe")


def test_the_verdict_reads_the_valid_steps_before_the_deciding_one() -> None:
    points = [point(1, 0.3, 0.1), point(2, 0.6, 0.2), point(3, 1.5, 0.3)]
    answer = verdict(points, 1.0, "ceiling")
    assert answer.startswith("capacity under the 1 s ceiling: 2,000 subscribers")
    assert "latency set by the load generator" in answer
