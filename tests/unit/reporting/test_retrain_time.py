"""A lesson prints how long retraining it takes here: the stored time scaled by a speed check."""

import json

from fedlib.reporting import retrain_time


def write(root, times, rate=None):
    (root / "notebooks").mkdir(parents=True, exist_ok=True)
    (root / retrain_time.TIMES_FILE).write_text(json.dumps(times))
    if rate is not None:
        (root / retrain_time.MACHINE_FILE).write_text(json.dumps({"steps_per_second": rate}))


def test_the_stored_time_scales_by_the_two_machines_rates(tmp_path):
    write(tmp_path, {"lesson_a": {"seconds": 300, "standalone": {"seconds": 160, "runs_trained": 7}}}, rate=40.0)
    slower = retrain_time.retrain_line(tmp_path, "lesson_a", rate=20.0)  # half as fast: twice as long
    assert slower.startswith("retraining this lesson's 7 runs: about 5 min on this machine (160 s")
    assert "2.0x" in slower
    faster = retrain_time.retrain_line(tmp_path, "lesson_a", rate=80.0)
    assert "about 80 s on this machine" in faster and "0.5x" in faster


def test_no_line_without_a_stored_time_a_reference_rate_or_runs_to_train(tmp_path):
    write(tmp_path, {"served": {"seconds": 19}, "nothing": {"standalone": {"seconds": 24, "runs_trained": 0}},
                     "one": {"standalone": {"seconds": 50, "runs_trained": 1}}})
    assert retrain_time.retrain_line(tmp_path, "one", rate=10.0) is None, "no reference rate recorded"
    write(tmp_path, {"served": {"seconds": 19}, "nothing": {"standalone": {"seconds": 24, "runs_trained": 0}},
                     "one": {"standalone": {"seconds": 50, "runs_trained": 1}}}, rate=10.0)
    assert retrain_time.retrain_line(tmp_path, "served", rate=10.0) is None
    assert retrain_time.retrain_line(tmp_path, "nothing", rate=10.0) is None
    assert retrain_time.retrain_line(tmp_path, "missing", rate=10.0) is None
    assert "this lesson's 1 run:" in retrain_time.retrain_line(tmp_path, "one", rate=10.0)


def test_a_time_measured_with_its_own_check_scales_by_that_check(tmp_path):
    write(tmp_path, {"a": {"standalone": {"seconds": 100, "runs_trained": 2, "check_rate": 30.0}}}, rate=60.0)
    assert "about 50 s on this machine" in retrain_time.retrain_line(tmp_path, "a", rate=60.0)


def test_durations_read_in_the_unit_a_person_plans_in():
    assert retrain_time.duration_text(40) == "40 s"
    assert retrain_time.duration_text(600) == "10 min"
    assert retrain_time.duration_text(3 * 3600) == "3.0 h"


def test_the_speed_check_measures_a_positive_rate_and_leaves_the_threads_as_they_were():
    import torch
    threads = torch.get_num_threads()
    assert retrain_time.machine_rate(seconds=0.2) > 0
    assert torch.get_num_threads() == threads


def test_every_lesson_that_trains_has_a_stored_time_and_the_course_machine_its_rate():
    from pathlib import Path
    root = Path(__file__).resolve().parents[3]
    assert retrain_time.reference_rate(root) > 0, "run tools/lesson_store.py --calibrate where the times were taken"
    times = json.loads((root / retrain_time.TIMES_FILE).read_text())
    assert any(retrain_time.retrain_line(root, stem, rate=retrain_time.reference_rate(root)) for stem in times)
