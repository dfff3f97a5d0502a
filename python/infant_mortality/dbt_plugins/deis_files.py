"""Find, unpack and sniff the published DEIS microdata files before DuckDB reads them.

DuckDB reads the records itself (the staging models call `read_csv`); this module only decides
*how* each file is to be read, and refuses inputs that cannot be read safely or are not DEIS files:

- a path may be a file, a folder or a published ZIP, taken literally whatever characters it
  holds, or a glob (only when nothing has that name and it holds `*` or `?`: is_glob); ZIPs are
  cached under the SHA-256 of their bytes. Every entry is listed (the manifest
  behind `marts.audit_input_files`); `.csv`, `.txt`, `.csv.gz`/`.txt.gz` and `.zip` are read, an
  entry with any other extension stops the build (a hidden file or a sub-folder is listed and
  not read);
- a ZIP member is confined to the cache folder (a name with `..` or an absolute path is refused),
  its first bytes are sniffed before it is extracted, and it is inflated as a stream with a
  bound on its size and compression ratio (a ZIP bomb stops, it never fills the disk); a
  deflated member is then kept compressed, its deflate stream copied into a gzip file that
  DuckDB reads (no uncompressed copy on disk), any other member is written out as it inflates;
- the encoding (latin-1 or UTF-8) is detected from the bytes unless given; the layout (the
  official-figures deaths file, the older per-year deaths layout, the per-year births bases or
  the compact births layout of docs/using/deis-layouts.md) is recognised from the header (or, without
  one, from the number of columns);
- every file is read once more in full to count its lines, find its blank lines (DuckDB skips
  them; the staging models put them back in the line numbers) and checksum it; two entries with
  identical content stop the build (the same records would be counted twice).

dbt reaches this module through the DuckDB function `imr_deis_inspect(path, kind, encoding,
cache_dir, options)`, registered on the connection by the dbt-duckdb plugin `Plugin` below (or
by calling `register_functions(conn)` from another plugin). The same inspection runs from the
command line: `python -m infant_mortality.deis_files deaths PATH`.
"""

from __future__ import annotations

import argparse
import codecs
import glob
import hashlib
import json
import os
import re
import struct
import sys
import threading
import unicodedata
import uuid
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np
from isal import igzip, isal_zlib

from dbt.adapters.duckdb.plugins import BasePlugin

DELIMITER = ";"

# The documented 27-column layout of DEFUNCIONES_FUENTE_DEIS_* (docs/using/deis-layouts.md).
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
DEATHS_ALIASES = {
    "AÑO": "ANO_DEF", "ANO": "ANO_DEF", "ANIO": "ANO_DEF", "AÑO_DEF": "ANO_DEF",
    "ANIO_DEF": "ANO_DEF", "FECHA_DEFUNCION": "FECHA_DEF", "SEXO_NOMBRE": "GLOSA_SEXO",
    "SEXO": "GLOSA_SEXO", "COD_COMUNA": "CODIGO_COMUNA_RESIDENCIA",
    "COMUNA": "GLOSA_COMUNA_RESIDENCIA", "NOMBRE_COMUNA": "GLOSA_COMUNA_RESIDENCIA",
    "NOMBRE_REGION": "GLOSA_REG_RES", "REGION": "GLOSA_REG_RES",
}
# The older per-year deaths layout (read by header only; docs/using/deis-layouts.md). Here COMUNA is
# the commune *code* of residence and SEXO a code (1, 2, 9).
DEATHS_PER_YEAR_NAMES = {
    "ANO_DEF": "ANO_DEF", "AÑO_DEF": "ANO_DEF", "MES_DEF": "MES_DEF", "DIA_DEF": "DIA_DEF",
    "EDAD_TIPO": "EDAD_TIPO", "EDAD_CANT": "EDAD_CANT", "COMUNA": "CODIGO_COMUNA_RESIDENCIA",
    "SEXO": "GLOSA_SEXO", "DIAG1": "DIAG1", "DIAG2": "DIAG2", "LOCAL_DEF": "LUGAR_DEFUNCION",
    "REG_RES": "REG_RES",
}

# Births: the compact 11-column layout (headerless: exactly this order) and the DEIS per-year
# bases (33 columns; headerless: this order, as read by public scripts for 2016 and 2017).
BIRTHS_COLUMNS = (
    "ANO_NAC", "MES_NAC", "DIA_NAC", "SEXO", "PESO", "TALLA", "SEMANAS", "EDAD_M",
    "COMUNA", "GLOSA_COMUNA", "REGION",
)
BIRTHS_PER_YEAR_COLUMNS = (
    "SEXO", "DIA_NAC", "MES_NAC", "ANO_NAC", "TIPO_PARTO", "PESO", "SEMANAS", "TALLA",
    "ATENC_PART", "LOCAL_PART", "EDAD_P", "CURSO_P", "NIVEL_P", "ACTIV_P", "OCUPA_P", "CATEG_P",
    "EDAD_M", "EST_CIVI_M", "CURSO_M", "NIVEL_M", "ACTIV_M", "OCUPA_M", "CATEG_M", "HIJ_VIVOS",
    "HIJ_FALL", "HIJ_MORT", "HIJ_TOTAL", "COMUNA", "URBA_RURAL", "REG_RES", "SERV_RES", "ESTAB",
    "NAC_MA",
)
# Counting needs only these two; everything else is optional.
BIRTHS_REQUIRED = ("ANO_NAC", "COMUNA")
BIRTHS_ALIASES = {
    "AÑO_NAC": "ANO_NAC", "ANIO_NAC": "ANO_NAC", "AÑO": "ANO_NAC", "ANO": "ANO_NAC",
    "MES": "MES_NAC", "DIA": "DIA_NAC", "DÍA_NAC": "DIA_NAC", "SEXO_RN": "SEXO",
    "PESO_RN": "PESO", "TALLA_RN": "TALLA", "SEMANAS_GESTACION": "SEMANAS",
    "EDAD_MADRE": "EDAD_M", "COD_COMUNA": "COMUNA", "CODIGO_COMUNA": "COMUNA",
    "COMUNA_RESIDENCIA": "COMUNA", "CODIGO_COMUNA_RESIDENCIA": "COMUNA",
    "NOMBRE_COMUNA": "GLOSA_COMUNA", "GLOSA_COMUNA_RESIDENCIA": "GLOSA_COMUNA",
    "COD_REGION": "REGION", "CODIGO_REGION": "REGION", "REGION_RESIDENCIA": "REGION",
    "REG_RES": "REGION",
}
BIRTHS_CANONICAL = frozenset(BIRTHS_COLUMNS)
# Names only the per-year bases carry: a header with one of them is a per-year base.
BIRTHS_PER_YEAR_MARKERS = frozenset(BIRTHS_PER_YEAR_COLUMNS) - BIRTHS_CANONICAL - {"REG_RES"}

