"""Data the DuckDB engine registers from outside a database: a CSV or Parquet file, every file
a glob matches (one table, as DuckDB reads a glob), or a DuckDB relation.

Why the checks here come at registration: a registered table is read by queries only after
their charge, so anything about the files that would make a read fail must fail now, once,
for every query alike — never in a query whose filter happened to reach a bad file. For a glob
that means every matching file has the columns (and, for Parquet, the types) of the first:
DuckDB takes the first file's schema and fails on another only when a statement reads the
column that differs (a query-dependent failure after the charge), and a Parquet value of a
wider type than the first file's would be cast when read, which fails on some values only.

What an error may show: paths and the policy's column names (public), never a CSV's first
line — a file without a header row has a row of private data there, and DuckDB reports its
values as the column names.
"""

from __future__ import annotations

import glob
import importlib.util
from pathlib import Path
from typing import Any

import duckdb

from privplan.errors import PolicyError

__all__ = ["is_glob", "missing_csv_columns", "reader_sql", "relation_rows", "resolve_files"]

_SUFFIXES = (".csv", ".parquet")


def is_glob(text: str) -> bool:
    """Whether ``text`` is a glob pattern (as DuckDB reads one: ``*``, ``?``, ``[...]``)."""
    return any(c in text for c in "*?[")


def _directory(pattern: str) -> Path:
    """The directory a pattern's matches are looked for in: its longest prefix without a glob
    character."""
    path = Path(pattern)
    for parent in path.parents:
        if not is_glob(str(parent)):
            return parent
    return Path(".")


def resolve_files(data: str | Path, action: str) -> tuple[str, list[Path]]:
    """The path (or pattern) as DuckDB is to read it, and the files it names: one existing
    file, or every file a glob matches (sorted). ``action`` says what was being done, for the
    messages ("cannot register 'sales'", "cannot connect"). Raises a :class:`PolicyError`
    naming the path, the directory looked in and the fix when there is no such file."""
    text = str(data)
    path = Path(text)
    relative = "" if path.is_absolute() else f", relative to the working directory {Path.cwd()}"
    if path.is_file():
        return text, [path]
    if path.is_dir():
        raise PolicyError(
            f"{action}: '{text}' is a directory, not a file. Why: a table is read from one "
            "CSV or Parquet file, or from every file a glob matches. Fix: pass a glob, e.g. "
            f"'{Path(text) / '*.parquet'}' (every Parquet file in it, as one table).")
    if not is_glob(text):
        raise PolicyError(
            f"{action}: file '{text}' does not exist{relative}. Why: a string is read as the "
            "path of a CSV or Parquet file. Fix: check the path (or pass a DataFrame or an "
            "Arrow table).")
    files = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
    if files:
        return text, files
    directory = _directory(text)
    if not directory.is_dir():
        found = f"the directory '{directory}' does not exist{relative}"
    else:
        suffix = path.suffix.lower() or ".csv/.parquet"
        count = sum(1 for p in directory.iterdir() if p.suffix.lower() in (
            (suffix,) if suffix in _SUFFIXES else _SUFFIXES))
        found = (f"the directory '{directory}'{relative} holds {count} {suffix} file(s), none "
                 "of them matching")
    raise PolicyError(
        f"{action}: no file matches the pattern '{text}' ({found}). Why: a glob reads every "
        "file it matches as one table, and it matched none. Fix: check the pattern and the "
        "directory (e.g. 'data/sales*.parquet'; '**' matches subdirectories).")


def reader_sql(path: str, suffix: str) -> str | None:
    """DuckDB's reader of a CSV or Parquet file or glob (None for another suffix). A CSV file
    is read with a header row and every column as text; OFFSET 0 keeps DuckDB from pushing
    the typed view's TRY_CAST into the CSV reader, where it becomes a strict conversion that
    fails on a value that does not convert (an error that depends on the data)."""
    quoted = path.replace("'", "''")
    return {".csv": f"read_csv('{quoted}', header = true, all_varchar = true) OFFSET 0",
            ".parquet": f"read_parquet('{quoted}')"}.get(suffix.lower())


