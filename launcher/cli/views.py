"""Human-readable dry-run: a table of tasks, then each task's TF_CONFIG and command.

Each task's section is written as soon as it is formatted, without markup
or wrapping: the TF_CONFIGs together are quadratic in the number of tasks.
Every line goes through ``launcher.cli.terminal``'s console: a spec's value
(a path, a command) is shown escaped, on its own line only where it belongs.
"""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table

from launcher.cli import terminal
from launcher.plan.workspace import CredentialFile, WorkspaceSource


def credential_notes(source: WorkspaceSource) -> list[str]:
    """What ``run``/``up`` say (and the dry run shows) about credentials in a workspace that ships: one line for
    those left out, one for those a ``.dockerignore`` ``!`` line ships anyway, each file with the rule that
    matched (never the secret). Names are quoted; shown through ``launcher.cli.terminal``, their control
    characters are escaped, so a file name cannot forge a line."""
    notes = []
    if source.withheld:
        notes.append(f"workspace: left out as credentials (a line !NAME in .dockerignore ships one): {_named(source.withheld)}")
    if source.reincluded:
        notes.append(f"workspace: shipping what looks like credentials, as .dockerignore takes it back: {_named(source.reincluded)}")
    return notes


def _named(credentials: list[CredentialFile]) -> str:
    return ", ".join(f"{credential.path!r} ({credential.why})" for credential in credentials)


def render_text(document: dict[str, Any], console: terminal.EscapingConsole | None = None) -> None:
    """Print the dry-run ``document`` (see ``launcher.api.dry_run``) for people."""
    console = console or terminal.console(highlight=False, soft_wrap=True)
    console.print(terminal.styled(document["name"], "bold"), f"on {document['backend']} (run {document['run_id']})")
    console.print(f"strategy: {document['strategy_note']}")
    console.print(f"checkpoints: {document['checkpoint_dir']}")
    console.print(f"tensorboard: {document['tensorboard_dir'] or 'off'}")
    workspace = document.get("workspace")
    if workspace:
        source = workspace["source"]
        shipped = f" ({len(source['files'])} files ship, {source['size']:,} bytes; `-o plan` lists them)" if workspace["images"] else ""
        console.out(f"workspace: {source['directory']}{shipped}, tasks run in {workspace['workdir']}", highlight=False)
        if workspace["images"]:
            for note in credential_notes(WorkspaceSource.model_validate(source)):
                console.out(f"  {note}", highlight=False)
        for image in workspace["images"]:
            push = ", pushed there" if image["push"] else ""
            console.print(f"  would build {image['tag']} FROM {image['base']} (unless present{push})")
    if document["workdir"] and not workspace:
        console.print(f"working directory: {document['workdir']}")
    containers = document["backend"] != "local"
    table = Table("task", "type", "index", "address", *(["image"] if containers else []))
    for task in document["tasks"]:
        row = [task["name"], task["type"], str(task["index"]), task["address"]]
        table.add_row(*row, *([task["image"]] if containers else []))
    console.print(table)
    if not containers:
        console.print("(local ports are a preview: `up` picks free loopback ports)")
    for task in document["tasks"]:
        console.print()
        console.print(terminal.styled(task["name"], "bold"))
        place = " (in place of the image's ENTRYPOINT)" if containers and task.get("replaces_entrypoint") else ""
        console.out(f"  command{place}: {json.dumps(task['command'])}", highlight=False)
        if task.get("standby_command"):
            console.out(f"  standby (from the start; a restart becomes it): {json.dumps(task['standby_command'])}",
                        highlight=False)
        console.out(f"  TF_CONFIG: {json.dumps(task['tf_config'], separators=(',', ':'))}", highlight=False)
    for name in document["artifacts"]:
        console.print()
        console.print("would apply", terminal.styled(name, "bold"), "(see `tfcluster render`)")
    for name in document.get("admin_artifacts", {}):
        console.print()
        console.print("a cluster admin applies", terminal.styled(name, "bold"), "once, for every run (see `tfcluster render`)")
