"""The sandbox worker: stdlib-only, run as ``python -I -S worker.py CONFIG_JSON`` inside the sandbox.

It is bound read-only into the sandbox (its bytes are pinned in ``sandbox_profiles/PINS``) and
imports nothing from ``runner``. In order, it:

0. under a root parent (``drop_to`` in its config), empties its capability bounding and
   inheritable sets and becomes this call's unprivileged host id (leased by the parent for the
   call); on Linux (``new_session_keyring``) joins a new, anonymous, empty session keyring;
1. sets rlimits (CPU, address space, file size, processes, open files, no core);
2. applies Landlock to itself (Linux): read-only access to the bound paths, read-write to the
   scratch ``/tmp``, execute only beneath the read-only binds, no TCP bind/connect (ABI >= 4), no
   abstract unix sockets or signals outside the sandbox (ABI >= 6). An ABI below ``min_abi``
   (default 1) is refused with exit code 78 unless the config carries
   ``allow_weaker_landlock_unsafe`` (the parent records that); ``emulate_abi`` applies an older
   ABI's rule set on a newer kernel (tests and probes of the kernel matrix);
3. pre-spawned (``await_request``): in tool mode imports the tools file, then waits on stdin
   for the one request it serves (its argv, or its world and snapshot); see ``await_request``;
4. only then runs code that is not its own: in ``tool`` mode it loads the synthetic tools file by
   path, reads one JSON call ``{"world_id", "tool_id", "args"}`` on stdin and writes the tool's JSON
   response on stdout; in ``exec`` mode it replaces itself with the given command (the limits and
   the Landlock domain survive ``execve``); ``check`` mode reports what it applied, read back from
   the kernel (Landlock ABI, seccomp mode, ids, capability sets, rlimits, keyring, cgroups
   joined): the backend records that, not what it planned.

Exit codes: 0 ok, 64 bad config, 65 bad call, 70 the tool raised, 78 Landlock refused, 79 the
parent never moved us into the per-call cgroups it announced (``cgroup_gate``).

Every sandbox call starts this interpreter, so until it runs the command it imports only what it
uses (``ctypes``, ``struct``, ``resource``, ``stat``): not ``json`` (its Python layer imports
``re`` and ``enum``, about half of this worker's start) nor ``platform``. Its own input, the
parent's canonical JSON, is read with :func:`_loads`; ``json`` is imported where JSON is written
or a tool call is read (``check`` and ``tool`` modes).
"""

from __future__ import annotations

import os
import sys

EXIT_BAD_CONFIG = 64
EXIT_BAD_CALL = 65
EXIT_TOOL_RAISED = 70
EXIT_LANDLOCK_REFUSED = 78
EXIT_NO_CGROUP = 79
LANDLOCK_MARKER = "ect-worker: landlock-refused:"

# Landlock UAPI (linux/landlock.h); syscall numbers are the same on x86_64 and aarch64.
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_EXECUTE = 1 << 0
_WRITE_FILE = 1 << 1
_READ_FILE = 1 << 2
_READ_DIR = 1 << 3
_REMOVE_DIR = 1 << 4
_REMOVE_FILE = 1 << 5
_MAKE_CHAR = 1 << 6
_MAKE_DIR = 1 << 7
_MAKE_REG = 1 << 8
_MAKE_SOCK = 1 << 9
_MAKE_FIFO = 1 << 10
_MAKE_BLOCK = 1 << 11
_MAKE_SYM = 1 << 12
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3
_IOCTL_DEV = 1 << 15  # ABI 5
_NET_BIND_TCP = 1 << 0  # ABI 4
_NET_CONNECT_TCP = 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1  # ABI 6

_FILE_ONLY = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_WRITE = (
    _READ_FILE | _READ_DIR | _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_DIR | _MAKE_REG
    | _MAKE_SYM | _MAKE_FIFO | _MAKE_SOCK | _REFER | _TRUNCATE
)  # fmt: skip


class LandlockRefused(Exception):
    pass


def _fs_handled(abi: int) -> int:
    bits = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        bits |= _REFER
    if abi >= 3:
        bits |= _TRUNCATE
    if abi >= 5:
        bits |= _IOCTL_DEV
    return bits


