"""Evidence-Carrying Termination: wire objects, digests, closed transform replay, verifier.

An agent may return ``complete`` only when a typed certificate binds every required slot to
valid, in-scope receipts and a deterministic replay of the closed transform language
reconstructs every claimed value (docs/formats.md).
"""

from runner.ect._digests import (
    args_digest,
    descriptor_digest,
    ledger_digest,
    receipt_digest,
    response_digest,
    value_digest,
)
from runner.ect._errors import IncompleteCertificate, ReplayError, WireFormatError
from runner.ect._ops import OPS, is_iso_date
from runner.ect._reasons import CHECK_FAMILIES, REASON_CODES, Decision, Reason
from runner.ect._schema import json_schemas, load_schema
from runner.ect._transforms import check_transform, replay, replay_exact
from runner.ect._values import values_match
from runner.ect._verifier import (
    Check,
    require_complete,
    verify,
    verify_bytes,
    verify_json,
    verify_json_explained,
    verify_unsafe_ablated,
)
from runner.ect._wire import (
    CERTIFICATE_FORMAT,
    CONTRACT_FORMAT,
    LEDGER_FORMAT,
    Cardinality,
    Certificate,
    Claim,
    Contract,
    ContractScope,
    DateRange,
    Descriptor,
    Ledger,
    Receipt,
    ReceiptScope,
    SlotSpec,
    Transform,
    Value,
    check_value,
)

__all__ = [
    "CERTIFICATE_FORMAT",
    "CHECK_FAMILIES",
    "CONTRACT_FORMAT",
    "LEDGER_FORMAT",
    "OPS",
    "REASON_CODES",
    "Cardinality",
    "Certificate",
    "Check",
    "Claim",
    "Contract",
    "ContractScope",
    "DateRange",
    "Decision",
    "Descriptor",
    "IncompleteCertificate",
    "Ledger",
    "Reason",
    "Receipt",
    "ReceiptScope",
    "ReplayError",
    "SlotSpec",
    "Transform",
    "Value",
    "WireFormatError",
    "args_digest",
    "check_transform",
    "check_value",
    "descriptor_digest",
    "is_iso_date",
    "json_schemas",
    "ledger_digest",
    "load_schema",
    "receipt_digest",
    "replay",
    "replay_exact",
    "require_complete",
    "response_digest",
    "value_digest",
    "values_match",
    "verify",
    "verify_bytes",
    "verify_json",
    "verify_json_explained",
    "verify_unsafe_ablated",
]
