"""Find, unpack and sniff the published DEIS microdata files before DuckDB reads them.

DuckDB reads the records itself (the staging models call `read_csv`); this module only decides
*how* each file is to be read, and refuses files that are not DEIS files:

- a path may be a file, a glob, a folder (its .csv/.txt/.zip files) or a published ZIP, which is
  unpacked once into a cache folder (keyed by the ZIP's path, size and modification time);
- the encoding (latin-1 or UTF-8) is detected from the bytes unless given;
- a header line is recognised by its column names (DEIS names or the documented alternatives)
  and mapped to the canonical names; without a header the documented column order applies;
- an empty file, a binary file, the wrong separator or the wrong number of columns stops with a
  message that names the file and says what was expected.

dbt reaches this module through the DuckDB function `imr_deis_inspect(path, kind, encoding,
cache_dir)`, registered on the connection by the dbt-duckdb plugin `Plugin` below (or by calling
`register_functions(conn)` from another plugin). The same inspection runs from the command line:
`python -m infant_mortality.deis_files deaths PATH`.
"""

from __future__ import annotations

import argparse
import codecs
import glob
import hashlib
import json
import os
import sys
import unicodedata
import uuid
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from dbt.adapters.duckdb.plugins import BasePlugin

DELIMITER = ";"

# The documented 27-column layout of DEFUNCIONES_FUENTE_DEIS_* (docs/deis-layouts.md).
DEATHS_COLUMNS = (
    "ANO_DEF", "FECHA_DEF", "GLOSA_SEXO", "EDAD_TIPO", "EDAD_CANT",
    "CODIGO_COMUNA_RESIDENCIA", "GLOSA_COMUNA_RESIDENCIA", "GLOSA_REG_RES",
    "DIAG1", "CAPITULO_DIAG1", "GLOSA_CAPITULO_DIAG1", "CODIGO_GRUPO_DIAG1", "GLOSA_GRUPO_DIAG1",
    "CODIGO_CATEGORIA_DIAG1", "GLOSA_CATEGORIA_DIAG1", "CODIGO_SUBCATEGORIA_DIAG1",
    "GLOSA_SUBCATEGORIA_DIAG1",
    "DIAG2", "CAPITULO_DIAG2", "GLOSA_CAPITULO_DIAG2", "CODIGO_GRUPO_DIAG2", "GLOSA_GRUPO_DIAG2",
    "CODIGO_CATEGORIA_DIAG2", "GLOSA_CATEGORIA_DIAG2", "CODIGO_SUBCATEGORIA_DIAG2",
    "GLOSA_SUBCATEGORIA_DIAG2",
    "LUGAR_DEFUNCION",
)
# The columns the staging model uses; a header must name all of them.
DEATHS_REQUIRED = (
    "ANO_DEF", "FECHA_DEF", "GLOSA_SEXO", "EDAD_TIPO", "EDAD_CANT", "CODIGO_COMUNA_RESIDENCIA",
    "GLOSA_COMUNA_RESIDENCIA", "GLOSA_REG_RES", "DIAG1", "DIAG2", "LUGAR_DEFUNCION",
)
DEATHS_ALIASES = {
    "AÑO": "ANO_DEF", "ANO": "ANO_DEF", "ANIO": "ANO_DEF", "AÑO_DEF": "ANO_DEF",
    "ANIO_DEF": "ANO_DEF", "FECHA_DEFUNCION": "FECHA_DEF", "SEXO_NOMBRE": "GLOSA_SEXO",
    "SEXO": "GLOSA_SEXO", "COD_COMUNA": "CODIGO_COMUNA_RESIDENCIA",
    "COMUNA": "GLOSA_COMUNA_RESIDENCIA", "NOMBRE_COMUNA": "GLOSA_COMUNA_RESIDENCIA",
    "NOMBRE_REGION": "GLOSA_REG_RES", "REGION": "GLOSA_REG_RES",
}