def apply_landlock(cfg: dict) -> dict:
    """Restrict this process (and everything it execs) with Landlock; return what was applied."""
    import ctypes
    import struct

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    if abi < 0:
        abi = 0
    if cfg.get("emulate_abi") is not None:  # apply an older ABI's rule set (tests, probes)
        abi = min(abi, int(cfg["emulate_abi"]))
    min_abi = int(cfg.get("min_abi", 1))
    weaker = bool(cfg.get("allow_weaker_landlock_unsafe", False))
    if abi < min_abi and not weaker:
        raise LandlockRefused(f"kernel Landlock ABI {abi} < required {min_abi}")
    if abi < 1:
        # Only reachable with the unsafe flag: no Landlock at all, namespaces + seccomp remain.
        return {"abi": 0, "weaker": True}

    fs = _fs_handled(abi)
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0
    if abi >= 6:
        attr = struct.pack("=QQQ", fs, net, scoped)
    elif abi >= 4:
        attr = struct.pack("=QQ", fs, net)
    else:
        attr = struct.pack("=Q", fs)
    buf = ctypes.create_string_buffer(attr, len(attr))
    rfd = libc.syscall(_SYS_CREATE_RULESET, buf, ctypes.c_size_t(len(attr)), 0)
    if rfd < 0:
        raise LandlockRefused(f"landlock_create_ruleset: errno {ctypes.get_errno()}")

    def add(path: str, access: int) -> None:
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return  # a path that does not exist needs no rule
        try:
            import stat

            if not stat.S_ISDIR(os.fstat(pfd).st_mode):
                access &= _FILE_ONLY
            access &= fs
            rule = ctypes.create_string_buffer(struct.pack("=Qi", access, pfd), 12)
            if libc.syscall(_SYS_ADD_RULE, rfd, _RULE_PATH_BENEATH, rule, 0) != 0:
                raise LandlockRefused(f"landlock_add_rule {path}: errno {ctypes.get_errno()}")
        finally:
            os.close(pfd)

    for p in cfg.get("read", []):
        add(p, _READ)
    for p in cfg.get("read_nox", []):
        add(p, _READ_FILE | _READ_DIR)
    for p in cfg.get("write", []):
        add(p, _WRITE)
    for p in cfg.get("devices", []):
        add(p, _READ_FILE | _WRITE_FILE)

    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise LandlockRefused(f"prctl(NO_NEW_PRIVS): errno {ctypes.get_errno()}")
    if libc.syscall(_SYS_RESTRICT_SELF, rfd, 0) != 0:
        raise LandlockRefused(f"landlock_restrict_self: errno {ctypes.get_errno()}")
    os.close(rfd)
    return {"abi": abi, "weaker": abi < min_abi, "net": net != 0, "scoped": scoped != 0}


_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_PR_CAPBSET_DROP = 24
_KEYCTL_JOIN_SESSION_KEYRING = 1


def _cap_sets() -> dict:
    """The capability sets of this process, from /proc/self/status (capget is not allowed)."""
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:")):
                out[line[3:6].lower()] = int(line.split()[1], 16)
    return out


def drop_privileges(ids: list) -> None:
    """Root parent only: empty the capability bounding set, clear the inheritable (and so the
    ambient) set bwrap filled, then become this call's unprivileged host id with no
    supplementary groups (which clears the permitted and effective sets)."""
    import ctypes
    import struct

    uid, gid = int(ids[0]), int(ids[1])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    for cap in range(64):  # empty the bounding set: nothing exec'd later can gain a capability
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:
            _fail(EXIT_BAD_CONFIG, "ect-worker: could not empty the capability bounding set")
    now = _cap_sets()
    # struct __user_cap_header_struct {u32 version; int pid} and two __user_cap_data_struct
    # {u32 effective, permitted, inheritable}: keep effective/permitted (setresuid needs
    # CAP_SETUID), inheritable 0
    hdr = ctypes.create_string_buffer(struct.pack("=Ii", _LINUX_CAPABILITY_VERSION_3, 0), 8)
    eff, prm = now.get("eff", 0), now.get("prm", 0)
    data = ctypes.create_string_buffer(struct.pack(
        "=6I", eff & 0xFFFFFFFF, prm & 0xFFFFFFFF, 0, eff >> 32, prm >> 32, 0), 24)
    nr = _SYS_CAPSET.get(os.uname().machine)
    if nr is None or libc.syscall(nr, hdr, data) != 0:
        _fail(EXIT_BAD_CONFIG, "ect-worker: could not clear the inheritable capabilities")
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)  # from uid 0 to another: every capability is cleared
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        _fail(EXIT_BAD_CONFIG, "ect-worker: could not drop to the host service id")


