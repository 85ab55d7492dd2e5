"""Subprocess writer for the crash and concurrency tests (run as a script, never imported
by pytest as a test module).

    python _writer.py forkserver PATH KEY DIR  import once, then for each stdin line "fork TAG"
                                              fork a writer child and print its pid; the child
                                              appends forever, writing "<seq> <i>" lines to
                                              DIR/TAG.acks after each COMMIT (every 16th append
                                              also journals an attempt, every 32nd checkpoints);
                                              "reap PID" waits for the child and prints its
                                              wait status; "quit" ends the server
    python _writer.py crash PATH KEY POINT OP  run OP (append|checkpoint|manifest) with a hook
                                              that SIGKILLs this process at crash point POINT
    python _writer.py burst PATH TAG N         wait for "go", append N records, print seqs
"""

from __future__ import annotations

import os
import signal
import sys

from runner.store import ManifestCell, Store, export_manifest, load_signing_key


def _kill_at(point: str):  # type: ignore[no-untyped-def]
    def hook(name: str) -> None:
        if name == point:
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


def _body(tag: str, i: int) -> dict[str, object]:
    return {"tag": tag, "i": i, "cell_id": f"{tag}-{i}", "pad": "x" * (i % 50)}


def _loop(path: str, key_path: str, tag: str, ack_fd: int) -> None:
    key = load_signing_key(key_path)
    with Store.open(path, signing_key=key) as store:
        i = 0
        while True:
            if i % 16 == 5:
                a = store.attempt_begin({"cell_id": f"{tag}-{i}", "n": i})
                store.attempt_end(a, {"status": 200})
            seq = store.append(_body(tag, i))
            os.write(ack_fd, f"{seq} {i}\n".encode())  # one write: a line is whole or absent
            if i % 32 == 31:
                store.checkpoint()
            i += 1


def main(argv: list[str]) -> int:
    mode = argv[1]
    if mode == "forkserver":
        path, key_path, ack_dir = argv[2], argv[3], argv[4]
        for line in sys.stdin:
            cmd, arg = line.split()
            if cmd == "fork":
                sys.stdout.flush()
                pid = os.fork()
                if pid == 0:  # the writer child: it only ever ends by SIGKILL
                    try:
                        fd = os.open(
                            os.path.join(ack_dir, f"{arg}.acks"), os.O_WRONLY | os.O_CREAT, 0o644
                        )
                        _loop(path, key_path, arg, fd)
                    finally:
                        os._exit(1)
                print(pid, flush=True)
            elif cmd == "reap":
                _, status = os.waitpid(int(arg), 0)
                print(status, flush=True)
            else:
                return 0
        return 0
    if mode == "crash":
        path, key_path, point, op = argv[2], argv[3], argv[4], argv[5]
        key = load_signing_key(key_path)
        with Store.open(path, signing_key=key, hook=_kill_at(point)) as store:
            if op == "append":
                store.append(_body("crash", 0))
            elif op == "checkpoint":
                store.checkpoint()
            elif op == "manifest":
                cells = [
                    ManifestCell(b["row"], b["cell_id"], b["result_digest"], b["audit_digest"],
                                 b["result"]["outcome"]["stop_reason"])
                    for b in (r.body for r in store.records(1))
                ]
                export_manifest(store, cells, argv[6])
        return 0
    if mode == "burst":
        path, tag, n = argv[2], argv[3], int(argv[4])
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        if sys.stdin.readline().strip() != "go":
            return 3
        with Store.open(path) as store:
            for i in range(n):
                seq = store.append(_body(tag, i))
                sys.stdout.write(f"{seq} {i}\n")
                sys.stdout.flush()
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