# Layout names, as shown in marts.audit_input_files and stg_deis__*.source_layout.
DEATHS_OFFICIAL = "deaths_official_figures"
DEATHS_PER_YEAR = "deaths_per_year"
BIRTHS_PER_YEAR = "births_per_year_base"
BIRTHS_COMPACT = "births_compact"
# Layouts whose commune codes are those in force in the record's year (the crosswalk applies);
# the official-figures deaths file is recoded to the current codes for every year.
HISTORICAL_CODE_LAYOUTS = (DEATHS_PER_YEAR, BIRTHS_PER_YEAR, BIRTHS_COMPACT)

KINDS = ("deaths", "births")
ENCODINGS = {"latin-1": "latin-1", "latin1": "latin-1", "iso-8859-1": "latin-1",
             "utf-8": "utf-8", "utf8": "utf-8"}
TEXT_SUFFIXES = (".csv", ".txt")
GZIP_SUFFIXES = (".csv.gz", ".txt.gz")
READ_SUFFIXES = TEXT_SUFFIXES + GZIP_SUFFIXES + (".zip",)
SNIFF_LINES = 50            # lines whose column count is checked before DuckDB reads the file
SNIFF_BYTES = 65536         # bytes of a ZIP member looked at before it is extracted
# Bytes per read (and per inflated block). 1 MB blocks stay in the allocator's memory; 16 MB ones
# were fresh pages each time (scale 8: 7.2 s to inspect both kinds, against 7.8 s with 16 MB).
CHUNK = 1024 * 1024
# A file written by imr-generate-deis: its name says so, and the warehouse says so (count_basis).
GENERATED_PREFIX = "synthetic_deis_"
SERIES_PATTERN = re.compile(r"serie_?nacimientos", re.IGNORECASE)


@dataclass(frozen=True)
class Limits:
    """Bounds on what a ZIP may unpack to (dbt vars deis_zip_max_member_bytes, deis_zip_max_ratio)
    and on how far a .gz input may expand (dbt var deis_gzip_max_ratio)."""

    max_member_bytes: int = 20_000_000_000
    max_ratio: float = 200.0
    gzip_max_ratio: float = 200.0


class DeisFileError(ValueError):
    """A path that does not hold DEIS files in an accepted layout, or that is unsafe to read."""


class EmptyDeisFile(DeisFileError):
    """A DEIS file with no records (only a header or blank lines): var deis_empty_files decides."""


@dataclass(frozen=True)
class DeisFile:
    """How DuckDB should read one file, and what the file is.

    path: the file to read (absolute; inside the cache for a ZIP member). source_file: the name
    reported in the staging rows (the path as the user gave it; `archive.zip/member.csv` for a ZIP
    member). columns: one name per column of the file, canonical or `extra_<n>` for columns the
    staging does not use. lines: lines in the file (the last one may lack its line end);
    blank_lines: their numbers (DuckDB skips them); records_expected: lines that must become
    records (lines - header - blank lines).
    """

    path: str
    source_file: str
    encoding: str
    header: bool
    columns: tuple[str, ...]
    layout: str
    generated: bool
    size_bytes: int
    sha256: str
    lines: int
    blank_lines: tuple[int, ...]
    records_expected: int
    compression: str = "none"


@dataclass(frozen=True)
class Entry:
    """One directory entry or ZIP member seen while expanding a path (marts.audit_input_files)."""

    entry: str
    entry_type: str          # file | zip_archive | zip_member | folder
    action: str              # read | not read: <why>
    size_bytes: int | None = None
    sha256: str | None = None


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "infant_mortality" / "deis"


def _normalise_name(name: str) -> str:
    return unicodedata.normalize("NFC", name.strip().strip('"').lstrip("\ufeff").strip()).upper()


def _suffix_action(name: str) -> str | None:
    """None when a file of this name is read; else why it is not (hidden files only)."""
    base = PurePosixPath(name).name
    if base.startswith("."):
        return "not read: hidden file"
    if base.lower().endswith(READ_SUFFIXES):
        return None
    raise DeisFileError(
        f"{name}: unknown file type; the DEIS inputs are read from {', '.join(READ_SUFFIXES)} files "
        f"(move this file out of the folder, or point the path at the DEIS files only)")


def is_glob(spec: str) -> bool:
    """Whether `spec` is read as a glob: only when no file or folder has that very name and it
    holds `*` or `?` (the documented glob form). `[`, `]`, `{` are ordinary characters of a name."""
    return not os.path.exists(spec) and any(ch in spec for ch in "*?")


def _candidates(spec: str) -> list[str]:
    """The entries a path names, taken literally (a file, or a folder's entries) unless a glob."""
    if is_glob(spec):
        return sorted(glob.glob(glob.escape(spec).replace("[*]", "*").replace("[?]", "?")))
    if os.path.isdir(spec):
        return sorted(str(p) for p in Path(spec).iterdir())
    return [spec]


def expand_paths(spec: str, entries: list[Entry] | None = None) -> list[str]:
    """The files to read named by a file, a folder or a glob (is_glob), in sorted order.

    Every entry seen is appended to `entries` (folders and hidden files as not read); an entry
    with an unknown extension stops with DeisFileError naming it.
    """
    entries = [] if entries is None else entries
    candidates = _candidates(spec)
    paths = []
    for path in candidates:
        if os.path.isdir(path):
            entries.append(Entry(path, "folder", "not read: sub-folders are not searched"))
            continue
        if not os.path.isfile(path):
            raise DeisFileError(f"{path}: no such file")
        why = _suffix_action(path)
        if why:
            entries.append(Entry(path, "file", why, os.path.getsize(path)))
            continue
        paths.append(path)
    if not paths:
        raise DeisFileError(f"no DEIS file matches {spec!r}")
    return paths


