"""Domain specs: tables, columns, tools and their executable contracts."""

from scaleenv.spec.models import (
    Column,
    Contract,
    DomainSpec,
    ErrorSpec,
    Generated,
    Implementation,
    Param,
    Returns,
    Table,
    ToolSpec,
)
from scaleenv.spec.validate import validate_spec

__all__ = [
    "Column",
    "Contract",
    "DomainSpec",
    "ErrorSpec",
    "Generated",
    "Implementation",
    "Param",
    "Returns",
    "Table",
    "ToolSpec",
    "validate_spec",
]
