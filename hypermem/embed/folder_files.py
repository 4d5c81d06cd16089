"""The files of a received model folder, read without trusting them.

Every loader of a folder (:mod:`hypermem.embed.encoder_folder`, :mod:`hypermem.embed.reranker`)
reads through here, so each file it opens is

* inside the folder (a symlink that leads out of it is refused, never followed),
* a regular file (a directory, a device such as ``/dev/zero`` or a pipe is refused),
* of a bounded size (every file of the folder but its weights, :data:`MAX_FILE_BYTES`, since
  sentence-transformers reads some whole: ``README.md``), and for JSON nested at most :data:`~hypermem.embed.json_limits.MAX_JSON_DEPTH`
  deep (no ``RecursionError``);

and no file of the folder holds pickled weights (``*.bin``, ``*.pt``, ``*.pth``, ``*.ckpt``,
``*.pkl``: unpickling can run code).  ``safetensors`` headers are read and checked here (a
few kilobytes) so that the weights a folder holds are known before any model is built.
Errors are :class:`EncoderFolderError`, naming the file and field.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from .json_limits import MAX_JSON_DEPTH, json_depth_over

__all__ = ["EncoderFolderError", "PICKLE_SUFFIXES", "drop_stale_module_dirs", "inside", "save_folder",
           "saved_module_dirs", "read_json", "read_text", "safetensors_header",
           "scan_folder", "weights_header"]

MAX_JSON_BYTES = 1 << 20
MAX_BIG_JSON_BYTES = 64 << 20
"""``tokenizer.json`` / ``vocab.json`` of a large vocabulary exceed 1 MiB."""
MAX_HEADER_BYTES = 100_000_000
"""The ``safetensors`` library's own bound on a header."""
MAX_ENTRIES = 10_000
MAX_FILE_BYTES = 64 << 20
"""The largest file of a folder other than weights (:data:`WEIGHT_SUFFIXES`): sentence-transformers
and transformers read such files whole (``README.md``, the tokenizer's files...)."""
WEIGHT_SUFFIXES = (".safetensors", ".onnx", ".onnx_data", ".h5", ".msgpack", ".ot")
"""Weights: ``safetensors`` headers are checked against the file's size (:func:`safetensors_header`);
the other formats are never opened by a torch load."""
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib")
_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8}


class EncoderFolderError(ValueError):
    """A folder that is not a loadable hierarchy encoder; the message names the file and field."""


def inside(folder: Path, path: Path) -> Path:
    """``path`` (in ``folder``) resolved, refusing a symlink that leads out of ``folder``."""
    try:
        real, root = path.resolve(), folder.resolve()
    except (RuntimeError, OSError) as exc:   # Python < 3.13 raises RuntimeError on a symlink loop
        raise EncoderFolderError(f"{path}: a symbolic link that cannot be resolved (a loop?): {exc}") from None
    if real != root and not real.is_relative_to(root):
        raise EncoderFolderError(f"{path}: a symbolic link out of the folder (to {real}); a received folder "
                                 "must hold its own files")
    return real