def leave_session_keyring() -> None:
    """Join a new, empty session keyring: the parent's keys are no longer possessed."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    nr = _SYS_KEYCTL.get(os.uname().machine)
    if nr is None or libc.syscall(nr, _KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        _fail(EXIT_BAD_CONFIG, "ect-worker: could not leave the parent's session keyring")


def set_rlimits(lim: dict) -> None:
    import resource

    table = {
        "cpu_s": resource.RLIMIT_CPU,
        "address_space_bytes": resource.RLIMIT_AS,
        "file_size_bytes": resource.RLIMIT_FSIZE,
        "nproc": resource.RLIMIT_NPROC,
        "nofile": resource.RLIMIT_NOFILE,
    }
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for key, res in table.items():
        if lim.get(key) is None:
            continue
        soft = int(lim[key])
        # CPU: SIGXCPU at the soft limit, SIGKILL one second later if it is ignored.
        hard = soft + 1 if key == "cpu_s" else soft
        resource.setrlimit(res, (soft, hard))


def await_cgroup(gate: dict, timeout_s: float = 10.0) -> dict:
    """Wait until the parent has moved this process into every per-call cgroup in ``gate``.

    ``gate`` maps a ``/proc/self/cgroup`` controller field ("pids", "memory"; "" for cgroup v2)
    to the per-call group's directory name. A root parent bounds processes and memory with
    per-call cgroups it joins us to while we start (see CallCgroups.adopt); nothing foreign may
    run, allocate or fork before that has happened.
    """
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        seen = set()
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) != 3:
                    continue
                for ctl in parts[1].split(",") if parts[1] else [""]:
                    if ctl in gate and parts[2].endswith("/" + str(gate[ctl])):
                        seen.add(ctl)
        if seen == set(gate):
            return {ctl: str(gate[ctl]) for ctl in sorted(gate)}
        if time.monotonic() > deadline:
            _fail(EXIT_NO_CGROUP, "ect-worker: never joined the per-call cgroups")
        time.sleep(0.0005)


_RLIMITS = ("cpu_s", "address_space_bytes", "file_size_bytes", "nproc", "nofile")


def _inside() -> dict:
    """Layers as seen from inside, read back rather than assumed: seccomp mode (2 = filter),
    NO_NEW_PRIVS, the uid map (inside, host, n), the ids, every capability set, and the soft
    rlimits in force (None: unlimited)."""
    import resource

    out: dict = {"seccomp": None, "no_new_privs": None, "uid_map": None}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("Seccomp:"):
                out["seccomp"] = line.split()[1]
            elif line.startswith("NoNewPrivs:"):
                out["no_new_privs"] = line.split()[1] == "1"
    with open("/proc/self/uid_map") as fh:
        out["uid_map"] = [int(x) for x in fh.read().split()[:3]]
    out["ids"] = [os.getuid(), os.getgid(), len(os.getgroups())]
    out["capabilities"] = {k: format(v, "x") for k, v in sorted(_cap_sets().items())}
    table = {
        "cpu_s": resource.RLIMIT_CPU,
        "address_space_bytes": resource.RLIMIT_AS,
        "file_size_bytes": resource.RLIMIT_FSIZE,
        "nproc": resource.RLIMIT_NPROC,
        "nofile": resource.RLIMIT_NOFILE,
    }
    out["rlimits"] = {}
    for key in _RLIMITS:
        soft = resource.getrlimit(table[key])[0]
        out["rlimits"][key] = None if soft == resource.RLIM_INFINITY else soft
    return out


class _Strict:
    """The settings ``json.loads`` gives its scanner: no NaN or Infinity, no hooks."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> None:
        raise ValueError(f"not JSON: {name}")


def _loads(text: str | bytes):
    """``json.loads`` of one JSON document from the parent (its canonical JSON: no whitespace),
    by the C scanner ``json.loads`` itself uses, without importing ``json`` (see the module's
    docstring). Raises ValueError for anything but exactly one JSON value."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    try:
        from _json import make_scanner
    except ImportError:  # an interpreter without the accelerator: the same parse, slower
        import json

        return json.loads(text)
    try:
        value, end = make_scanner(_Strict())(text, 0)
    except (StopIteration, SystemError, RecursionError) as e:
        # no value at that offset (the scanner raises its own JSONDecodeError only once
        # json.decoder is imported; before that, SystemError)
        raise ValueError(f"not JSON ({type(e).__name__})") from None
    if end != len(text):
        raise ValueError(f"extra data at {end}")
    return value


def _fail(code: int, message: str) -> None:
    sys.stderr.write(message.replace("\n", " ")[:2000] + "\n")
    sys.stderr.flush()
    os._exit(code)


def _load_tools(cfg: dict):
    import importlib.util

    spec = importlib.util.spec_from_file_location("ect_sandbox_tools", cfg["tools"])
    if spec is None or spec.loader is None:
        _fail(EXIT_BAD_CONFIG, "ect-worker: cannot load the tools file")
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # the tool's own failure: report its class, never a traceback
        _fail(EXIT_TOOL_RAISED, f"ect-worker: tool raised {type(e).__name__}: {e}")
    return mod


def _read_exact(n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = os.read(0, n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def await_request(cfg: dict) -> None:
    """Pre-spawned (pooled) child: everything is applied; wait for the one request this child
    will serve: a 10-digit length, then that many bytes of JSON with the call's own fields
    (``argv`` in exec mode; ``world_id`` and ``snapshot_data`` in tool mode). Read exactly, so
    the rest of stdin is the command's (exec) or the call (tool)."""
    head = _read_exact(10)
    if not head:
        os._exit(0)  # discarded unused: the parent closed the pipe
    try:
        req = _loads(_read_exact(int(head)))
    except ValueError:
        _fail(EXIT_BAD_CONFIG, "ect-worker: bad request header")
    if not isinstance(req, dict) or not set(req) <= {"argv", "world_id", "snapshot_data"}:
        _fail(EXIT_BAD_CONFIG, "ect-worker: bad request header")
    cfg.update(req)