def _safe_member_path(folder: Path, name: str, zip_path: str) -> Path:
    """Where a ZIP member is extracted: inside `folder`, or DeisFileError (zip slip)."""
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if (not parts or name.startswith(("/", "\\")) or ".." in parts or re.match(r"^[A-Za-z]:", name)):
        raise DeisFileError(
            f"{zip_path}: member {name!r} would be written outside the cache folder (zip slip); "
            f"the archive is refused")
    target = (folder / Path(*parts)).resolve()
    if not target.is_relative_to(folder.resolve()):
        raise DeisFileError(
            f"{zip_path}: member {name!r} would be written outside the cache folder (zip slip); "
            f"the archive is refused")
    return target


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def unpack_zip(zip_path: str, cache_dir: str | os.PathLike | None = None, limits: Limits = Limits(),
               entries: list[Entry] | None = None,
               zip_sha256: str | None = None) -> list[tuple[str, Path, tuple | None]]:
    """Extract the text members of a published ZIP once; return (member name, extracted path,
    scan) with scan the LineScan result of the bytes written, or None when the member was
    already in the cache (not unpacked again).

    Every member is checked before anything is written: its name must stay inside the cache
    folder, its declared size and compression ratio must be within `limits`, its extension must
    be a text one, and its first bytes must be text. Extraction streams and stops as soon as a
    member writes more bytes than declared or than the bound.

    The cache folder is keyed by the sha256 of the ZIP's bytes (`zip_sha256`, computed when not
    given), never by its name, size or time: a ZIP replaced by another of the same size and time
    is unpacked anew, not read from the copy of the old one.
    """
    entries = [] if entries is None else entries
    digest = zip_sha256 or file_sha256(zip_path)
    folder = Path(cache_dir or default_cache_dir()) / f"{Path(zip_path).stem}-{digest[:32]}"
    try:
        archive = zipfile.ZipFile(zip_path)
    except zipfile.BadZipFile as error:
        raise DeisFileError(f"{zip_path}: not a readable ZIP archive ({error})") from None
    with archive:
        members = []
        for member in archive.infolist():
            shown = f"{zip_path}/{member.filename}"
            _safe_member_path(folder, member.filename, zip_path)
            if member.is_dir():
                entries.append(Entry(shown, "zip_member", "not read: folder inside the ZIP"))
                continue
            if member.filename.startswith("__MACOSX/"):
                entries.append(Entry(shown, "zip_member", "not read: macOS metadata", member.file_size))
                continue
            if member.filename.lower().endswith(".zip") or member.filename.lower().endswith(GZIP_SUFFIXES):
                raise DeisFileError(f"{shown}: an archive inside a ZIP is not read; unpack it first")
            why = _suffix_action(shown)
            if why:
                entries.append(Entry(shown, "zip_member", why, member.file_size))
                continue
            if member.file_size > limits.max_member_bytes:
                raise DeisFileError(
                    f"{shown}: declares {member.file_size:,} bytes unpacked, above the bound of "
                    f"{limits.max_member_bytes:,} (dbt var deis_zip_max_member_bytes); refused")
            ratio = member.file_size / max(member.compress_size, 1)
            if ratio > limits.max_ratio:
                raise DeisFileError(
                    f"{shown}: compressed {ratio:,.0f} to 1, above the bound of {limits.max_ratio:g} "
                    f"(dbt var deis_zip_max_ratio): not a DEIS text file (a ZIP bomb?); refused")
            members.append(member)
        if not members:
            raise DeisFileError(f"{zip_path}: the ZIP holds no .csv or .txt file")
        extracted = []
        for member in members:
            shown = f"{zip_path}/{member.filename}"
            target = _safe_member_path(folder, member.filename, zip_path)
            # A deflated member (what ZIP tools write) is kept compressed: its deflate stream is
            # copied as it is into a gzip file, which DuckDB reads directly. No uncompressed copy
            # is written: the deaths ZIP at scale 8 no longer puts 7 GB on disk, and writing it
            # cost as much time as inflating it.
            as_gzip = member.compress_type == zipfile.ZIP_DEFLATED
            if as_gzip:
                target = target.with_name(target.name + ".gz")
            stored_size = member.compress_size + GZIP_FRAME_BYTES if as_gzip else member.file_size
            scanned = None
            if not target.exists() or target.stat().st_size != stored_size:
                bound = min(member.file_size, limits.max_member_bytes)
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_name(f".{target.name}.{uuid.uuid4().hex}.part")
                scan = LineScan()   # lines and checksum counted as the bytes go by
                try:
                    # Inflated once as a stream, within the bounds, to be checked and scanned.
                    with open(partial, "wb") as sink:
                        if as_gzip:
                            _copy_deflated_member_as_gzip(zip_path, member, sink, scan, bound)
                        else:
                            _extract_member(archive, member, sink, scan, bound, shown)
                    scanned = scan.result()
                    os.replace(partial, target)  # atomic: concurrent readers never see half a file
                finally:
                    scan.close()
                    if partial.exists():
                        partial.unlink()
            extracted.append((member.filename, target, scanned))
    return extracted


class _MemberCheck:
    """The checks on the inflated bytes of a ZIP member as they go by: the first SNIFF_BYTES
    must be text (checked before anything after them is written), the whole must stay within
    `bound` bytes; every byte is fed to the line scan."""

    def __init__(self, scan: LineScan, bound: int, shown: str):
        self.scan, self.bound, self.shown = scan, bound, shown
        self.head, self.size = b"", 0

    def feed(self, block: bytes) -> None:
        if len(self.head) < SNIFF_BYTES:
            self.head += block[:SNIFF_BYTES - len(self.head)]
            if len(self.head) == SNIFF_BYTES:
                _check_text_head(self.head, self.shown)
        self.size += len(block)
        if self.size > self.bound:
            raise DeisFileError(f"{self.shown}: unpacks to more than the {self.bound:,} bytes it declares "
                                f"or the bound allows; refused")
        self.scan.update(block)

    def finish(self) -> None:
        if len(self.head) < SNIFF_BYTES:   # a member shorter than the sniffed part
            _check_text_head(self.head, self.shown)


def _extract_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, sink, scan: LineScan, bound: int,
                    shown: str) -> None:
    """Write a member that is not deflated (stored, or another method) as it inflates, checked."""
    check = _MemberCheck(scan, bound, shown)
    with archive.open(member) as source:
        while block := source.read(CHUNK):
            check.feed(block)
            sink.write(block)
    check.finish()


# A gzip member around a raw deflate stream: 10-byte header (no name, no time), 8-byte trailer.
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
GZIP_FRAME_BYTES = len(GZIP_HEADER) + 8