def _regular(folder: Path, path: Path) -> Path:
    real = inside(folder, path)
    try:
        mode = real.stat().st_mode
    except OSError as exc:
        raise EncoderFolderError(f"{path}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise EncoderFolderError(f"{path}: not a regular file")
    return real


def present(path: Path) -> bool:
    """Whether anything (a file, a folder, a link, even a broken one) has that name."""
    return os.path.lexists(path)


def read_text(folder: Path, path: Path, limit: int = MAX_JSON_BYTES) -> str:
    """The UTF-8 text of a regular file inside ``folder`` of at most ``limit`` bytes."""
    real = _regular(folder, path)
    with open(real, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise EncoderFolderError(f"{path}: larger than {limit} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise EncoderFolderError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at position "
                                 f"{exc.start})") from None


def _parse(text: str | bytes, where: str) -> Any:
    try:
        value = json.loads(text)
    except RecursionError:
        raise EncoderFolderError(f"{where}: nests deeper than {MAX_JSON_DEPTH} levels") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise EncoderFolderError(f"{where}: not valid JSON ({str(exc)[:120]})") from None
    if json_depth_over(value, MAX_JSON_DEPTH):
        raise EncoderFolderError(f"{where}: nests deeper than {MAX_JSON_DEPTH} levels")
    return value


def read_json(path: Path, folder: Path | None = None, limit: int = MAX_JSON_BYTES) -> Any:
    """The JSON value of ``path`` (a regular file inside ``folder``, default its parent; at
    most ``limit`` bytes and :data:`MAX_JSON_DEPTH` levels deep)."""
    return _parse(read_text(path.parent if folder is None else folder, path, limit), str(path))


def scan_folder(folder: Path) -> None:
    """Refuse a folder holding pickled weights anywhere, a symlink that leads out of it, anything
    but regular files and folders (a pipe would block a read forever, a device never end), or a
    file other than weights larger than :data:`MAX_FILE_BYTES` (read whole by the libraries)."""
    count = 0
    for top, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            count += 1
            if count > MAX_ENTRIES:
                raise EncoderFolderError(f"{folder}: more than {MAX_ENTRIES} files; not a model folder")
            path = Path(top) / name
            if path.is_symlink():
                inside(folder, path)
            if name in files and name.lower().endswith(PICKLE_SUFFIXES):
                raise EncoderFolderError(f"{path}: a pickle file (weights of *.bin/*.pt/*.ckpt are pickled, and "
                                         "unpickling can run code); a folder must hold safetensors weights only: "
                                         "remove the file, or convert it where you trust it")
            if name in files:
                _bounded(folder, path)


def _bounded(folder: Path, path: Path) -> None:
    """Refuse ``path`` (a file name of the folder) unless it is a regular file (a link to a folder
    is a folder) of at most :data:`MAX_FILE_BYTES`, or weights."""
    try:
        st = path.stat()   # a link inside the folder: its target (stat opens nothing, a pipe does not block)
    except OSError as exc:
        raise EncoderFolderError(f"{path}: cannot be read ({exc.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        return
    if not stat.S_ISREG(st.st_mode):
        raise EncoderFolderError(f"{path}: not a regular file (a pipe, socket or device); a received folder holds "
                                 "files and folders only")
    if st.st_size > MAX_FILE_BYTES and not path.name.lower().endswith(WEIGHT_SUFFIXES):
        raise EncoderFolderError(f"{path}: {st.st_size} bytes, larger than {MAX_FILE_BYTES} (the libraries read it "
                                 "whole); not a file of a model folder")


def safetensors_header(folder: Path, path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """``{tensor name: (dtype, shape)}`` of the ``safetensors`` file ``path``, every entry
    checked against the file's size (nothing is allocated from a declared size)."""
    real = _regular(folder, path)
    size = real.stat().st_size
    with open(real, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise EncoderFolderError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
        n = int.from_bytes(head, "little")
        if n > min(size - 8, MAX_HEADER_BYTES):
            raise EncoderFolderError(f"{path}: not a safetensors file (its header declares {n} bytes, "
                                     f"the file has {size})")
        raw = _parse(fh.read(n), str(path))
    if not isinstance(raw, dict):
        raise EncoderFolderError(f"{path}: the safetensors header is not a JSON object")
    data, out = size - 8 - n, {}
    for name, entry in raw.items():
        if name == "__metadata__":
            continue
        ok = isinstance(entry, dict) and entry.get("dtype") in _DTYPE_BYTES and isinstance(entry.get("shape"), list)
        shape = entry.get("shape") if ok else None
        offs = entry.get("data_offsets") if ok else None
        ok = ok and all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d for d in shape) and \
            isinstance(offs, list) and len(offs) == 2 and all(isinstance(o, int) and not isinstance(o, bool) for o in offs)
        if not ok or not 0 <= offs[0] <= offs[1] <= data or \
                (offs[1] - offs[0]) != math.prod(shape) * _DTYPE_BYTES[entry["dtype"]]:
            raise EncoderFolderError(f"{path}: tensor {name!r} has a malformed entry (dtype, shape or offsets "
                                     "outside the file)")
        out[name] = (entry["dtype"], tuple(shape))
    return out


def weights_header(folder: Path, module_dir: Path, what: str) -> tuple[list[Path], dict[str, tuple[str, tuple[int, ...]]]]:
    """The ``safetensors`` files of one module (``model.safetensors``, or the shards named by
    ``model.safetensors.index.json``) and their merged header; refuses a module without them."""
    single, index = module_dir / "model.safetensors", module_dir / "model.safetensors.index.json"
    if present(single):
        files = [single]
    elif present(index):
        raw = read_json(index, folder)
        wmap = raw.get("weight_map") if isinstance(raw, dict) else None
        if not isinstance(wmap, dict) or not wmap or not all(isinstance(v, str) for v in wmap.values()):
            raise EncoderFolderError(f"{index}: field 'weight_map' must be an object of file names")
        names = sorted(set(wmap.values()))
        if any(Path(v).is_absolute() or ".." in Path(v).parts or not v.endswith(".safetensors") for v in names):
            raise EncoderFolderError(f"{index}: field 'weight_map' names a file outside the module or not safetensors")
        files = [module_dir / v for v in names]
    else:
        raise EncoderFolderError(f"{module_dir}: {what} has no model.safetensors (pickled weights are not loaded: "
                                 "they could run code)")
    merged: dict[str, tuple[str, tuple[int, ...]]] = {}
    for f in files:
        merged.update(safetensors_header(folder, f))
    return files, merged


def save_folder(path: str | os.PathLike, marker: str, what: str) -> Path:
    """The folder a model's ``save`` may write: new, empty, or one of its own kind (holding
    ``marker``, its settings file), which it saves over as sentence-transformers does; a file,
    or a folder holding other files, raises ``FileExistsError`` naming ``what`` (nothing of the
    user's is overwritten or mixed in)."""
    folder = Path(path)
    if folder.is_symlink() and not folder.exists():
        raise FileExistsError(f"cannot save the {what} to {str(path)!r}: it is a dangling symbolic link (to "
                              f"{os.readlink(folder)!r}, which does not exist); create its target folder, or "
                              f"remove the link")
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"cannot save the {what} to {str(path)!r}: it is a file; give a folder "
                              f"(new, empty, or a {what} folder this saves over)")
    if folder.is_dir() and not (folder / marker).is_file() and any(folder.iterdir()):
        raise FileExistsError(f"cannot save the {what} to {str(path)!r}: the folder holds other files and no "
                              f"{marker} (not a {what} folder); give a new or empty folder")
    return folder


SAVED_MODULE_FILES = ("config.json", "model.safetensors")
"""What sentence-transformers writes into a module's folder (``2_Dense/``, ``1_Pooling/``)."""


def saved_module_dirs(folder: Path) -> list[str]:
    """The module folders (``1_Pooling``, ``2_Dense``...) that ``folder/modules.json`` names,
    as an earlier save wrote it; ``[]`` when there is none or it is unreadable."""
    try:
        modules = read_json(folder / "modules.json", folder) if present(folder / "modules.json") else []
    except EncoderFolderError:
        return []
    rels = [m.get("path") for m in modules if isinstance(m, dict)] if isinstance(modules, list) else []
    return [r for r in rels if isinstance(r, str) and r and "/" not in r and "\\" not in r and r[0].isdigit()]


def drop_stale_module_dirs(folder: Path, earlier: list[str]) -> None:
    """After a save over ``folder``: remove the module folders of the earlier save (``earlier``,
    from :func:`saved_module_dirs`) that the new ``modules.json`` no longer names (a ``2_Dense/``
    of an earlier head), only the files a save writes there (:data:`SAVED_MODULE_FILES`), and the
    folder itself once empty; anything else in it is the user's and stays."""
    for rel in sorted(set(earlier) - set(saved_module_dirs(folder))):
        d = folder / rel
        if d.is_symlink() or not d.is_dir():
            continue
        for name in SAVED_MODULE_FILES:
            if (d / name).is_file() and not (d / name).is_symlink():
                (d / name).unlink()
        with contextlib.suppress(OSError):   # not empty: files the save did not write
            d.rmdir()