def _run_tool(cfg: dict, mod=None) -> None:
    import json

    limit = int(cfg.get("max_call_bytes", 1 << 20))
    raw = sys.stdin.buffer.read(limit + 1)
    if len(raw) > limit:
        _fail(EXIT_BAD_CALL, f"ect-worker: call larger than {limit} bytes")
    try:
        call = json.loads(raw)
    except ValueError as e:
        _fail(EXIT_BAD_CALL, f"ect-worker: call is not JSON: {e}")
    if not isinstance(call, dict) or set(call) != {"world_id", "tool_id", "args"}:
        _fail(EXIT_BAD_CALL, "ect-worker: call must be exactly {world_id, tool_id, args}")
    if call["world_id"] != cfg["world_id"] or not isinstance(call["args"], dict):
        _fail(EXIT_BAD_CALL, "ect-worker: call names another world or args is not an object")
    if "snapshot_data" in cfg:
        snapshot = json.loads(cfg["snapshot_data"])
    else:
        with open(cfg["snapshot"], "rb") as fh:
            snapshot = json.loads(fh.read())
    if mod is None:
        mod = _load_tools(cfg)
    try:
        response = mod.call_tool(snapshot, call["tool_id"], call["args"])
        out = json.dumps(response, ensure_ascii=False, allow_nan=False, separators=(",", ":"))  # noqa: TID251
    except Exception as e:  # the tool's own failure: report its class, never a traceback
        _fail(EXIT_TOOL_RAISED, f"ect-worker: tool raised {type(e).__name__}: {e}")
    sys.stdout.write(out)
    sys.stdout.flush()


def main(argv: list[str]) -> None:
    try:
        cfg = _loads(argv[1])
        mode = cfg["mode"]
    except (IndexError, ValueError, KeyError, TypeError):
        _fail(EXIT_BAD_CONFIG, "ect-worker: usage: worker.py CONFIG_JSON")
    if cfg.get("drop_to") is not None:
        drop_privileges(cfg["drop_to"])
    keyring = None
    if cfg.get("new_session_keyring"):
        leave_session_keyring()
        keyring = "new anonymous session keyring"
    set_rlimits(cfg.get("rlimits", {}))
    applied: dict = {"abi": None}
    if cfg.get("landlock") is not None:
        try:
            applied = apply_landlock(cfg["landlock"])
        except LandlockRefused as e:
            _fail(EXIT_LANDLOCK_REFUSED, f"{LANDLOCK_MARKER} {e}")
    cgroups = None
    if cfg.get("cgroup_gate"):
        cgroups = await_cgroup(dict(cfg["cgroup_gate"]))
    mod = None
    if cfg.get("await_request"):
        if mode == "tool":  # the interpreter and the tools are loaded before the call is known
            import json  # read and written by _run_tool, imported before the call arrives

            mod = _load_tools(cfg)
        await_request(cfg)
    if mode == "check":
        # what this worker applied and sees, for the records (never what the parent planned)
        applied.update(_inside())
        applied["keyring"] = keyring
        applied["cgroups_joined"] = sorted(cgroups) if cgroups else []
        import json

        sys.stdout.write(json.dumps(applied))  # noqa: TID251
    elif mode == "exec":
        cmd = cfg["argv"]
        try:
            os.execvpe(cmd[0], cmd, dict(os.environ))
        except OSError as e:
            _fail(127, f"ect-worker: cannot exec {cmd[0]}: {e.strerror}")
    elif mode == "tool":
        _run_tool(cfg, mod)
        if cfg.get("await_request"):
            os._exit(0)  # output flushed; a single-use child needs no interpreter teardown
    else:
        _fail(EXIT_BAD_CONFIG, f"ect-worker: unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv)
