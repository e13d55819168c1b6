"""Source-level safety rules over everything autotune ships (autotune/, launchers/, bench_model/, benchmarks/).

A grep is a floor, not proof: the behavioural tests (test_safety_*.py) feed hostile strings and malicious files through
the real code. This one stops the dangerous call from being written in the first place:
- YAML is parsed with `yaml.safe_load`/`safe_dump` only (a `!!python/object` tag in a user's file must not run code);
- no shell: commands are argv lists (`shell=True`, `os.system`, `os.popen` would hand config values to /bin/sh);
- nothing unpickles: results are Parquet/JSON (docs/trial_protocol.md "Never pickled"); `pickle.load`, `torch.load`,
  `pd.read_pickle`, `np.load(..., allow_pickle=True)`, `cloudpickle.load` and `dill.load` are refused outright.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from harness import REPO

SHIPPED = ["autotune", "launchers", "bench_model", "benchmarks"]

FORBIDDEN = {
    "unsafe yaml load": re.compile(
        r"yaml\.(load|unsafe_load|full_load|load_all|unsafe_load_all)\s*\("
        r"|Loader\s*=\s*yaml\.(Loader|FullLoader|UnsafeLoader)|yaml\.(Unsafe|Full)?Loader\b"
    ),
    "shell": re.compile(r"shell\s*=\s*True|os\.system\s*\(|os\.popen\s*\(|commands\.getoutput"),
    "unpickling": re.compile(
        r"\b(c?pickle|cloudpickle|dill|joblib)\.loads?\s*\(|torch\.load\s*\(|read_pickle\s*\("
        r"|allow_pickle\s*=\s*True|pickle\.Unpickler"
    ),
    "eval of data": re.compile(r"(?<![\w.])(eval|exec)\s*\("),
}


def _sources() -> list[Path]:
    files = []
    for top in SHIPPED:
        files += [p for p in (REPO / top).rglob("*") if p.suffix in (".py", ".sh") and "__pycache__" not in p.parts]
    return sorted(files)


def _code_lines(path: Path):
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("#"):
            continue
        yield number, line


def test_there_is_source_to_check():
    names = {p.relative_to(REPO).as_posix() for p in _sources()}
    assert (
        "autotune/spec/config.py" in names and "autotune/results/trialfile.py" in names and "launchers/base.py" in names
    )


@pytest.mark.parametrize("rule", sorted(FORBIDDEN))
def test_no_forbidden_call(rule):
    pattern = FORBIDDEN[rule]
    hits = [
        f"{p.relative_to(REPO)}:{n}: {line.strip()}"
        for p in _sources()
        for n, line in _code_lines(p)
        if pattern.search(line)
    ]
    assert not hits, f"{rule}:\n" + "\n".join(hits)


def test_patterns_catch_what_they_should():
    """The regexes themselves: each must flag the dangerous spelling and pass the safe one."""
    assert FORBIDDEN["unsafe yaml load"].search("doc = yaml.load(text, Loader=yaml.Loader)")
    assert FORBIDDEN["unsafe yaml load"].search("yaml.full_load(fh)")
    assert not FORBIDDEN["unsafe yaml load"].search("doc = yaml.safe_load(text)")
    assert FORBIDDEN["shell"].search("subprocess.run(cmd, shell=True)")
    assert FORBIDDEN["shell"].search("os.system('sbatch ' + path)")
    assert not FORBIDDEN["shell"].search("subprocess.run(['sbatch', path])")
    assert FORBIDDEN["unpickling"].search("state = torch.load(path)")
    assert FORBIDDEN["unpickling"].search("rows = pickle.load(fh)")
    assert FORBIDDEN["unpickling"].search("np.load(p, allow_pickle=True)")
    assert not FORBIDDEN["unpickling"].search("pq.read_table(path)")
    assert FORBIDDEN["eval of data"].search("value = eval(text)")
    assert not FORBIDDEN["eval of data"].search("model.eval()")
