"""Seeds taken from the run seed (randrepeat=0 without randseed) must differ per clone."""

from ssdtwin.fio import parse_string


def test_run_seed_zero_still_gives_each_clone_its_own_streams() -> None:
    for run_seed in (0, 1, 0x89):
        run = parse_string("[g]\nrw=randwrite\nrandrepeat=0\nnumjobs=4\n", name="x.fio", run_seed=run_seed)
        seeds = [c.seed for c in run.clones]
        assert len(set(seeds)) == 4, (run_seed, seeds)
        assert all(c.seed_source == "run_seed" for c in run.clones)


def test_different_run_seeds_differ_and_repeat() -> None:
    a = parse_string("[g]\nrw=randwrite\nrandrepeat=0\n", name="x.fio", run_seed=1).clones[0].seed
    b = parse_string("[g]\nrw=randwrite\nrandrepeat=0\n", name="x.fio", run_seed=2).clones[0].seed
    a2 = parse_string("[g]\nrw=randwrite\nrandrepeat=0\n", name="x.fio", run_seed=1).clones[0].seed
    assert a != b and a == a2