def _copy_deflated_member_as_gzip(zip_path: str, member: zipfile.ZipInfo, sink, scan: LineScan,
                                  bound: int) -> None:
    """Write a deflated ZIP member as a gzip file in one pass over its compressed bytes: gzip's
    header, the member's deflate stream copied unchanged (both formats hold a raw deflate
    stream), then its CRC-32 and size. Each compressed block is inflated before it is copied, to
    be checked (text, within the bound) and scanned, and the CRC-32 and size the ZIP declares are
    verified at the end, as zipfile would. ISA-L inflates and checksums twice as fast as zlib:
    the deaths member at scale 8 (7 GB) took 11 s of zlib before its staging could start."""
    shown = f"{zip_path}/{member.filename}"
    if member.flag_bits & 0x1:
        raise DeisFileError(f"{shown}: the member is encrypted; unpack it with its password first")
    check = _MemberCheck(scan, bound, shown)
    inflater, crc = isal_zlib.decompressobj(-15), 0   # -15: a raw deflate stream, no header
    damaged = DeisFileError(f"{shown}: damaged ZIP member (its deflate stream, size or CRC-32 does not "
                            f"match what the archive declares)")

    def take(inflated: bytes) -> None:
        nonlocal crc
        crc = isal_zlib.crc32(inflated, crc)
        check.feed(inflated)

    with open(zip_path, "rb") as archive:
        archive.seek(member.header_offset)
        local = archive.read(30)   # the local file header; its name and extra fields follow
        if local[:4] != b"PK\x03\x04":
            raise DeisFileError(f"{shown}: damaged ZIP (no local header)")
        name_length, extra_length = struct.unpack("<HH", local[26:30])
        archive.seek(member.header_offset + 30 + name_length + extra_length)
        sink.write(GZIP_HEADER)
        remaining = member.compress_size
        while remaining:
            block = archive.read(min(remaining, CHUNK))
            if not block:
                raise DeisFileError(f"{shown}: the ZIP ends inside the member")
            remaining -= len(block)
            pending = block
            while pending:
                try:
                    inflated = inflater.decompress(pending, CHUNK)   # at most CHUNK bytes out per call
                except isal_zlib.error:
                    raise damaged from None
                if not inflated and len(inflater.unconsumed_tail) == len(pending):
                    raise damaged   # no progress: not a deflate stream
                take(inflated)
                pending = inflater.unconsumed_tail
            if inflater.eof and (inflater.unused_data or remaining):
                raise damaged   # bytes after the end of the deflate stream
            sink.write(block)
        take(inflater.flush())
    check.finish()
    if not inflater.eof or check.size != member.file_size or crc != member.CRC:
        raise damaged
    sink.write(struct.pack("<II", member.CRC, member.file_size & 0xFFFFFFFF))


def excerpt(text: str, length: int = 120) -> str:
    """A short quotation of a text for a message: a long input is quoted, never dumped."""
    return text if len(text) <= length else f"{text[:length]}... ({len(text) - length:,} more characters)"


def utf16_kind(head: bytes) -> str | None:
    """'UTF-16 LE' / 'UTF-16 BE' when the first bytes of a file are UTF-16 text (a byte-order mark
    FF FE / FE FF, or text whose every other byte is NUL, as UTF-16 writes ASCII), else None."""
    if head.startswith(b"\xff\xfe"):
        return "UTF-16 LE"
    if head.startswith(b"\xfe\xff"):
        return "UTF-16 BE"
    sample = head[:4096]
    if len(sample) >= 4 and b"\x00" in sample:
        odd, even = sample[1::2], sample[0::2]
        if odd.count(0) >= 0.9 * len(odd) and even.count(0) == 0:
            return "UTF-16 LE"
        if even.count(0) >= 0.9 * len(even) and odd.count(0) == 0:
            return "UTF-16 BE"
    return None


def _check_text_head(head: bytes, shown: str) -> None:
    if head.startswith(b"PK\x03\x04"):
        raise DeisFileError(f"{shown}: a ZIP archive where a DEIS text file was expected")
    if kind := utf16_kind(head):
        raise DeisFileError(f"{shown}: the file is {kind} encoded (byte-order mark or a NUL byte beside every "
                            f"character), not latin-1 or UTF-8; save it as UTF-8")
    if b"\x00" in head:
        raise DeisFileError(f"{shown}: binary content (NUL bytes), not a DEIS text file")


# A .gz input may always expand to this many bytes, whatever its ratio: a small file that is
# very repetitive (a test fixture, a one-commune extract) is no threat.
GZIP_BOUND_FLOOR = 1 << 20


class GzipBombError(DeisFileError):
    """A .gz input that expands beyond deis_gzip_max_ratio times its compressed size."""


class _BoundedReader:
    """A decompressing reader that refuses to give more than `limit` bytes: a .gz file that
    expands without end (2 GiB of blank lines in 2 MB) stops within a second instead of being
    read, scanned and listed line by line for many minutes."""

    def __init__(self, handle, limit: int, message: str):
        self._handle, self._limit, self._message, self._read = handle, limit, message, 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = self._limit + 1 - self._read
        data = self._handle.read(min(size, self._limit + 1 - self._read) if self._read <= self._limit else 1)
        self._read += len(data)
        if self._read > self._limit:
            raise GzipBombError(self._message)
        return data

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _open_bytes(path: str, compression: str, max_ratio: float | None = None, shown: str | None = None):
    """The bytes of a file, decompressed when gzip. With `max_ratio`, a gzip file may give at most
    max(max_ratio x its compressed size, GZIP_BOUND_FLOOR) bytes, or GzipBombError names it."""
    if compression != "gzip":
        return open(path, "rb")
    handle = igzip.open(path, "rb")
    if max_ratio is None:
        return handle
    compressed = os.path.getsize(path)
    limit = max(int(max_ratio * compressed), GZIP_BOUND_FLOOR)
    return _BoundedReader(handle, limit, (
        f"{shown or path}: the compressed file ({compressed:,} bytes) expands to more than {limit:,} bytes, "
        f"over {max_ratio:g} times its size (dbt var deis_gzip_max_ratio): not a plausible text file (blank "
        f"lines or a decompression bomb?); refused before reading on. Decompress it and check its content, "
        f"or raise deis_gzip_max_ratio if the file is genuine"))