def check_same_columns(con: duckdb.DuckDBPyConnection, action: str, pattern: str,
                       files: list[Path], suffix: str) -> None:
    """Refuse a glob whose files do not all have the first file's columns (names, in order;
    for Parquet their types too): see the module docstring. Reads each file's schema only
    (a CSV file's header and DuckDB's sniffing sample); names no column (a CSV's first line
    may be data)."""
    if len(files) < 2:
        return
    shapes: list[list[tuple[str, str]]] = []
    for file in files:
        reader = reader_sql(str(file), suffix)
        try:
            rows = con.execute(f"DESCRIBE SELECT * FROM {reader}").fetchall()
        except duckdb.Error:  # (its message may quote lines of the file: withheld)
            raise PolicyError(
                f"{action}: DuckDB could not read '{file}', one of the files '{pattern}' "
                "matches. Fix: check that file, or narrow the pattern.") from None
        shape = [(str(r[0]).lower(), str(r[1]) if suffix == ".parquet" else "") for r in rows]
        shapes.append(shape)
        if shape != shapes[0]:
            what = "types" if [c for c, _ in shape] == [c for c, _ in shapes[0]] else "columns"
            raise PolicyError(
                f"{action}: the files '{pattern}' matches do not all have the same {what}: "
                f"'{file}' differs from '{files[0]}'. Why: they are read as one table, and a "
                "file that differs would fail (or be converted) only when a query reads it, "
                "after its charge. Fix: make every file's columns the same, or narrow the "
                "pattern to the files that match.")


def relation_rows(name: str, relation: duckdb.DuckDBPyRelation) -> Any:
    """A DuckDB relation's rows, read once (an Arrow table; a pandas DataFrame without
    pyarrow). Why once: a relation is a query over its own connection, evaluated at every
    read, and may read another database; its rows are fixed at registration like every
    registered table's, and read through the same path (the text check included)."""
    try:
        if importlib.util.find_spec("pyarrow") is not None:
            return relation.to_arrow_table()
        return relation.df()
    except duckdb.Error:  # (its message could quote a value: withheld)
        raise PolicyError(
            f"cannot register '{name}': the DuckDB relation could not be read (is its "
            "connection closed?). Why: a relation is a query, run on the connection that made "
            "it. Fix: register it while that connection is open, or pass its rows: "
            "relation.arrow() or relation.df().") from None


def missing_csv_columns(table: str, path: str, columns: list[str], actual: set[str],
                        header: bool | None) -> str:
    """The message for a CSV file that lacks some of the policy's ``columns``. It names the
    policy's columns (public) and how many columns the file has, never the names DuckDB read
    from the first line (``actual``): without a header row they are the first row's values.
    ``header``: DuckDB's sniffer's verdict on the first line (None: unknown)."""
    missing = [c for c in columns if c not in actual]
    found = [c for c in columns if c in actual]
    seems = (" Its first line looks like data, not a header: the file seems to have no "
             "header row." if header is False else
             " If the file has no header row, its first line (a row of data) was read as the "
             "column names.")
    found_text = f" (it does name {', '.join(found)})" if found else ""
    return (f"table '{table}' is read from the CSV file '{path}', whose first line does not "
            f"name the policy's column(s) {', '.join(missing)}{found_text}; the file has "
            f"{len(actual)} column(s).{seems} Why: privplan reads a CSV file's columns by the "
            "names in its first line (the names it holds are not shown: they may be private "
            "data). Fix: add a header line with the policy's column names (e.g. "
            f"{','.join(columns)}) in the file's column order, or fix the names in the policy.")


def sniffed_header(con: duckdb.DuckDBPyConnection, path: str) -> bool | None:
    """DuckDB's sniffer's verdict on whether the file's first line is a header (the first file
    of a glob); None if it cannot tell."""
    first = path if not is_glob(path) else next(iter(sorted(glob.glob(path, recursive=True))),
                                                 None)
    if first is None:
        return None
    quoted = first.replace("'", "''")
    try:
        rows = con.execute(f"SELECT HasHeader FROM sniff_csv('{quoted}')").fetchall()
    except duckdb.Error:
        return None
    return bool(rows[0][0]) if rows else None
