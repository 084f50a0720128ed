"""The ``scaleenv`` command line. Bad input exits with code 2 and one line per problem, no traceback."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NoReturn

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Manufacture executable, verifiable tool-use worlds for training LLM agents.",
)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one line to stderr and exit (2 = bad input)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _emit(obj: object) -> None:
    typer.echo(json.dumps(obj, indent=2, sort_keys=True))


@app.command()
def validate(path: Path = typer.Argument(..., help="A domain spec JSON file, or a universe directory.")) -> None:
    """Check a domain spec file (or every spec and task file of a universe directory)."""
    from scaleenv.errors import ScaleEnvError, SpecError
    from scaleenv.spec.io import load_spec_file

    if not path.exists():
        fail(f"{path} does not exist; pass a domain spec .json file or a universe directory")
    if path.is_dir():
        from scaleenv.universe import validate_universe

        try:
            summary = validate_universe(path)
        except ScaleEnvError as e:
            fail(str(e))
        typer.echo(summary)
        return
    try:
        spec = load_spec_file(path)
    except SpecError as e:
        for p, reason in e.problems:
            typer.echo(f"{path}: {p}: {reason}", err=True)
        raise typer.Exit(2) from None
    except ScaleEnvError as e:
        fail(str(e))
    n_write = sum(t.kind == "write" for t in spec.tools)
    typer.echo(
        f"ok: {spec.name}: {len(spec.tables)} tables, {len(spec.tools)} tools "
        f"({n_write} write, {len(spec.tools) - n_write} read), hash {spec.content_hash()}"
    )


@app.command()
def bench(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object of named figures."),
    quick: bool = typer.Option(False, "--quick", help="Fewer repetitions (for smoke tests)."),
) -> None:
    """Run the performance suite (code under benchmarks/) and print the figures."""
    from scaleenv.bench import run_bench

    figures = run_bench(quick=quick)
    if as_json:
        _emit(figures)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("figure", "value")
    for k, v in figures.items():
        table.add_row(k, f"{v:.4g}" if isinstance(v, float) else str(v))
    Console().print(table)


def main() -> None:
    """Console entry point."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
