"""The micro-benchmark runs, and its cases are the conformance suite's spec examples."""

from __future__ import annotations

import pytest
import yaml
from cefilters import sql
from cefilters.sql import bench
from support.shared import CESQL_TCK

SPEC_EXAMPLES = CESQL_TCK.path / "spec_examples.yaml"


@CESQL_TCK.needed
def test_the_spec_example_rows_are_the_suites_expressions() -> None:
    """Every distinct expression of spec_examples.yaml has a row, with a matching event."""
    suite = yaml.load(SPEC_EXAMPLES.read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    expressions = {case["expression"] for case in suite["tests"]}
    rows = {case.cesql for case in bench.CASES if case.name.startswith("spec:")}
    assert rows == expressions


@pytest.mark.parametrize("case", bench.CASES, ids=[case.name for case in bench.CASES])
def test_each_row_means_the_same_in_cesql_and_cel(case: bench.BenchCase) -> None:
    """The CEL twin of each row gives the same answer (an error on both sides for the
    missing-attribute rows), so the timings compare like with like."""
    import celpy
    from celpy.adapter import json_to_cel
    from celpy.evaluation import CELEvalError

    result = sql.compile(case.cesql).evaluate(case.event)
    environment = celpy.Environment()
    activation = {name: json_to_cel(value) for name, value in case.event.items()}
    activation["event"] = json_to_cel(case.event)
    try:
        cel_value: object = environment.program(environment.compile(case.cel)).evaluate(activation)
    except CELEvalError as error:
        cel_value = error
    if result.errors:
        assert isinstance(cel_value, CELEvalError)
    else:
        assert result.value == cel_value


def test_the_benchmark_prints_its_table(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m cefilters.sql.bench`` runs end to end (tiny budget: a smoke run)."""
    assert bench.main(["--repeat", "1", "--budget", "0.0005"]) == 0
    out = capsys.readouterr().out
    assert "compile us" in out
    assert len([line for line in out.splitlines() if line.startswith(("typical:", "spec:"))]) == len(
        bench.CASES
    )
