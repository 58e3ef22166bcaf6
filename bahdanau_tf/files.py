"""Writing files so that a failure leaves nothing behind.

- `OutputFiles`: outputs written under temporary names beside their targets and renamed into
  place together at the end; on an error (a full disk, Ctrl-C) the temporary files are removed,
  so either the whole output is there or none of it (what ``bahdanau-translate`` and
  ``bahdanau-evaluate`` write through).
- `try_lock` / `Claim`: a file holding an ``fcntl.flock`` for as long as its process lives. The
  kernel drops the lock when the process dies, even by SIGKILL, so a claim left by a killed
  process is recognised as stale and taken over (the training directory's lock, the export's
  version claim).
- `remove_partial_checkpoints`: the ``ckpt-N_temp/`` directories a checkpoint save that failed
  half-way (a full disk, a second Ctrl-C) leaves; `as_os_error`: TensorFlow's error for a full
  disk as the `OSError` that names the file.

Nothing here writes to the system temp directory: a process killed at any point leaves nothing
there.
"""

import contextlib
import errno
import glob
import os
import re
import shutil


class OutputFiles:
    """Files written to temporary names beside their targets, renamed into place at the end.

    Example:

        with OutputFiles() as outputs:
            with open(outputs.path("translations.txt"), "w", encoding="utf-8") as handle:
                handle.write(text)
        # translations.txt now exists whole; after an error it is left as it was
    """

    def __init__(self):
        self._pending = []  # (temporary, final)

    def path(self, final: str) -> str:
        """The temporary path to write ``final`` to (hidden, beside it: same file system)."""
        directory, name = os.path.split(os.path.abspath(final))
        temporary = os.path.join(directory, f".{name}.tmp-{os.getpid()}")
        self._pending.append((temporary, final))
        return temporary

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if kind is None:
            for temporary, final in self._pending:
                os.replace(temporary, final)  # a rename: needs no space
        else:
            for temporary, final in self._pending:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(temporary)
                if isinstance(error, OSError) and error.filename == temporary:
                    error.filename = final  # the error names the file the user asked for
            if (isinstance(error, OSError) and error.errno is not None and error.filename is None
                    and self._pending):
                error.filename = self._pending[-1][1]  # a failed write: the file being written
        self._pending = []
        return False


def try_lock(path: str):
    """Opens (creates) ``path`` and takes an exclusive, non-blocking ``fcntl.flock`` on it.

    Returns:
        the open file (closing it releases the lock), or None when another living process
        holds the lock. Where fcntl does not exist (Windows) the file is returned unlocked.
    """
    handle = open(path, "a+")
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on POSIX
        return handle
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle


def take_lock(path: str):
    """`try_lock` on the file that ``path`` names when the lock is taken: a file its last holder
    removed on release (`drop_lock`) while this process opened it is let go, and the new one
    tried. Returns the open file, or None when another living process holds the lock."""
    while True:
        handle = try_lock(path)
        if handle is None:
            return None
        try:
            if os.path.samestat(os.fstat(handle.fileno()), os.stat(path)):
                return handle
        except OSError:
            pass
        handle.close()


def drop_lock(handle, path: str) -> None:
    """Removes the lock file ``path`` (still held), then releases the lock: nothing is left."""
    with contextlib.suppress(OSError):
        os.remove(path)
    handle.close()


def write_holder(handle, path: str) -> None:
    """Writes this process's id into the lock file ``handle`` (an OSError names ``path``)."""
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
    except OSError as error:
        error.filename = error.filename or path
        raise


def lock_holder(path: str) -> str:
    """The process id a lock or claim file holds (for messages), or "unknown"."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip() or "unknown"
    except OSError:
        return "unknown"


class Claim:
    """An exclusive claim on a name: the file ``path`` locked by this process while it lives.

    `acquire` returns False while another living process holds the claim. A claim file whose
    process died (SIGKILL, power loss) holds no lock: it is stale and taken over. `release`
    removes the file, then drops the lock.
    """

    def __init__(self, path: str):
        self.path = path
        self._handle = None

    def acquire(self) -> bool:
        while True:
            if os.path.isdir(self.path):  # an empty directory: the claim of an older release
                with contextlib.suppress(OSError):
                    os.rmdir(self.path)
            handle = try_lock(self.path)
            if handle is None:
                return False
            try:
                same = os.stat(self.path).st_ino == os.fstat(handle.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:  # not a file its previous holder removed after we opened it
                self._handle = handle
                try:
                    write_holder(handle, self.path)
                except BaseException:  # e.g. a full disk: no claim is left behind
                    self.release()
                    raise
                return True
            handle.close()

    def release(self) -> None:
        if self._handle is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path)
            self._handle.close()  # closing the file releases the lock
            self._handle = None


def remove_partial_checkpoints(directory: str) -> None:
    """Removes the ``<prefix>_temp/`` directories a checkpoint save left when it failed."""
    for partial in glob.glob(os.path.join(glob.escape(directory), "*_temp")):
        shutil.rmtree(partial, ignore_errors=True)


# what the C library says for the write failures a command reports as I/O failures
_IO_CAUSES = {"No space left on device": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT,
              "Read-only file system": errno.EROFS, "Input/output error": errno.EIO,
              "File too large": errno.EFBIG}


def as_os_error(error: BaseException):
    """``error`` as an `OSError` naming its file, if it is an I/O failure; else None.

    TensorFlow reports a full disk during a checkpoint or SavedModel write as a
    ``tf.errors.OpError`` (ResourceExhausted, Unknown...) whose text reads ``FILE; No space left
    on device``; the command lines report both as an I/O failure (exit code 5).
    """
    if isinstance(error, OSError):
        return error
    text = str(error)
    for cause, code in _IO_CAUSES.items():
        if cause in text:
            match = re.search(r"(\S+?)[;:] " + cause, text)
            return OSError(code, cause, match.group(1) if match else None)
    return None