# The births layout we accept (docs/deis-layouts.md); without a header, exactly this order.
BIRTHS_COLUMNS = (
    "ANO_NAC", "MES_NAC", "DIA_NAC", "SEXO", "PESO", "TALLA", "SEMANAS", "EDAD_M",
    "COMUNA", "GLOSA_COMUNA", "REGION",
)
BIRTHS_REQUIRED = BIRTHS_COLUMNS
BIRTHS_ALIASES = {
    "AÑO_NAC": "ANO_NAC", "ANIO_NAC": "ANO_NAC", "AÑO": "ANO_NAC", "ANO": "ANO_NAC",
    "MES": "MES_NAC", "DIA": "DIA_NAC", "DÍA_NAC": "DIA_NAC", "SEXO_RN": "SEXO",
    "PESO_RN": "PESO", "TALLA_RN": "TALLA", "SEMANAS_GESTACION": "SEMANAS",
    "EDAD_MADRE": "EDAD_M", "COD_COMUNA": "COMUNA", "CODIGO_COMUNA": "COMUNA",
    "COMUNA_RESIDENCIA": "COMUNA", "CODIGO_COMUNA_RESIDENCIA": "COMUNA",
    "NOMBRE_COMUNA": "GLOSA_COMUNA", "GLOSA_COMUNA_RESIDENCIA": "GLOSA_COMUNA",
    "COD_REGION": "REGION", "CODIGO_REGION": "REGION", "REGION_RESIDENCIA": "REGION",
}

LAYOUTS = {
    "deaths": (DEATHS_COLUMNS, DEATHS_REQUIRED, DEATHS_ALIASES),
    "births": (BIRTHS_COLUMNS, BIRTHS_REQUIRED, BIRTHS_ALIASES),
}
ENCODINGS = {"latin-1": "latin-1", "latin1": "latin-1", "iso-8859-1": "latin-1",
             "utf-8": "utf-8", "utf8": "utf-8"}
TEXT_SUFFIXES = (".csv", ".txt")
SNIFF_LINES = 50            # lines whose column count is checked before DuckDB reads the file
CHUNK = 16 * 1024 * 1024    # bytes per read when detecting the encoding


class DeisFileError(ValueError):
    """A path that does not hold DEIS files in an accepted layout."""


@dataclass(frozen=True)
class DeisFile:
    """How DuckDB should read one file.

    path: the CSV to read (absolute; inside the cache for a ZIP member). source_file: the name
    reported in the staging rows (the path as the user gave it; `archive.zip/member.csv` for a ZIP
    member). columns: one name per column of the file, canonical or `extra_<n>` for columns the
    staging does not use.
    """

    path: str
    source_file: str
    encoding: str
    header: bool
    columns: tuple[str, ...]


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "infant_mortality" / "deis"


def _normalise_name(name: str) -> str:
    return unicodedata.normalize("NFC", name.strip().strip('"').lstrip("\ufeff").strip()).upper()


def expand_paths(spec: str) -> list[str]:
    """A file, a folder (its .csv/.txt/.zip files) or a glob, in sorted order."""
    if any(ch in spec for ch in "*?["):
        paths = sorted(glob.glob(spec))
    elif os.path.isdir(spec):
        paths = sorted(str(p) for p in Path(spec).iterdir()
                       if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES + (".zip",))
    else:
        paths = [spec]
    if not paths:
        raise DeisFileError(f"no DEIS file matches {spec!r}")
    for path in paths:
        if not os.path.isfile(path):
            raise DeisFileError(f"{path}: no such file")
    return paths


