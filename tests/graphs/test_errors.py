"""User errors: one base class, the built-in bases callers expect, attributes that survive pickling."""

from __future__ import annotations

import pickle

import pytest

import graphs
from graphs import errors
from operators import ConvergenceError, InsufficientMemoryError
from pipelines import WorkdirLockedError
from pipelines.spec import SpecError

CASES = [
    (
        errors.GraphFormatError("e.txt", 7, "expected an integer"),
        ValueError,
        "e.txt, line 7: expected an integer",
        {"path": "e.txt", "line": 7, "expected": "expected an integer"},
    ),
    (
        errors.IntegrityError("idx/h_freq.npy", None, "checksum mismatch"),
        ValueError,
        "idx/h_freq.npy: checksum mismatch",
        {"path": "idx/h_freq.npy", "line": None, "expected": "checksum mismatch"},
    ),
    (
        errors.LabelError("2 label(s) not in the graph", [5, -1], 2),
        KeyError,
        "2 label(s) not in the graph",
        {"labels": [5, -1], "count": 2},
    ),
    (
        ConvergenceError("pagerank", 3, 0.5, 1e-6),
        RuntimeError,
        "pagerank did not converge in 3 iterations",
        {"algorithm": "pagerank", "iterations": 3, "error": 0.5, "threshold": 1e-6},
    ),
    (
        ConvergenceError("ppr", 2**63 - 1, 5e-14, 1e-20, "use a larger tol"),
        RuntimeError,
        "ppr did not converge: its error 5e-14 has not reached the tolerance 1e-20; use a larger tol",
        {"iterations": 2**63 - 1, "error": 5e-14, "advice": "use a larger tol"},
    ),
    (
        InsufficientMemoryError("ppr", 2**31, 2**30, "use fewer sources"),
        MemoryError,
        "ppr needs about 2.00 GiB but only 1.00 GiB are free; use fewer sources",
        {"what": "ppr", "needed": 2**31, "available": 2**30, "hint": "use fewer sources"},
    ),
    (WorkdirLockedError("workdir wd is in use"), RuntimeError, "workdir wd is in use", {}),
    (errors.OptionError("alpha must be in [0, 1], got 2"), ValueError, "alpha must be in [0, 1], got 2", {}),
    (SpecError("job.yaml: key 'k' is not allowed"), ValueError, "job.yaml: key 'k' is not allowed", {}),
    (errors.MissingDependencyError("pip install x"), ImportError, "pip install x", {}),
    (errors.DeviceError("no CUDA device"), RuntimeError, "no CUDA device", {}),
    (errors.MemoryLimitError("does not fit"), MemoryError, "does not fit", {}),
    (errors.SchedulerUnreachableError("no scheduler"), OSError, "no scheduler", {}),
]


@pytest.mark.parametrize(("err", "base", "message", "attrs"), CASES, ids=[type(c[0]).__name__ for c in CASES])
def test_user_errors_keep_their_bases_message_and_attributes_through_pickle(err, base, message, attrs):
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert isinstance(back, graphs.UserError) and isinstance(back, base)
    assert message in str(back) and str(back) == str(err)
    for name, value in attrs.items():
        assert getattr(back, name) == value


def test_option_checks_raise_option_errors_that_are_value_errors():
    from operators._checks import check_choice, check_count, check_positive, check_probability

    for check, args in (
        (check_probability, ("alpha", 2.0)),
        (check_positive, ("tol", -1.0)),
        (check_count, ("k", 0)),
        (check_choice, ("method", "x", ("a", "b"))),
    ):
        with pytest.raises(errors.OptionError) as info:
            check(*args)
        assert isinstance(info.value, ValueError) and args[0] in str(info.value)


def test_a_missing_cupy_is_a_user_error_with_the_install_hint(monkeypatch):
    from graphs import _device

    monkeypatch.setattr(_device, "_cupy_module", lambda: None)
    monkeypatch.setattr(_device, "gpu_available", lambda: False)
    with pytest.raises(errors.MissingDependencyError) as info:
        _device.resolve_device("gpu")
    assert isinstance(info.value, ImportError) and "pip install 'graphjobs[gpu]'" in str(info.value)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("300000", 300000),
        ("2e9", 2 * 10**9),
        ("1K", 1024),
        ("512k", 512 * 1024),
        ("100MB", 100 * 2**20),
        ("2GiB", 2 * 2**30),
        ("1.5T", int(1.5 * 2**40)),
        (" 3 G ", 3 * 2**30),
    ],
)
def test_memory_limits_read_sizes_with_units(monkeypatch, text, size):
    from graphs._device import free_memory, parse_size

    assert parse_size(text) == size
    monkeypatch.setenv("GRAPHJOBS_MEMORY_LIMIT", text)
    capped = free_memory("cpu")
    assert capped == size if size < 2**20 else capped <= size  # a small cap binds; a large one may not


@pytest.mark.parametrize("text", ["lots", "1X", "MB", "-5", "1..2G"])
def test_a_memory_limit_that_is_not_a_size_is_one_clear_error(monkeypatch, text):
    from graphs._device import free_memory

    monkeypatch.setenv("GRAPHJOBS_MEMORY_LIMIT", text)
    with pytest.raises(errors.OptionError, match=r"GRAPHJOBS_MEMORY_LIMIT=.*expected bytes"):
        free_memory("cpu")


@pytest.mark.parametrize("suffix", [".txt", ".txt.gz"])
def test_a_file_too_large_for_free_memory_is_refused_before_parsing(tmp_path, monkeypatch, suffix):
    """The edges of a file, estimated from its size and first lines, are checked against the free host
    memory before it is parsed: the error names the file and its estimated edges."""
    import gzip

    text = "# a comment\n" + "".join(f"{i} {(i * 7) % 5000}\n" for i in range(5000))
    path = tmp_path / f"edges{suffix}"
    if suffix.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    assert graphs.read_edgelist(path).m == 5000  # fits in the real free memory
    monkeypatch.setenv("GRAPHJOBS_MEMORY_LIMIT", "100K")  # 5,000 edges need at least 320 KB
    refused = rf"reading .*edges{suffix} \(about 5,000 edges\)"
    with pytest.raises(errors.InsufficientMemoryError, match=refused):
        graphs.read_edgelist(path)
    monkeypatch.setenv("GRAPHJOBS_MEMORY_LIMIT", "1M")
    assert graphs.read_edgelist(path).m == 5000
