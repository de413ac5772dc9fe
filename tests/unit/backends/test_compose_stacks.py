"""Reading stacks inside a container: what ``docker exec`` gives becomes a dump or one line saying why."""

from __future__ import annotations

from typing import Any

from launcher.backends.compose.docker_exec import read_stacks_in as read_container_stacks


class Container:
    """Answers ``exec_run(demux=True)`` as the Docker SDK does: ``ls /proc``, and py-spy through ``timeout``."""

    def __init__(self, pyspy: tuple[int, tuple[bytes | None, bytes | None]]):
        self.pyspy = pyspy
        self.commands: list[list[str]] = []

    def exec_run(self, command: list[str], **options: Any) -> tuple[int, Any]:
        self.commands.append(command)
        assert options.get("demux") and options["environment"] == {"RUST_BACKTRACE": "0"}
        if command == ["ls", "/proc"]:
            return 0, (b"1\n7\n15\nself\nsys\n", None)
        return self.pyspy


def test_every_process_is_read_with_py_spy_bounded_by_timeout() -> None:
    container = Container((0, (b"Process 7: python app.py\nThread 7 (idle)\n    main (app.py:3)\n", None)))
    dump, why = read_container_stacks(container)
    assert why == "" and dump is not None and "main (app.py:3)" in dump
    assert container.commands[1:] == [["timeout", "-s", "KILL", "10", "py-spy", "dump", "--pid", pid, "--full-filenames"]
                                      for pid in ("1", "7", "15")]


def test_an_image_without_py_spy_is_one_line() -> None:
    dump, why = read_container_stacks(Container((127, (None, b"timeout: failed to run command 'py-spy': No such file"))))
    assert dump is None and why.startswith("py-spy is not in the task's image") and "\n" not in why


def test_a_py_spy_that_hangs_is_killed_and_said_so() -> None:
    assert read_container_stacks(Container((137, (None, None)))) == (None, "py-spy did not answer within 10 s")