def unpack_zip(zip_path: str, cache_dir: str | os.PathLike | None = None) -> list[tuple[str, Path]]:
    """Extract the CSV members of a published ZIP once; return (member name, extracted path)."""
    stat = os.stat(zip_path)
    key = hashlib.sha1(f"{os.path.abspath(zip_path)}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    folder = Path(cache_dir or default_cache_dir()) / f"{Path(zip_path).stem}-{key.hexdigest()[:12]}"
    try:
        archive = zipfile.ZipFile(zip_path)
    except zipfile.BadZipFile as error:
        raise DeisFileError(f"{zip_path}: not a readable ZIP archive ({error})") from None
    with archive:
        members = [m for m in archive.infolist()
                   if not m.is_dir() and not m.filename.startswith("__MACOSX")
                   and m.filename.lower().endswith(TEXT_SUFFIXES)]
        if not members:
            raise DeisFileError(f"{zip_path}: the ZIP holds no .csv or .txt file")
        extracted = []
        for member in members:
            target = folder / member.filename
            if not target.exists() or target.stat().st_size != member.file_size:
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_name(f".{target.name}.{uuid.uuid4().hex}.part")
                with archive.open(member) as source, open(partial, "wb") as sink:
                    while block := source.read(CHUNK):
                        sink.write(block)
                os.replace(partial, target)  # atomic: concurrent readers never see half a file
            extracted.append((member.filename, target))
    return extracted


def detect_encoding(path: str | os.PathLike) -> str:
    """'utf-8' if the bytes decode as UTF-8, else 'latin-1' (which decodes any byte).

    Stops at the first chunk that settles it: a decoding error means latin-1; a chunk that
    decodes and holds multi-byte characters means UTF-8 (latin-1 Spanish text practically never
    forms valid UTF-8 sequences). A pure-ASCII file is UTF-8 (the two agree on it).
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError:
                return "latin-1"
            if not chunk.isascii():
                return "utf-8"
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return "latin-1"
    return "utf-8"


def _first_lines(path: str, encoding: str) -> list[str]:
    lines = []
    with open(path, encoding=encoding, newline="") as handle:
        for line in handle:
            lines.append(line.rstrip("\r\n"))
            if len(lines) >= SNIFF_LINES + 1:
                break
    return lines


def _map_header(names: list[str], kind: str, shown: str) -> tuple[str, ...]:
    layout, required, aliases = LAYOUTS[kind]
    columns, seen = [], set()
    for position, raw in enumerate(names, start=1):
        name = _normalise_name(raw)
        canonical = name if name in layout else aliases.get(name)
        if canonical is None or canonical in seen:
            canonical = f"extra_{position}"
        seen.add(canonical)
        columns.append(canonical)
    missing = [name for name in required if name not in seen]
    if missing:
        raise DeisFileError(
            f"{shown}: the header does not name the DEIS {kind} column(s) {', '.join(missing)} "
            f"(header found: {';'.join(names)}); see docs/deis-layouts.md for the accepted names")
    return tuple(columns)


def _looks_like_header(fields: list[str], kind: str) -> bool:
    layout, _, aliases = LAYOUTS[kind]
    names = {_normalise_name(field) for field in fields}
    return bool(names & (set(layout) | set(aliases)))


def sniff_file(path: str, kind: str, encoding: str = "auto", source_file: str | None = None) -> DeisFile:
    """Decide how to read one plain CSV, or raise DeisFileError saying what is wrong."""
    layout = LAYOUTS[kind][0]
    shown = source_file or path
    expected = (f"a ';'-separated DEIS {kind} file with {len(layout)} columns"
                if kind == "deaths" else
                f"a ';'-separated DEIS births file: a header naming {', '.join(BIRTHS_REQUIRED)}, "
                f"or no header and exactly these {len(layout)} columns in that order")
    if os.path.getsize(path) == 0:
        raise DeisFileError(f"{shown}: the file is empty; expected {expected}")
    with open(path, "rb") as handle:
        head = handle.read(65536)
    if head.startswith(b"PK\x03\x04"):
        raise DeisFileError(f"{shown}: a ZIP archive inside a ZIP is not read; expected {expected}")
    if b"\x00" in head:
        raise DeisFileError(f"{shown}: binary content (NUL bytes), not a text file; expected {expected}")
    encoding = detect_encoding(path) if encoding in (None, "", "auto") else ENCODINGS.get(encoding.lower())
    if encoding is None:
        raise DeisFileError(f"{shown}: unsupported encoding; use auto, latin-1 or utf-8")
    try:
        lines = _first_lines(path, encoding)
    except UnicodeDecodeError as error:
        raise DeisFileError(f"{shown}: not {encoding} text ({error}); set deis_encoding to 'auto' or "
                            f"the file's encoding") from None
    first = lines[0].lstrip("\ufeff").split(DELIMITER)
    header = _looks_like_header(first, kind)
    if (kind == "deaths" or not header) and len(first) != len(layout):
        hint = ""
        if len(first) == 1 and any(sep in lines[0] for sep in ",\t|"):
            hint = " (the separator looks like ',' or a tab, not ';')"
        raise DeisFileError(f"{shown}: line 1 has {len(first)} column(s){hint}; expected {expected}")
    columns = _map_header(first, kind, shown) if header else layout
    for number, line in enumerate(lines[1:], start=2):
        count = len(line.split(DELIMITER))
        if line and count != len(columns):
            raise DeisFileError(f"{shown}: line {number} has {count} column(s), line 1 has "
                                f"{len(columns)}; expected {expected}")
    return DeisFile(path=os.path.abspath(path), source_file=shown, encoding=encoding,
                    header=header, columns=tuple(columns))


def inspect(spec: str, kind: str, encoding: str = "auto",
            cache_dir: str | os.PathLike | None = None) -> list[DeisFile]:
    """All the files named by `spec` (file, folder, glob or ZIP), each sniffed for `kind`."""
    if kind not in LAYOUTS:
        raise DeisFileError(f"unknown DEIS file kind {kind!r}; expected one of {sorted(LAYOUTS)}")
    files = []
    for path in expand_paths(spec):
        if zipfile.is_zipfile(path):
            for member, extracted in unpack_zip(path, cache_dir):
                files.append(sniff_file(str(extracted), kind, encoding, source_file=f"{path}/{member}"))
        else:
            files.append(sniff_file(path, kind, encoding))
    return files


def inspect_json(spec: str, kind: str, encoding: str = "auto", cache_dir: str | None = None) -> str:
    """`inspect` as JSON for SQL callers: {"files": [...]} or {"error": "..."}."""
    try:
        files = inspect(spec, kind, encoding or "auto", cache_dir or None)
    except (DeisFileError, OSError) as error:
        return json.dumps({"error": f"DEIS {kind} input: {error}"}, ensure_ascii=False)
    return json.dumps({"files": [asdict(f) for f in files]}, ensure_ascii=False)


def register_functions(conn) -> None:
    """Create `imr_deis_inspect(path, kind, encoding, cache_dir) -> VARCHAR` (JSON) on a connection."""
    conn.create_function(
        "imr_deis_inspect", inspect_json, ["VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR"], "VARCHAR",
        side_effects=True,  # unpacks ZIPs into the cache; never constant-fold or cache the call
    )


class Plugin(BasePlugin):
    """dbt-duckdb plugin: `plugins: [{module: infant_mortality.deis_files}]` in the profile."""

    def configure_connection(self, conn):
        register_functions(conn)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m infant_mortality.deis_files",
        description="Check DEIS microdata files (unpacking a published ZIP into the cache) and "
                    "print how the staging models will read them, as JSON.")
    parser.add_argument("kind", choices=sorted(LAYOUTS))
    parser.add_argument("path", help="a file, a folder, a glob or a published ZIP")
    parser.add_argument("--encoding", default="auto", help="auto (default), latin-1 or utf-8")
    parser.add_argument("--cache-dir", default=None,
                        help=f"where ZIPs are unpacked (default {default_cache_dir()})")
    args = parser.parse_args(argv)
    result = json.loads(inspect_json(args.path, args.kind, args.encoding, args.cache_dir))
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
