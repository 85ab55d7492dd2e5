"""ECT where agents already run: gate "done" on a verified certificate in any framework.

The framework-independent kit (this package's public surface):

* :class:`ToolEvent`, :class:`Evidence`, :data:`Extractor`, :func:`scoped_value`,
  :func:`build_receipt`, :func:`json_pointer`: receipts from tool calls and their results;
* :class:`EctSession`: one run against one contract (record events, seal and verify a
  submission), with :func:`directive_text` for the feedback an agent gets;
* :func:`ect_stopping_rule`: the same check as a :class:`runner.control.StoppingRule`.

Adapters, each behind an optional extra and imported only when used:
``runner.integrations.inspect`` (the ``inspect`` extra),
``runner.integrations.openai_agents`` (the ``openai-agents`` extra),
``runner.integrations.langgraph`` (the ``langgraph`` extra). docs/integrations.md shows each.
"""

from runner.integrations._control import ect_stopping_rule, session_from_trace
from runner.integrations._receipts import (
    Evidence,
    Extractor,
    ToolEvent,
    build_receipt,
    json_pointer,
    safe_call_id,
    scoped_value,
)
from runner.integrations._session import EctSession, directive_text

__all__ = [
    "EctSession",
    "Evidence",
    "Extractor",
    "ToolEvent",
    "build_receipt",
    "directive_text",
    "ect_stopping_rule",
    "json_pointer",
    "safe_call_id",
    "scoped_value",
    "session_from_trace",
]