def detect_encoding(path: str | os.PathLike, compression: str = "none", max_ratio: float | None = None,
                    shown: str | None = None) -> str:
    """'utf-8' if the bytes decode as UTF-8, else 'latin-1' (which decodes any byte).

    Stops at the first chunk that settles it: a decoding error means latin-1; a chunk that
    decodes and holds multi-byte characters means UTF-8 (latin-1 Spanish text practically never
    forms valid UTF-8 sequences). A pure-ASCII file is UTF-8 (the two agree on it).
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    with _open_bytes(str(path), compression, max_ratio, shown) as handle:
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


class LineScan:
    """Lines, blank lines, sha256 and size of a byte stream fed chunk by chunk (`update`), in one
    pass: a file read from disk, or a ZIP member as it is unpacked (so the unpacked file is not
    read a second time).

    A line ends at `\n`; a last line without it still counts. A blank line is empty or holds only
    `\r`. The checksum and the line search each run in a thread of their own (hashlib and numpy
    release the GIL), beside the thread that reads or inflates the next chunk: the deaths ZIP at
    scale 8 (7 GB inflated) took 10.9 s to inspect with the search in the reading thread.
    """

    def __init__(self):
        self._digest = hashlib.sha256()
        self._pool = ThreadPoolExecutor(max_workers=2)
        self._hashing = self._searching = None
        self._search = _LineSearch()
        self.lines, self.blank, self.size, self._tail = 0, [], 0, b"\n"  # as if after a line end

    def close(self) -> None:
        """Wait for the worker threads and end them (also after an error)."""
        self._pool.shutdown(wait=True)

    def update(self, chunk: bytes) -> None:
        if not chunk:
            return
        self._wait()   # at most one chunk in the workers: memory stays bounded
        self._hashing = self._pool.submit(self._digest.update, chunk)
        self._searching = self._pool.submit(self._search.lines, self._tail, chunk)
        self.size += len(chunk)
        self._tail = (self._tail + chunk[-2:])[-2:]

    def _wait(self) -> None:
        if self._hashing is not None:
            self._hashing.result()
        if self._searching is not None:
            ends, blank = self._searching.result()
            self.blank.extend(self.lines + line for line in blank)
            self.lines += ends
        self._hashing = self._searching = None

    def result(self) -> tuple[int, tuple[int, ...], str, int]:
        """(lines, numbers of the blank lines, sha256 hex, bytes)."""
        self._wait()
        self.close()
        unterminated = bool(self.size) and not self._tail.endswith(b"\n")
        last_blank = [self.lines + 1] if unterminated and self._tail.endswith(b"\n\r") else []  # only \r
        return (self.lines + int(unterminated), tuple(self.blank + last_blank), self._digest.hexdigest(),
                self.size)


class _LineSearch:
    """The line ends and blank lines of one chunk, vectorised. Its arrays are allocated once and
    reused (one search at a time): fresh 16 MB arrays per chunk cost more in page faults than the
    comparisons themselves."""

    def __init__(self):
        self._bytes = np.empty(0, dtype=bool)
        self._words = np.empty(0, dtype=np.uint16)

    def _scratch(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if len(self._bytes) < n:
            self._bytes, self._words = np.empty(n, dtype=bool), np.empty(n // 2 + 1, dtype=np.uint16)
        return self._bytes, self._words

    def lines(self, tail: bytes, chunk: bytes) -> tuple[int, list[int]]:
        """(line ends in `chunk`, the blank lines ending in it numbered from 1 = the first line
        ending in it). `tail`: the last two bytes before the chunk (b"\n" at the start)."""
        flags, words = self._scratch(len(chunk))
        data = np.frombuffer(chunk, dtype=np.uint8)
        newline = np.equal(data, 10, out=flags[:len(data)])
        count = int(np.count_nonzero(newline))
        # A blank line ends at a `\n` that follows `\n` or `\n\r`. For a line end among the
        # chunk's first two bytes, the bytes before it include the tail.
        ends = [end for end in (0, 1) if end < len(chunk) and chunk[end] == 10
                and (tail + chunk[:end + 1]).endswith((b"\n\n", b"\n\r\n"))]
        if self._may_hold_blank_line(chunk, words):
            found = np.flatnonzero(newline[1:] & newline[:-1]) + 1
            if b"\r" in chunk:
                carriage = data[1:-1] == 13
                found = np.union1d(found, np.flatnonzero(newline[:-2] & carriage & newline[2:]) + 2)
            ends += found[found >= 2].tolist()
        return count, [int(np.count_nonzero(newline[:end])) + 1 for end in ends]

    @staticmethod
    def _may_hold_blank_line(chunk: bytes, scratch: np.ndarray) -> bool:
        """False only when `chunk` holds no `\n\n` and no `\n\r`, so that the exact search runs
        on few chunks. Reads the bytes as 16-bit words at both alignments; with a `\r` in the
        chunk, (word | 0x0700) == 0x0F0A catches `\n\n` and `\n\r` (and, harmlessly, `\n`
        before a byte from 0x08 to 0x0F)."""
        with_carriage = b"\r" in chunk
        for start in (0, 1):
            n = (len(chunk) - start) // 2
            words = np.frombuffer(chunk, dtype="<u2", count=n, offset=start) if n else np.empty(0, np.uint16)
            if with_carriage:
                words = np.bitwise_or(words, 0x0700, out=scratch[:n])
            if np.equal(words, 0x0F0A if with_carriage else 0x0A0A).any():
                return True
        return False


def scan_lines(path: str, compression: str = "none", max_ratio: float | None = None,
               shown: str | None = None) -> tuple[int, tuple[int, ...], str, int]:
    """(lines, numbers of the blank lines, sha256 of the bytes read, bytes read): see LineScan."""
    scan = LineScan()
    try:
        with _open_bytes(path, compression, max_ratio, shown) as handle:
            while chunk := handle.read(CHUNK):
                scan.update(chunk)
    except GzipBombError:
        scan.close()
        raise
    except (EOFError, OSError) as error:   # a cut or damaged .gz: igzip raises at the cut
        raise _damaged_gzip(path, scan.result()[0], error) from None
    return scan.result()


def _damaged_gzip(shown: str, lines: int, error: Exception) -> DeisFileError:
    where = f"after line {lines:,}" if lines else "within its first lines"
    return DeisFileError(f"{shown}: the compressed file is damaged or cut short {where} "
                         f"({error or type(error).__name__}); download or compress it again")


def _first_lines(path: str, encoding: str, compression: str, max_ratio: float | None = None,
                 shown: str | None = None) -> list[str]:
    lines = []
    with _open_bytes(path, compression, max_ratio, shown) as raw, codecs.getreader(encoding)(raw) as handle:
        for line in handle:
            lines.append(line.rstrip("\r\n"))
            if len(lines) >= SNIFF_LINES + 1:
                break
    return lines


def _deaths_layout(names: set[str]) -> str:
    return DEATHS_PER_YEAR if ("MES_DEF" in names or "DIA_DEF" in names) and "FECHA_DEF" not in names \
        else DEATHS_OFFICIAL


def _map_header(fields: list[str], kind: str, shown: str) -> tuple[tuple[str, ...], str]:
    """Canonical column names of a header line, and the layout it names."""
    names = [_normalise_name(raw) for raw in fields]
    if kind == "deaths":
        layout = _deaths_layout(set(names))
        if layout == DEATHS_PER_YEAR:
            known, aliases, required = set(), DEATHS_PER_YEAR_NAMES, ("ANO_DEF", "EDAD_TIPO", "EDAD_CANT", "CODIGO_COMUNA_RESIDENCIA")
        else:
            known, aliases, required = set(DEATHS_COLUMNS), DEATHS_ALIASES, (
                "ANO_DEF", "EDAD_TIPO", "EDAD_CANT", "CODIGO_COMUNA_RESIDENCIA")
    else:
        layout = BIRTHS_PER_YEAR if set(names) & BIRTHS_PER_YEAR_MARKERS else BIRTHS_COMPACT
        known, aliases, required = BIRTHS_CANONICAL, BIRTHS_ALIASES, BIRTHS_REQUIRED
    columns, seen = [], set()
    for position, name in enumerate(names, start=1):
        canonical = name if name in known else aliases.get(name)
        if canonical is None or canonical in seen:
            canonical = f"extra_{position}"
        seen.add(canonical)
        columns.append(canonical)
    missing = [name for name in required if name not in seen]
    if missing:
        if kind == "births" and "COMUNA" in missing:
            raise DeisFileError(
                f"{shown}: the header names no commune column (COMUNA, COD_COMUNA, CODIGO_COMUNA, ...); "
                f"commune rates need the mother's commune of residence of every birth. If this is the "
                f"open DEIS series (Serie_Nacimientos_*), it has only the region: use the per-year DEIS "
                f"births bases (one file per year with COMUNA) instead (header found: {excerpt(';'.join(fields))})")
        raise DeisFileError(
            f"{shown}: the header does not name the DEIS {kind} column(s) {', '.join(missing)} "
            f"(header found: {excerpt(';'.join(fields))}); see docs/using/deis-layouts.md for the accepted names")
    return tuple(columns), layout


def _looks_like_header(fields: list[str], kind: str) -> bool:
    names = {_normalise_name(field) for field in fields}
    if kind == "deaths":
        known = set(DEATHS_COLUMNS) | set(DEATHS_ALIASES) | set(DEATHS_PER_YEAR_NAMES)
    else:
        known = set(BIRTHS_COLUMNS) | set(BIRTHS_ALIASES) | set(BIRTHS_PER_YEAR_COLUMNS)
    return bool(names & known)


def _headerless_layout(count: int, kind: str, shown: str, expected: str) -> tuple[tuple[str, ...], str]:
    if kind == "deaths" and count == len(DEATHS_COLUMNS):
        return DEATHS_COLUMNS, DEATHS_OFFICIAL
    if kind == "births" and count == len(BIRTHS_COLUMNS):
        return BIRTHS_COLUMNS, BIRTHS_COMPACT
    if kind == "births" and count == len(BIRTHS_PER_YEAR_COLUMNS):
        columns = tuple(BIRTHS_ALIASES.get(c, c) if BIRTHS_ALIASES.get(c, c) in BIRTHS_CANONICAL
                        or c in BIRTHS_CANONICAL else f"extra_{i}"
                        for i, c in enumerate(BIRTHS_PER_YEAR_COLUMNS, start=1))
        return columns, BIRTHS_PER_YEAR
    raise DeisFileError(f"{shown}: line 1 has {count} column(s) and no header; expected {expected}")


def sniff_file(path: str, kind: str, encoding: str = "auto", source_file: str | None = None,
               scanned: tuple | None = None, gzip_max_ratio: float | None = Limits.gzip_max_ratio) -> DeisFile:
    """Decide how to read one text file (plain or gzip), or raise DeisFileError saying what is wrong.
    `scanned`: the file's scan_lines result when it is already known (a ZIP member just unpacked,
    already bounded by the ZIP limits). `gzip_max_ratio`: how far a .gz file may expand (None:
    no bound)."""
    shown = source_file or path
    if SERIES_PATTERN.search(PurePosixPath(shown).name) and kind == "births":
        raise DeisFileError(
            f"{shown}: this is the open DEIS births series (Serie_Nacimientos_*), which gives births by "
            f"the mother's region only, with no commune column, so it cannot be the denominator of "
            f"commune rates. Point deis_births_path at the per-year DEIS births bases (one file per "
            f"year with the mother's commune, COMUNA) instead")
    expected = ("a ';'-separated DEIS deaths file: 27 columns (with or without header), or the older "
                "per-year layout with its header" if kind == "deaths" else
                "a ';'-separated DEIS births file: a header naming at least the year of birth (ANO_NAC) "
                "and the mother's commune (COMUNA), or no header and the 11 or 33 documented columns")
    compression = "gzip" if path.lower().endswith(".gz") else "none"
    try:
        with _open_bytes(path, compression, gzip_max_ratio, shown) as handle:
            head = handle.read(SNIFF_BYTES)
    except (OSError, EOFError) as error:
        raise DeisFileError(f"{shown}: cannot be read ({error})") from None
    if not head:
        raise DeisFileError(f"{shown}: the file is empty; expected {expected}")
    try:
        _check_text_head(head, shown)
    except DeisFileError as error:
        raise DeisFileError(f"{error}; expected {expected}") from None
    try:
        encoding = detect_encoding(path, compression, gzip_max_ratio, shown) if encoding in (None, "", "auto") \
            else ENCODINGS.get(encoding.lower())
    except (EOFError, OSError) as error:
        raise _damaged_gzip(shown, 0, error) from None
    if encoding is None:
        raise DeisFileError(f"{shown}: unsupported encoding; use auto, latin-1 or utf-8")
    try:
        lines = _first_lines(path, encoding, compression, gzip_max_ratio, shown)
    except (EOFError, OSError) as error:
        raise _damaged_gzip(shown, 0, error) from None
    except UnicodeDecodeError as error:
        raise DeisFileError(f"{shown}: not {encoding} text ({error}); set deis_encoding to 'auto' or "
                            f"the file's encoding") from None
    first = lines[0].lstrip("\ufeff").split(DELIMITER)
    if len(first) == 1 and any(sep in lines[0] for sep in ",\t|"):
        raise DeisFileError(f"{shown}: line 1 has 1 column(s) (the separator looks like ',' or a tab, "
                            f"not ';'); expected {expected}")
    header = _looks_like_header(first, kind)
    if header:
        columns, layout = _map_header(first, kind, shown)
        if layout == DEATHS_OFFICIAL and len(first) != len(DEATHS_COLUMNS):
            raise DeisFileError(f"{shown}: line 1 has {len(first)} column(s); expected {expected}")
    else:
        columns, layout = _headerless_layout(len(first), kind, shown, expected)
    for number, line in enumerate(lines[1:], start=2):
        count = len(line.split(DELIMITER))
        if line and count != len(columns):
            raise DeisFileError(f"{shown}: line {number} has {count} column(s), line 1 has "
                                f"{len(columns)}; expected {expected}")
    n_lines, blank, digest, size = scanned or scan_lines(path, compression, gzip_max_ratio, shown)
    if n_lines - int(header) - len(blank) == 0:
        raise EmptyDeisFile(
            f"{shown}: {'only a header' if header else 'only blank lines'}, no {kind} records; "
            f"a file without records would be read as zero {kind} in every year it should cover: "
            f"remove it from deis_{kind}_path, or put its records in it (or build with --vars "
            f"'{{deis_empty_files: audit}}' to list it as not read)")
    return DeisFile(path=os.path.abspath(path), source_file=shown, encoding=encoding, header=header,
                    columns=tuple(columns), layout=layout,
                    generated=PurePosixPath(shown).name.lower().startswith(GENERATED_PREFIX),
                    size_bytes=size, sha256=digest, lines=n_lines, blank_lines=blank,
                    records_expected=n_lines - int(header) - len(blank), compression=compression)


@dataclass
class Inspection:
    files: list[DeisFile] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)


EMPTY_FILE_ACTION = ("not read: no records (deis_empty_files: audit); a year no other file holds is "
                     "unavailable")


def inspect_all(spec: str, kind: str, encoding: str = "auto", cache_dir: str | os.PathLike | None = None,
                limits: Limits = Limits(), empty_files: str = "stop") -> Inspection:
    """Every entry named by `spec` (file, folder, glob or ZIP), the text files sniffed for `kind`.
    A file without records stops (EmptyDeisFile), or with empty_files='audit' is listed as not read."""
    if kind not in KINDS:
        raise DeisFileError(f"unknown DEIS file kind {kind!r}; expected one of {list(KINDS)}")
    result = Inspection()

    def sniff(path: str, entry_type: str, **how) -> DeisFile | None:
        shown = how.get("source_file") or path
        try:
            # A ZIP member was bounded as it was unpacked (deis_zip_max_*); a .gz file is bounded here.
            bound = None if "scanned" in how else limits.gzip_max_ratio
            return sniff_file(path, kind, encoding, gzip_max_ratio=bound, **how)
        except EmptyDeisFile:
            if empty_files != "audit":
                raise
            result.entries.append(Entry(shown, entry_type, EMPTY_FILE_ACTION, os.path.getsize(path)))
            return None

    for path in expand_paths(spec, result.entries):
        if path.lower().endswith(".zip"):
            if not zipfile.is_zipfile(path):
                raise DeisFileError(f"{path}: not a readable ZIP archive")
            digest = file_sha256(path)
            result.entries.append(Entry(path, "zip_archive", "read: members listed below",
                                        os.path.getsize(path), digest))
            for member, extracted, scanned in unpack_zip(path, cache_dir, limits, result.entries, digest):
                found = sniff(str(extracted), "zip_member", source_file=f"{path}/{member}", scanned=scanned)
                if found:
                    result.files.append(found)
                    result.entries.append(Entry(found.source_file, "zip_member", "read", found.size_bytes,
                                                found.sha256))
        elif found := sniff(path, "file"):
            result.files.append(found)
            result.entries.append(Entry(path, "file", "read", found.size_bytes, found.sha256))
    _refuse_duplicates(result.files)
    return result


def _refuse_duplicates(files: list[DeisFile]) -> None:
    seen: dict[str, str] = {}
    for found in files:
        if found.sha256 in seen:
            raise DeisFileError(
                f"{found.source_file} and {seen[found.sha256]} have identical content (sha256 "
                f"{found.sha256[:12]}...): its records would be counted twice; remove one of them")
        seen[found.sha256] = found.source_file


def inspect(spec: str, kind: str, encoding: str = "auto",
            cache_dir: str | os.PathLike | None = None, limits: Limits = Limits()) -> list[DeisFile]:
    """The files named by `spec`, each sniffed for `kind` (see inspect_all)."""
    return inspect_all(spec, kind, encoding, cache_dir, limits).files


# One dbt invocation asks for the same inspection several times (each model, the count basis,
# the input manifest); the answer is kept while no file named by the path has changed.
_CACHE: dict[tuple, str] = {}
_CACHE_LOCK = threading.Lock()
# One lock per inspection: models compiled at the same time in dbt's threads (the births shards)
# wait for the first to finish scanning instead of scanning the same files again.
_INSPECTING: dict[tuple, threading.Lock] = {}


def _signature(spec: str) -> tuple:
    try:
        paths = _candidates(spec)
        return tuple((p, os.stat(p).st_size, os.stat(p).st_mtime_ns) for p in paths)
    except OSError:
        return (uuid.uuid4().hex,)  # unreadable: never cached, the inspection says why


def inspect_json(spec: str, kind: str, encoding: str = "auto", cache_dir: str | None = None,
                 options: str | None = None) -> str:
    """`inspect_all` as JSON for SQL callers: {"files": [...], "entries": [...]} or {"error": "..."}."""
    settings = json.loads(options or "{}")
    limits = Limits(int(settings.get("max_member_bytes", Limits.max_member_bytes)),
                    float(settings.get("max_ratio", Limits.max_ratio)),
                    float(settings.get("gzip_max_ratio", Limits.gzip_max_ratio)))
    empty_files = settings.get("empty_files", "stop")
    key = (spec, kind, encoding, cache_dir, limits, empty_files, _signature(spec))
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
        inspecting = _INSPECTING.setdefault(key, threading.Lock())
    with inspecting:
        with _CACHE_LOCK:
            if key in _CACHE:
                return _CACHE[key]
        try:
            found = inspect_all(spec, kind, encoding or "auto", cache_dir or None, limits, empty_files)
            answer = json.dumps({"files": [asdict(f) for f in found.files],
                                 "entries": [asdict(e) for e in found.entries]}, ensure_ascii=False)
        except (DeisFileError, OSError) as error:
            return json.dumps({"error": f"DEIS {kind} input: {error}"}, ensure_ascii=False)
        with _CACHE_LOCK:
            _CACHE[key] = answer
        return answer


def raw_files_json(folder: str, used: str) -> str:
    """Every entry of the aggregate raw-data folder with size, sha256 and line count, as JSON.

    `used` is a JSON list of the file names the dbt sources read; other entries are listed as
    not read.
    """
    read = set(json.loads(used or "[]"))
    if not os.path.isdir(folder):
        return json.dumps({"error": f"raw_data_dir {folder}: not a folder"}, ensure_ascii=False)
    rows = []
    # Sub-folders too (data/raw/covariates): every file the build could read is listed.
    for root, _, names in sorted(os.walk(folder)):
        for name in sorted(names):
            path = os.path.join(root, name)
            lines, blank, digest, size = scan_lines(path)
            rows.append({"entry": path, "entry_type": "file", "size_bytes": size, "sha256": digest,
                         "lines": lines, "blank_lines": len(blank),
                         "action": "read" if name in read else "not read: no dbt source uses this file"})
    return json.dumps({"entries": rows}, ensure_ascii=False)


def read_text_strict(path: str) -> str:
    """The text of one aggregate input file (INE, DEIS aggregates, covariates), for the staging
    models' strict line-by-line reading (macros/raw_text_files.sql). The path is taken literally
    (no glob); a missing file, a cut .gz or bytes that are not UTF-8 stop with DeisFileError
    naming the file, the line and what to do."""
    if not os.path.isfile(path):
        raise DeisFileError(f"{path}: no such file; set raw_data_dir to the folder that holds it")
    compression = "gzip" if path.lower().endswith(".gz") else "none"
    try:
        with _open_bytes(path, compression, Limits.gzip_max_ratio) as handle:
            data = b"".join(iter(lambda: handle.read(CHUNK), b""))
    except (EOFError, OSError) as error:
        raise _damaged_gzip(path, 0, error) from None
    if kind := utf16_kind(data[:4096]):
        raise DeisFileError(
            f"{path}: the file is {kind} encoded (byte-order mark or a NUL byte beside every character), "
            f"not UTF-8; save it as UTF-8") from None
    if b"\x00" in data:
        line = data.count(b"\n", 0, data.index(b"\x00")) + 1
        raise DeisFileError(f"{path} line {line}: a NUL byte: binary content, not a text file; "
                            f"save the file as UTF-8 text") from None
    if b"\r" in data and b"\n" not in data:
        # Classic Mac line ends: the whole file would be read as one line (and quoted as one).
        raise DeisFileError(
            f"{path}: its lines end with a carriage return only (CR, no line feed), so the file reads "
            f"as a single line of {len(data):,} bytes; save it with LF (or CRLF) line ends") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise DeisFileError(
            f"{path} line {line}: byte 0x{data[error.start]:02X} is not UTF-8 text (the file looks "
            f"latin-1 encoded); save the file as UTF-8") from None


CONTROL_NAMES = {
    "year": ("AÑO", "ANO", "ANIO", "ANO_NAC", "AÑO_NAC", "YEAR"),
    "region": ("REGION", "REG_RES", "COD_REGION", "CODIGO_REGION", "REGION_RESIDENCIA"),
    "births": ("NACIMIENTOS", "TOTAL", "BIRTHS", "CANTIDAD", "N"),
}


def control_totals(path: str) -> list[dict]:
    """Births per year and region from a control file (e.g. the open series Serie_Nacimientos_*).

    The file is ';'- or ','-separated with a header naming the year, the region code and the
    births count (CONTROL_NAMES); rows are summed per year and region (so rows by sex add up),
    and every value must be a whole number, or DeisFileError names the file and line.
    """
    encoding = detect_encoding(path)
    with open(path, encoding=encoding, newline="") as handle:
        text = handle.read().lstrip("\ufeff")
    rows = text.splitlines()
    if not rows:
        raise DeisFileError(f"{path}: the births control file is empty")
    delimiter = ";" if rows[0].count(";") >= rows[0].count(",") else ","
    header = [_normalise_name(name) for name in rows[0].split(delimiter)]
    where = {}
    for role, names in CONTROL_NAMES.items():
        found = [i for i, name in enumerate(header) if name in names]
        if not found:
            raise DeisFileError(f"{path}: the births control file needs a column for the {role} "
                                f"(one of {', '.join(names)}); header found: {excerpt(rows[0])}")
        where[role] = found[0]
    totals: dict[tuple[int, str], int] = {}
    for number, line in enumerate(rows[1:], start=2):
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split(delimiter)]
        values = {}
        for role, index in where.items():
            value = fields[index] if index < len(fields) else ""
            if not re.fullmatch(r"[0-9]{1,9}", value):
                raise DeisFileError(f"{path} line {number}: {header[index]} {value!r} is not a whole number")
            values[role] = int(value)
        key = (values["year"], str(values["region"]).zfill(2))
        totals[key] = totals.get(key, 0) + values["births"]
    return [{"year": year, "region": region, "births": births} for (year, region), births in sorted(totals.items())]


def control_totals_json(path: str) -> str:
    try:
        return json.dumps({"totals": control_totals(path)})
    except (DeisFileError, OSError) as error:
        return json.dumps({"error": f"DEIS births control totals: {error}"}, ensure_ascii=False)


def register_functions(conn) -> None:
    """Create `imr_deis_inspect(path, kind, encoding, cache_dir, options) -> VARCHAR` (JSON) and
    `imr_raw_files(folder, used) -> VARCHAR` and `imr_births_control(path) -> VARCHAR` (JSON)
    and `imr_read_text(path) -> VARCHAR` (read_text_strict) on a connection."""
    conn.create_function(
        "imr_deis_inspect", inspect_json, ["VARCHAR"] * 5, "VARCHAR",
        side_effects=True,  # unpacks ZIPs into the cache; never constant-fold or cache the call
    )
    conn.create_function("imr_raw_files", raw_files_json, ["VARCHAR", "VARCHAR"], "VARCHAR",
                         side_effects=True)
    conn.create_function("imr_read_text", read_text_strict, ["VARCHAR"], "VARCHAR", side_effects=True)
    conn.create_function("imr_births_control", control_totals_json, ["VARCHAR"], "VARCHAR",
                         side_effects=True)


class Plugin(BasePlugin):
    """dbt-duckdb plugin: `plugins: [{module: infant_mortality.dbt_plugins.deis_files}]` in the profile."""

    def configure_connection(self, conn):
        register_functions(conn)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m infant_mortality.deis_files",
        description="Check DEIS microdata files (unpacking a published ZIP into the cache, safely) "
                    "and print how the staging models will read them, as JSON.")
    parser.add_argument("kind", choices=list(KINDS))
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
