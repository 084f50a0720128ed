"""Domain specs: tables, columns, tools and their executable contracts."""

from scaleenv.formats.domain import (
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
from scaleenv.validation.spec import validate_spec

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
