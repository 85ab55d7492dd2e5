"""Every refusal of a malformed eval case, with its exact one-line message (what `ect evals run`
prints after the file name): the message is the contract, so each is pinned whole."""

from __future__ import annotations

from typing import Any

import pytest

from runner.control import EvalCase, EvalCaseError

DROP = object()  # remove the field
BASE: dict[str, Any] = {"format": "ect.stop-eval/1", "id": "c", "task": "t",
                        "expect_stop": "goal_met", "finish_check": {"verdicts": [True]},
                        "agent": {"turns": [{"finish": 1}]}}


def test_a_case_that_is_not_an_object() -> None:
    with pytest.raises(EvalCaseError) as e:
        EvalCase.from_json([], "f.json")
    assert str(e.value) == "f.json: $: must be an object"


@pytest.mark.parametrize(("change", "message"), [
    ({'format': 'x'}, "$.format: must be 'ect.stop-eval/1'"),
    ({'id': DROP}, "$: missing field 'id'"),
    ({'id': 1}, '$.id: must be a string'),
    ({'task': None}, '$.task: must be a string'),
    ({'description': 3}, '$.description: must be a string'),
    ({'expect_output': {'equals': 1, 'subset': {}}}, "$.expect_output: needs exactly one of 'equals' or 'subset'"),
    ({'expect_output': {}}, "$.expect_output: needs exactly one of 'equals' or 'subset'"),
    ({'expect_output': {'subset': 1}}, '$.expect_output.subset: must be an object'),
    ({'agent': {'turns': [{'finish': 1}], 'import': 'a:b'}}, "$.agent: needs exactly one of 'turns' or 'import'"),
    ({'agent': {'import': 3}}, '$.agent.import: must be a string'),
    ({'agent': {'import': 'a.b'}}, "$.agent.import: must be 'package.module:function'"),
    ({'agent': {'import': 'a:b:c'}}, "$.agent.import: must be 'package.module:function'"),
    ({'expect_steps': -1}, '$.expect_steps: must be >= 0'),
    ({'expect_steps': True}, '$.expect_steps: must be an integer'),
    ({'expect_tools': 'get'}, '$.expect_tools: must be a list'),
    ({'expect_tools': ['get', '']}, '$.expect_tools: must be a list of non-empty strings'),
    ({'expect_not_run': [1]}, '$.expect_not_run: must be a list of non-empty strings'),
    ({'expect_kind': 1}, '$.expect_kind: must be a string'),
    ({'budget': {'max_steps': 10001, 'max_tokens': 5}}, '$.budget.max_steps: must be <= 10000'),
    ({'budget': {'max_steps': 3, 'max_tokens': 5, 'tool_limits': {'x': 1}}}, "$.budget.tool_limits: unknown field 'x'"),
    ({'budget': {'max_steps': 3, 'max_tokens': 5, 'tool_limits': {'per_tool': []}}}, '$.budget.tool_limits.per_tool: must be an object'),
    ({'budget': {'max_steps': 3, 'max_tokens': 5, 'tool_limits': {'per_tool': {'get': -1}}}}, '$.budget.tool_limits.per_tool.get: must be >= 0'),
    ({'budget': {'max_steps': 3, 'max_tokens': 5, 'tool_limits': {'default': 'x'}}}, '$.budget.tool_limits.default: must be an integer'),
    ({'budget': {'max_steps': 3, 'max_tokens': 5, 'tool_limits': {'side_effect_default': -2}}}, '$.budget.tool_limits.side_effect_default: must be >= 0'),
    ({'budget': {'max_steps': 3, 'max_tokens': 5, 'tool_limits': {'total': 1.5}}}, '$.budget.tool_limits.total: must be an integer'),
    ({'budget': {'max_steps': 3, 'max_tokens': 0}}, '$.budget.max_tokens: must be >= 1'),
    ({'budget': {'max_steps': 3, 'max_cost_usd': -1}}, '$.budget.max_cost_usd: must be >= 0'),
    ({'budget': {'max_steps': 3, 'max_cost_usd': '1'}}, '$.budget.max_cost_usd: must be a number'),
    ({'guard': {'allow': ['get'], 'side_effects': []}}, '$.guard.side_effects: must be an object'),
    ({'guard': {'allow': ['get'], 'side_effects': {'pay': {'x': 1}}}}, "$.guard.side_effects.pay: unknown field 'x'"),
    ({'guard': {'allow': ['get'], 'side_effects': {'pay': {'max_amount': '1'}}}}, '$.guard.side_effects.pay.max_amount: must be a number'),
    ({'guard': {'allow': ['get'], 'side_effects': {'pay': {'escalate_above': -1}}}}, '$.guard.side_effects.pay.escalate_above: must be >= 0'),
    ({'guard': {'allow': ['get'], 'side_effects': {'pay': {'requires_approval': 1}}}}, '$.guard.side_effects.pay.requires_approval: must be a boolean'),
    ({'guard': {'allow': 'get'}}, '$.guard.allow: must be a list of non-empty strings'),
    ({'guard': {'allow': ['get'], 'approvals': ['']}}, '$.guard.approvals: must be a list of non-empty strings'),
    ({'no_progress': {'x': 1}}, "$.no_progress: unknown field 'x'"),
    ({'no_progress': {'repeats': '3'}}, '$.no_progress.repeats: must be an integer'),
    ({'no_progress': {'empty_results': -1}}, '$.no_progress.empty_results: must be >= 0'),
    ({'no_progress': {'stalled': 'x'}}, '$.no_progress.stalled: must be an integer'),
    ({'no_progress': {'stalled': 1}}, '$.no_progress/$.tool_failure: StalledState.results must be >= 2'),
    ({'tool_failure': {'consecutive': 0}}, '$.no_progress/$.tool_failure: ToolFailure.consecutive must be >= 1'),
    ({'tool_failure': {'consecutive': '2'}}, '$.tool_failure.consecutive: must be an integer'),
    ({'rules': {}}, '$.rules: must be a list'),
    ({'rules': [{'name': 'r'}]}, "$.rules[0]: missing field 'require'"),
    ({'rules': [{'name': 'r', 'require': []}]}, '$.rules[0].require: must not be empty'),
    ({'rules': [{'name': 'r', 'require': ['v'], 'stop_early': 1}]}, '$.rules[0].stop_early: must be a boolean'),
    ({'rules': [{'name': 1, 'require': ['v']}]}, '$.rules[0].name: must be a string'),
    ({'finish_check': {'require': ['v'], 'verdicts': [True]}}, "$.finish_check: needs exactly one of 'require' or 'verdicts'"),
    ({'finish_check': {}}, "$.finish_check: needs exactly one of 'require' or 'verdicts'"),
    ({'finish_check': {'verdicts': 'yes'}}, '$.finish_check.verdicts: must be a list'),
    ({'finish_check': {'verdicts': []}}, '$.finish_check.verdicts: must be a non-empty list of booleans'),
    ({'finish_check': {'verdicts': [1]}}, '$.finish_check.verdicts: must be a non-empty list of booleans'),
    ({'finish_check': DROP}, '$: needs finish_check or rules (a finish must be checked)'),
    ({'agent': {'turns': {}}}, '$.agent.turns: must be a list'),
    ({'agent': {'turns': [1]}}, '$.agent.turns[0]: must be an object'),
    ({'agent': {'turns': [{}]}}, '$.agent.turns[0]: needs exactly one of call, finish, escalate, invalid, raise'),
    ({'agent': {'turns': [{'raise': 'x', 'tokens': 1}]}}, "$.agent.turns[0]: unknown field 'tokens'"),
    ({'agent': {'turns': [{'raise': 1}]}}, '$.agent.turns[0].raise: must be a string'),
    ({'agent': {'turns': [{'finish': 1, 'found': []}]}}, "$.agent.turns[0]: unknown field 'found'"),
    ({'agent': {'turns': [{'call': {'args': {}}}]}}, "$.agent.turns[0].call: missing field 'tool'"),
    ({'agent': {'turns': [{'call': {'tool': 1}}]}}, '$.agent.turns[0].call.tool: must be a string'),
    ({'agent': {'turns': [{'call': {'tool': 'get', 'args': []}}]}}, '$.agent.turns[0].call.args: must be an object'),
    ({'agent': {'turns': [{'call': {'tool': ''}}]}}, '$.agent.turns[0].call: ToolCall.tool must be a non-empty string'),
    ({'agent': {'turns': [{'escalate': 1}]}}, '$.agent.turns[0].escalate: must be a string'),
    ({'agent': {'turns': [{'escalate': 'q', 'found': 'x'}]}}, '$.agent.turns[0].found: must be a list of non-empty strings'),
    ({'agent': {'turns': [{'invalid': 1}]}}, '$.agent.turns[0].invalid: must be a string'),
    ({'agent': {'turns': [{'finish': 1, 'tokens': -1}]}}, '$.agent.turns[0].tokens: must be >= 0'),
    ({'agent': {'turns': [{'finish': 1, 'cost_usd': -1}]}}, '$.agent.turns[0].cost_usd: must be >= 0'),
    ({'tools': []}, '$.tools: must be an object'),
    ({'tools': {'get': {}}}, "$.tools.get: missing field 'results'"),
    ({'tools': {'get': {'results': {}}}}, '$.tools.get.results: must be a list'),
    ({'tools': {'get': {'results': []}}}, '$.tools.get.results: must not be empty'),
    ({'tools': {'get': {'results': [{'x': 1}]}}}, "$.tools.get.results[0]: unknown field 'x'"),
    ({'tools': {'get': {'results': [{'delay_s': -1}]}}}, '$.tools.get.results[0].delay_s: must be >= 0'),
    ({'tools': {'get': {'results': [{'ok': False, 'error': 1}]}}}, '$.tools.get.results[0].error: must be a string'),
    ({'tools': {'get': {'results': [{'fatal': 'no'}]}}}, '$.tools.get.results[0].fatal: must be a boolean'),
    ({'tools': {'get': {'results': [{'cost_usd': '1'}]}}}, '$.tools.get.results[0].cost_usd: must be a number'),
])
def test_a_malformed_case_is_refused_with_one_exact_line(change: dict[str, Any], message: str) -> None:
    obj = {k: v for k, v in {**BASE, **change}.items() if v is not DROP}
    with pytest.raises(EvalCaseError) as e:
        EvalCase.from_json(obj, "f.json")
    assert str(e.value) == f"f.json: {message}"
