"""Read character vectors from an R lazy-load database (`data/Rdata.rdb` + `.rdx`) without R.

R packages store their datasets as a lazy-load DB: `Rdata.rdx` is a gzip-compressed serialized R list
`{variables: {name: c(offset, length)}, references, compressed}`, and `Rdata.rdb` holds, at each
(offset, length), a 4-byte big-endian uncompressed length, then (for R >= 2.10 type 2/3) a one-byte
compression type (`Z`/`X` xz, `2` bzip2, `0` none) or directly a zlib stream (type 1), then the
serialized object in XDR format (`X\\n`, big-endian).

Only the SEXP types that character-vector datasets use are supported (NULL, symbols, pairlists,
character/logical/integer/double vectors, generic vectors with a `names` attribute, references);
anything else raises `RDataError` naming the type, rather than returning wrong data.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import struct
import zlib
from pathlib import Path

from docgrad.errors import DocgradError

NILVALUE, REFSXP, SYMSXP, LISTSXP, CHARSXP = 254, 255, 1, 2, 9
LGLSXP, INTSXP, REALSXP, STRSXP, VECSXP = 10, 13, 14, 16, 19
_NA_INT = -(2**31)


class RDataError(DocgradError, ValueError):
    """The R data file cannot be read; the message names the file and the problem."""


class _Reader:
    def __init__(self, data: bytes, name: str):
        self.b, self.pos, self.name, self.refs = data, 0, name, []

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.b):
            raise RDataError(f"{self.name}: truncated serialized object (wanted {n} bytes at {self.pos})")
        v = self.b[self.pos:self.pos + n]
        self.pos += n
        return v

    def int(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def header(self) -> None:
        if self.take(2) != b"X\n":
            raise RDataError(f"{self.name}: only XDR (binary big-endian) R serialization is supported")
        version = self.int()
        self.int(), self.int()  # writer R version, minimal reader version
        if version == 3:
            self.take(self.int())  # native encoding name
        elif version != 2:
            raise RDataError(f"{self.name}: unsupported serialization version {version}")

    def item(self):
        flags = self.int()
        typ, has_attr, has_tag = flags & 0xFF, bool(flags & (1 << 9)), bool(flags & (1 << 10))
        if typ == NILVALUE:
            return None
        if typ == REFSXP:
            return self.refs[(flags >> 8) - 1]
        if typ == SYMSXP:
            name = self.item()
            self.refs.append(name)
            return name
        if typ == CHARSXP:
            n = self.int()
            return None if n == -1 else self.take(n).decode("utf-8")
        if typ == LISTSXP:
            return self._pairlist(has_attr, has_tag)
        if typ in (STRSXP, VECSXP):
            value = [self.item() for _ in range(self.int())]
        elif typ in (INTSXP, LGLSXP):
            n = self.int()
            value = [None if v == _NA_INT else v for v in struct.unpack(f">{n}i", self.take(4 * n))]
        elif typ == REALSXP:
            n = self.int()
            value = list(struct.unpack(f">{n}d", self.take(8 * n)))
        else:
            raise RDataError(f"{self.name}: unsupported R object type {typ} at byte {self.pos - 4}")
        if has_attr:
            attrs = self.item() or {}
            if typ == VECSXP and attrs.get("names"):
                return dict(zip(attrs["names"], value))
        return value

    def _pairlist(self, has_attr: bool, has_tag: bool) -> dict:
        out = {}
        while True:
            if has_attr:
                self.item()
            tag = self.item() if has_tag else len(out)
            out[tag] = self.item()
            flags = self.int()
            typ, has_attr, has_tag = flags & 0xFF, bool(flags & (1 << 9)), bool(flags & (1 << 10))
            if typ == NILVALUE:
                return out
            if typ != LISTSXP:
                raise RDataError(f"{self.name}: malformed pairlist (type {typ})")


def unserialize(data: bytes, name: str = "<bytes>"):
    """Decode one XDR-serialized R object into Python lists/dicts/strings."""
    r = _Reader(data, name)
    r.header()
    return r.item()


def _decompress(chunk: bytes, name: str) -> bytes:
    kind = chunk[4:5]
    try:
        if kind in (b"Z", b"X"):
            return lzma.decompress(chunk[5:])
        if kind == b"2":
            return bz2.decompress(chunk[5:])
        if kind == b"0":
            return chunk[5:]
        return zlib.decompress(chunk[4:])
    except (lzma.LZMAError, OSError, zlib.error) as e:
        raise RDataError(f"{name}: cannot decompress ({e})") from None


def load_lazy_db(base: str | Path) -> dict:
    """All objects of the lazy-load DB `base.rdx`/`base.rdb` (base e.g. `.../janeaustenr/data/Rdata`)."""
    base = Path(base)
    rdx, rdb = base.with_suffix(".rdx"), base.with_suffix(".rdb")
    for p in (rdx, rdb):
        if not p.is_file():
            raise RDataError(f"{p}: R lazy-load database file not found")
    index = unserialize(gzip.decompress(rdx.read_bytes()), str(rdx))
    blob = rdb.read_bytes()
    out = {}
    for var, (offset, length) in index["variables"].items():
        chunk = blob[int(offset):int(offset) + int(length)]
        out[var] = unserialize(_decompress(chunk, f"{rdb}[{var}]"), f"{rdb}[{var}]")
    return out


# --- writer, for test fixtures (the inverse of the reader for character vectors) -----------------------

def _w_int(v: int) -> bytes:
    return struct.pack(">i", v)


def serialize_strings(obj) -> bytes:
    """XDR-serialize a character vector (list of str/None) or a {name: [offset, length]} index (tests)."""
    out = [b"X\n", _w_int(2), _w_int(0x040000), _w_int(0x020300)]

    def chars(s):
        if s is None:
            return _w_int(CHARSXP) + _w_int(-1)
        b = s.encode("utf-8")
        return _w_int(CHARSXP | (1 << 15)) + _w_int(len(b)) + b  # UTF8 mask, ignored by the reader

    def strs(v):
        return _w_int(STRSXP) + _w_int(len(v)) + b"".join(chars(s) for s in v)

    def item(o):
        if isinstance(o, dict):  # named generic vector
            body = _w_int(VECSXP | (1 << 9)) + _w_int(len(o)) + b"".join(item(v) for v in o.values())
            attr = _w_int(LISTSXP | (1 << 10)) + _w_int(SYMSXP) + chars("names") + strs(list(o)) + _w_int(NILVALUE)
            return body + attr
        if o and isinstance(o[0], (int, float)):
            return _w_int(REALSXP) + _w_int(len(o)) + struct.pack(f">{len(o)}d", *o)
        return strs(o)

    out.append(item(obj))
    return b"".join(out)


def write_lazy_db(base: str | Path, objects: dict) -> None:
    """Write {name: character vector} as a zlib-compressed lazy-load DB (test fixtures)."""
    base = Path(base)
    blob, variables = b"", {}
    for var, value in objects.items():
        data = serialize_strings(value)
        chunk = struct.pack(">I", len(data)) + zlib.compress(data)
        variables[var] = [float(len(blob)), float(len(chunk))]
        blob += chunk
    base.with_suffix(".rdb").write_bytes(blob)
    index = {"variables": variables, "references": {}, "compressed": [1.0]}
    base.with_suffix(".rdx").write_bytes(gzip.compress(serialize_strings(index)))
