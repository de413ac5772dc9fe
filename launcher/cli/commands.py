"""The ``tfcluster`` commands: a thin layer over ``launcher.api`` and the backends.

Exit codes, by error type: 0 success; 1 the job failed, or a
``TfclusterError`` (launch, backend, image build); 2 the spec or the command
line is wrong (``SpecError``: one line per problem, no traceback, nothing
started); 130 interrupted (the cluster is stopped first). A ``SpecWarning``
(a TFJob field honoured differently but safely) is one ``warning:`` line.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
from click.core import ParameterSource

from launcher import api
from launcher.backends import get_backend
from launcher.backends.api import Backend
from launcher.backends.workspace import MAX_WORKSPACE_BYTES
from launcher.cli import terminal
from launcher.cli.registry import forget, lookup, ready, record
from launcher.errors import LaunchError, TfclusterError
from launcher.plan import naming
from launcher.plan.dryrun import DryRun, json_chunks, plan_document, plan_entries, plan_settings, task_entries
from launcher.plan.images import ImageVariant
from launcher.plan.script import SOURCE as SCRIPT_SOURCE
from launcher.plan.targets import BackendKind
from launcher.spec.image_reference import image_problem
from launcher.spec.problems import Problem, SpecError
from launcher.supervision.statefile import UnsafeStatePath, user_dir, write_private

BACKENDS = click.Choice([k.value for k in BackendKind])


def _cluster_names(ctx: click.Context, param: click.Parameter, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
    """NAME arguments: a cluster name only (it becomes a path), else one line, exit 2."""
    try:
        for name in (value,) if isinstance(value, str) else value:
            naming.cluster_name(name)
    except LaunchError as exc:
        raise click.BadParameter(str(exc)) from None
    return value
EXIT_SPEC = 2
EXIT_FAILED = 1


class _Cli(click.Group):
    """Turns known errors into one-line messages and exit codes instead of tracebacks; everything a command
    shows (its logging and warnings too) leaves through ``launcher.cli.terminal``, escaped."""

    def invoke(self, ctx: click.Context):
        try:
            with terminal.to_terminal():
                return super().invoke(ctx)
        except SpecError as exc:  # one line per problem
            terminal.echo_lines(str(exc), err=True)
            sys.exit(EXIT_SPEC)
        except click.UsageError as exc:  # one line, like a spec problem
            command = exc.ctx.command.name if exc.ctx and exc.ctx.parent else None
            terminal.echo(f"tfcluster{' ' + command if command else ''}: {exc.format_message()}", err=True)
            sys.exit(EXIT_SPEC)
        except UnsafeStatePath as exc:  # the user's TFCLUSTER_HOME: usage, nothing was started
            terminal.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_SPEC)
        except TfclusterError as exc:  # it may quote a task's output: one line
            terminal.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_FAILED)


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tfcluster")
def main() -> None:
    """Plan, launch and supervise multi-worker TensorFlow training clusters.

    Write one cluster spec (YAML), check it with `validate`, see every task's
    TF_CONFIG with `dry-run`, then `up` on the local, compose, k8s or slurm backend.
    """


#: ``--registry``'s default (what ``.ci/k8s.sh`` exports for its cluster's registry).
REGISTRY_ENV = "TFCLUSTER_REGISTRY"
REGISTRY_OPTION = click.option(
    "--registry", metavar="HOST[:PORT][/PATH]", envvar=REGISTRY_ENV, show_envvar=True,
    help=f"k8s: push the workspace image there, the nodes pull it from there (overrides kubernetes.registry; "
         f"default: ${REGISTRY_ENV}, read with -b k8s only).")


FORCE_OPTION = click.option(
    "--force", is_flag=True, help="local: start even if the tasks clearly exceed this machine's available memory; "
                                  f"compose/k8s: ship a workspace over the {MAX_WORKSPACE_BYTES >> 20} MiB cap.")


def registry_override(registry: str | None) -> dict[str, dict[str, str]] | None:
    return {"kubernetes": {"registry": registry}} if registry else None


def image_option(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A command-line image reference, checked by the spec's own grammar (``launcher.spec.image_reference``)."""
    problem = None if value is None else image_problem(value)
    if problem is not None:
        raise click.BadParameter(problem, ctx=ctx, param=param)
    return value


def kubernetes_options(backend: str, registry: str | None, **options: str | None) -> str | None:
    """The ``--registry`` that reaches ``backend``'s plan, once the Kubernetes-only options are checked.

    ``--namespace``/``--context``/``--registry`` (``options`` and ``registry``) act on Kubernetes only: with
    another backend they are refused (one line, exit 2), never ignored, so a forgotten ``-b k8s`` does not launch
    elsewhere. ``$TFCLUSTER_REGISTRY`` counts with ``-b k8s`` only: the variable a developer exported for a
    Kubernetes cluster neither makes another backend refuse nor reaches its plan."""
    if click.get_current_context().get_parameter_source("registry") is ParameterSource.ENVIRONMENT \
            and backend != BackendKind.K8S.value:
        registry = None
    given = [f"--{name}" for name, value in {**options, "registry": registry}.items() if value is not None]
    if given and backend != BackendKind.K8S.value:
        raise click.UsageError(f"{', '.join(given)}: only with -b k8s (the backend is {backend})")
    return registry


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--backend", "-b", type=BACKENDS, default=None,
              help="Also check the rules of this backend (e.g. compose's checkpoint volume).")
def validate(spec: Path, backend: str | None) -> None:
    """Check SPEC (or a Kubeflow TFJob) and report every problem (exit 2 if there are any)."""
    loaded = api.load_spec(spec, backend)
    terminal.echo(f"{spec}: ok ({loaded.name})")


@main.command("dry-run")
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--backend", "-b", type=BACKENDS, default="local", show_default=True)
@click.option("--output", "-o", type=click.Choice(["text", "json", "plan"]), default="text", show_default=True,
              help="json: only {\"tasks\": [{name, type, index, address, tf_config}]}; "
                   "plan: also images, commands, env, the workspace layers to build and rendered files.")
@REGISTRY_OPTION
@click.option("--force", is_flag=True, help=f"Plan a workspace over the {MAX_WORKSPACE_BYTES >> 20} MiB cap too (as `up --force` ships it).")
def dry_run(spec: Path, backend: str, output: str, registry: str | None, force: bool) -> None:
    """Print every task's TF_CONFIG and what would be launched, without launching.

    With a workspace on compose/k8s, `-o plan` lists every file that ships.
    """
    registry = kubernetes_options(backend, registry)
    dry_run_ = api.dry_run(spec, backend, overrides=registry_override(registry), force=force)
    if output in ("json", "plan"):  # streamed task by task: the output is quadratic in the tasks, memory is not
        plan = dry_run_.plan
        chunks = json_chunks(task_entries(plan), shared=[plan.cluster]) if output == "json" else \
            json_chunks(plan_entries(plan), plan_settings(dry_run_), shared=[plan.cluster])
        for chunk in chunks:
            terminal.echo_json(chunk, nl=False)
        terminal.echo("")
    else:
        from launcher.cli.views import render_text

        render_text(plan_document(dry_run_))


@main.command()
@click.argument("tfjob", type=click.Path(dir_okay=False, path_type=Path))
def convert(tfjob: Path) -> None:
    """Print the tfcluster spec equivalent to a Kubeflow TFJob manifest.

    Each TFJob field that is not carried gets a comment line (the other commands
    refuse it), and so does each one carried with a difference or without effect.
    validate, dry-run, up and run -f also read a TFJob as it is.
    """
    terminal.echo_lines(api.convert_tfjob(tfjob), nl=False)


@main.command()
def schema() -> None:
    """Print the JSON Schema of the cluster spec (for editor completion)."""
    from launcher.spec.models import ClusterSpec

    terminal.echo_json(json.dumps(ClusterSpec.model_json_schema(), indent=2))


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--backend", "-b", type=click.Choice(["compose", "k8s", "slurm"]), required=True)
@click.option("--output-dir", "-d", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--format", "fmt", type=click.Choice(["native", "tfjob"]), default="native", show_default=True,
              help="k8s only: `tfjob` writes a Kubeflow TFJob instead of Jobs (a warning names what it cannot carry).")
def render(spec: Path, backend: str, output_dir: Path, fmt: str) -> None:
    """Write the files the backend would apply (compose file, Kubernetes manifests, Slurm batch script) to DIR.

    They are readable by you only (the env may hold keys): DIR is made 0700 if missing, each file 0600.
    With k8s also the admission policy a cluster admin applies once (admission-policy.yaml, not in the
    kustomization; docs/security.md).
    """
    if fmt == "tfjob" and backend != "k8s":
        raise click.UsageError("--format tfjob needs --backend k8s")
    dry_run_ = api.dry_run(spec, backend)
    files = {**dry_run_.files, **dry_run_.admin_files}
    if backend == BackendKind.K8S.value:
        from launcher.backends.kubernetes.gang import off_note

        if note := off_note(dry_run_.plan):
            terminal.echo(f"warning: {note}", err=True)
    if fmt == "tfjob":
        from launcher.backends.kubernetes.manifests import render_tfjob
        from launcher.spec import loader, tfjob

        files = render_tfjob(dry_run_.plan)
        loader.warn_at(spec, tfjob.unexported(dry_run_.plan.spec))  # never silent about what the TFJob loses
    user_dir(output_dir)  # the plan's env may carry API keys: readable by you only
    for name, content in files.items():
        write_private(output_dir / name, content)
        terminal.echo(output_dir / name)


def _backend_for(name: str, backend: str | None, **options: str | None) -> Backend:
    """The backend cluster ``name`` was launched on (``-b`` overrides; local when nothing is recorded)."""
    given = {k: v for k, v in options.items() if v is not None}
    recorded = lookup(name)
    if backend is not None:
        return get_backend(BackendKind(backend), given)
    if recorded is None:
        return get_backend(BackendKind.LOCAL, given)
    kind, saved = recorded
    return get_backend(kind, {**saved, **given})


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--backend", "-b", type=BACKENDS, default="local", show_default=True)
@click.option("--detach", "-d", is_flag=True, help="Return once started; use status/logs/down later.")
@click.option("--namespace", help="k8s: namespace (default: the spec's).")
@click.option("--context", help="k8s: kubeconfig context.")
@FORCE_OPTION
@REGISTRY_OPTION
def up(spec: Path, backend: str, detach: bool, namespace: str | None, context: str | None, force: bool,
       registry: str | None) -> None:
    """Launch SPEC and watch it until it ends (exit 0 if the job succeeded)."""
    registry = kubernetes_options(backend, registry, namespace=namespace, context=context)
    dry_run_ = api.dry_run(spec, backend, api.new_run_id(), launching=True, overrides=registry_override(registry),
                           capacity=not force, force=force)
    _launch(dry_run_, detach, namespace, context)


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("script", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("-m", "module", metavar="MODULE", help="Run a module (python -m MODULE) instead of a script.")
@click.option("--workers", type=int, default=None, help="Worker tasks.  [default: 2]")
@click.option("--chief", is_flag=True, help="Add a chief (it leads the job).")
@click.option("--ps", type=int, default=None, help="Parameter servers: implies parameter_server and a chief.")
@click.option("--evaluator", is_flag=True, help="Add an evaluator task.")
@click.option("--backend", "-b", type=BACKENDS, default="local", show_default=True)
@click.option("--name", help="Cluster name (DNS label).  [default: from the spec given with -f, else the script]")
@click.option("--file", "-f", "spec_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Take roles, resources and policies from this spec (or TFJob); the script is its program.")
@click.option("--image", help="Base image of the tasks (default: the worker image); your directory is layered on it. "
              "With --ps it must hold tfcluster: the ps and workers run its server. An absolute SCRIPT is a file of it.")
@click.option("--env", "env_vars", multiple=True, metavar="KEY=VALUE", help="Environment for every task (repeatable).")
@click.option("--detach", "-d", is_flag=True, help="Return once started; use status/logs/down later.")
@click.option("--namespace", help="k8s: namespace (default: the spec's).")
@click.option("--context", help="k8s: kubeconfig context.")
@REGISTRY_OPTION
@FORCE_OPTION
def run(script: str | None, args: tuple[str, ...], module: str | None, workers: int | None, chief: bool,
        ps: int | None, evaluator: bool, backend: str, name: str | None, spec_file: Path | None, image: str | None,
        env_vars: tuple[str, ...], detach: bool, namespace: str | None, context: str | None, registry: str | None,
        force: bool) -> None:
    """Run your own SCRIPT (a .py path, or -m MODULE) on a cluster, then behave like `up`.

    Every task gets TF_CONFIG and the TFCLUSTER_* variables (docs/spec.md: "Bring your
    own script") and starts in the current directory; on compose and k8s it
    ships as a thin image layer (/workspace, its requirements.txt installed;
    k8s pushes it to --registry). Everything after SCRIPT is passed to it unchanged:
    tfcluster run --workers 3 train.py --epochs 5. With -m MODULE, `--` ends
    run's options: put the module's options named like run's after it.
    """
    registry = kubernetes_options(backend, registry, namespace=namespace, context=context)
    if module is not None and script is not None:
        args = (script, *args)
    program = module if module is not None else script
    if not program:
        raise SpecError([Problem("SCRIPT", "missing: name a .py file, or -m package.module")], SCRIPT_SOURCE)
    request = api.ScriptRun(program=program, module=module is not None, args=args, backend=BackendKind(backend),
                            workers=workers, chief=chief, ps=ps, evaluator=evaluator, name=name, image=image,
                            registry=registry, env=env_vars)
    spec = api.script_spec(request, spec_file)
    _launch(api.dry_run(spec, backend, api.new_run_id(), launching=True, capacity=not force, force=force), detach, namespace,
            context)


def _launch(dry_run_: DryRun, detach: bool, namespace: str | None, context: str | None) -> None:
    """Submit ``dry_run_`` and watch it (or return at once when detached); exits with the job's code.

    The live view's modules (rich) are imported only when it is shown: ``-d`` returns sooner without them."""
    plan = dry_run_.plan
    if plan.backend is BackendKind.K8S and namespace is None:
        namespace = plan.spec.kubernetes.namespace  # recorded, so status/logs/down find the cluster
    options = {k: v for k, v in {"namespace": namespace, "context": context}.items() if v is not None}
    runner = get_backend(plan.backend, options)
    if plan.workspace and plan.workspace.images:
        from launcher.cli.views import credential_notes

        for note in credential_notes(plan.workspace.source):
            terminal.echo(note, err=True)
    dry_run_ = runner.fit(dry_run_)
    ready()
    try:
        runner.submit(dry_run_)
        record(plan.name, plan.backend, options)
        if plan.run_config.tensorboard_dir is not None:
            terminal.echo(tensorboard_hint(plan.name, plan.run_config.tensorboard_dir))
        if detach:
            terminal.echo(f"started {plan.name} on {plan.backend.value} (run {plan.run_id}); "
                          f"see `tfcluster status {plan.name}`, or `tfcluster watch {plan.name}`")
            if dry_run_.supervised_from_here:
                terminal.echo(f"warning: {plan.name} is supervised by a process on this machine "
                              f"(kubernetes.supervisor: false): while this machine is off, nothing supervises it; "
                              f"`tfcluster watch {plan.name}` starts a new one", err=True)
            return
        from launcher.cli.watch import watch

        code = watch(runner, plan.name)
    except KeyboardInterrupt:  # before the watch took over: stop whatever was started
        if runner.describe(plan.name) is not None:
            from launcher.cli.watch import stop_after_interrupt

            stop_after_interrupt(runner, plan.name, terminal.console(stderr=True))
        code = 130
    sys.exit(code)


@main.command()
@click.argument("name", callback=_cluster_names)
@click.option("--backend", "-b", type=BACKENDS, default=None, help="Default: where `up` started NAME.")
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True)
def status(name: str, backend: str | None, output: str) -> None:
    """Show the state of cluster NAME and of each of its tasks.

    Local and compose also say whether the cluster's supervisor runs: `lost`
    means it died and the tasks run unsupervised (`watch` adopts them). On
    Kubernetes, `starting` means its pod does not run yet and `lost` says why
    none runs (e.g. its image cannot be pulled); `watch` supervises meanwhile.
    """
    from launcher.cli.watch import print_status

    job = _backend_for(name, backend).describe(name)
    if job is None:
        raise LaunchError(f"no cluster named {name!r}")
    if output == "json":
        terminal.echo_json(json.dumps(job.to_dict(), indent=2))
    else:
        print_status(job)


@main.command()
@click.argument("name", callback=_cluster_names)
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The page to write.  [default: NAME-report.html here]")
@click.option("--backend", "-b", type=BACKENDS, default=None, help="Default: where `up` started NAME.")
def report(name: str, output: Path | None, backend: str | None) -> None:
    """Write one HTML page of run NAME to look at: a timeline of every task (start-up, training, backups,
    failures, restarts, preemptions, evaluation), the step rate, the goodput breakdown, the loss, the spec
    and the plan.

    The page is self-contained (no script, nothing fetched when it is opened). Every backend (Kubernetes: the
    pods still there); running or ended (until `down`). It is written readable by you only, and never
    through a symbolic link (one at the path is refused).
    """
    from launcher.cli.report.page import render
    from launcher.supervision.statefile import write_private

    path = output if output is not None else Path(f"{name}-report.html")
    if path.is_symlink():
        raise click.UsageError(f"{path} is a symbolic link: the report is never written through one "
                               "(remove it, or name another file with -o)")
    history = _backend_for(name, backend).history(name)
    if history is None:
        raise LaunchError(f"no cluster named {name!r}")
    write_private(path, render(history))
    terminal.echo(f"{name}: report written to {path} (readable by you only)")


@main.command()
@click.argument("name")
@click.option("--backend", "-b", type=BACKENDS, default=None, help="Default: where `up` started NAME.")
def debug(name: str, backend: str | None) -> None:
    """Print the Python stacks of every thread of every running task of NAME, now (local, compose, k8s).

    Tasks running the built-in entrypoint, or a program that uses launcher.progress,
    dump them on request (faulthandler). Other Python programs are read from outside
    with py-spy: on local as you (it needs ptrace rights over them: a refusal is one
    line on stderr), on compose inside the task's container as its user. On k8s every
    task is read by py-spy in its pod (pods/exec).
    The stall watchdog collects the same on a stall (see `status`).
    """
    dumps = _backend_for(name, backend).stacks(name)
    if not dumps:
        raise LaunchError(f"no task of {name!r} is running")
    for task, dump in dumps.items():
        terminal.echo(f"== {task}")
        terminal.echo_lines(dump or "(no stacks: its program does not dump them on request, or it did not answer)")


@main.command("watch")
@click.argument("name", callback=_cluster_names)
@click.option("--backend", "-b", type=BACKENDS, default=None, help="Default: where `up` started NAME.")
def watch_command(name: str, backend: str | None) -> None:
    """Follow cluster NAME (started with `up --detach`) in the live view until it ends.

    Exits like `up`: 0 if the job succeeded. On Kubernetes this also runs the
    launcher's part of supervision (MWMS gang restart, the stall watchdog, cleanup
    after success).
    On local and compose, if the cluster's supervisor died, it starts one that
    adopts the tasks (no restart) and carries the restart budget and deadline on.
    """
    from launcher.cli.watch import watch

    runner = _backend_for(name, backend)
    job = runner.describe(name)
    if job is None:
        raise LaunchError(f"no cluster named {name!r}")
    if job.tensorboard_dir is not None:
        terminal.echo(tensorboard_hint(name, job.tensorboard_dir))
    sys.exit(watch(runner, name))


def _one_backend_for(names: list[str], backend: str | None) -> Backend:
    """The one backend all runs ``names`` live on; a usage error when they are on different ones."""
    if backend is None:
        where = {name: lookup(name) or (BackendKind.LOCAL, {}) for name in names}
        if len({json.dumps([kind.value, options], sort_keys=True) for kind, options in where.values()}) > 1:
            listed = ", ".join(f"{name} ({kind.value})" for name, (kind, _) in where.items())
            raise click.UsageError(f"the runs are on different backends or namespaces: {listed}; "
                                   "open one board per backend")
    return _backend_for(names[0], backend)


@main.command("tensorboard")
@click.argument("name", nargs=-1, required=True, callback=_cluster_names)
@click.option("--port", "-p", type=click.IntRange(1, 65535), default=6006, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to serve on; the default keeps TensorBoard to this machine.")
@click.option("--backend", "-b", type=BACKENDS, default=None, help="Default: where `up` started the runs.")
def tensorboard(name: tuple[str, ...], port: int, host: str, backend: str | None) -> None:
    """Serve TensorBoard for runs NAME... side by side; print its URL, run until Ctrl-C.

    Local: reads each run's log dir. Compose: a TensorBoard container of the
    worker image reads the checkpoint volumes, its port published on HOST
    only. Kubernetes: one TensorBoard Deployment (each run's volume claim
    mounted read-only), reached through a port-forward. Only gs:// and s3://
    log dirs: TensorBoard runs here. Ctrl-C stops it and removes what it started.
    """
    runs = list(dict.fromkeys(name))
    runner = _one_backend_for(runs, backend)
    try:
        with runner.tensorboard(runs, host, port) as board:
            terminal.echo(board.url)
            terminal.echo(f"TensorBoard for {', '.join(runs)}; Ctrl-C stops it", err=True)
            while board.running():
                time.sleep(0.5)
    except KeyboardInterrupt:
        sys.exit(130)
    raise LaunchError("TensorBoard stopped by itself")


def tensorboard_hint(name: str, log_dir: str) -> str:
    """The command that opens a run's curves, as ``up``/``watch`` print it."""
    return f"curves: `tfcluster tensorboard {name}` (summaries in {log_dir})"


@main.command()
@click.argument("name", callback=_cluster_names)
@click.argument("task", required=False)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines, across restarts, until the job ends or its supervisor is lost.")
@click.option("--backend", "-b", type=BACKENDS, default=None, help="Default: where `up` started NAME.")
def logs(name: str, task: str | None, follow: bool, backend: str | None) -> None:
    """Print the logs of one TASK of NAME, or of all its tasks.

    TASK is a task name such as demo-worker-1. Lines are printed as the tasks wrote
    them, control characters included (as kubectl logs and docker logs do).
    """
    try:
        for line in _backend_for(name, backend).logs(name, task, follow):
            terminal.raw(line)
    except KeyboardInterrupt:
        sys.exit(130)


@main.command()
@click.argument("name", callback=_cluster_names)
@click.option("--backend", "-b", type=BACKENDS, default=None, help="Default: where `up` started NAME.")
@click.option("--volumes", is_flag=True,
              help="Also delete the checkpoint dir, volume or claim, only one tfcluster created for NAME "
                   "(a dir it did not create: exit 2, nothing done).")
def down(name: str, backend: str | None, volumes: bool) -> None:
    """Stop cluster NAME and remove everything it started (checkpoints stay unless --volumes)."""
    _backend_for(name, backend).cancel(name, volumes=volumes)
    forget(name)
    terminal.echo(f"{name}: down")


@main.command()
@click.option("--gpu", is_flag=True,
              help=f"Build the GPU variant (tensorflow[and-cuda], CUDA libraries from PyPI) as {ImageVariant.GPU.default_tag}; "
                   "roles with resources.gpu > 0 run it unless the role or the spec names an image.")
@click.option("--tag", "-t", callback=image_option,
              help=f"Image tag; default: {ImageVariant.CPU.default_tag} ({ImageVariant.GPU.default_tag} with --gpu).")
@click.option("--base-image", callback=image_option, help="Base image (build arg BASE_IMAGE); default: the Dockerfile's.")
@click.option("--ca-bundle", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="CA bundle for pip inside the build (TLS-intercepting networks).")
@click.option("--host-network", is_flag=True, help="Build with the host's network.")
def build(gpu: bool, tag: str | None, base_image: str | None, ca_bundle: Path | None, host_network: bool) -> None:
    """Build the worker image every task runs (CPU by default), showing progress.

    The build checks what it installed (one TensorFlow distribution; tensorflow, tf_keras and
    tensorboard import with the same version; one training step) and fails loudly otherwise.
    """
    from launcher.backends.images import build_image

    variant = ImageVariant.GPU if gpu else ImageVariant.CPU
    build_image(tag=tag, variant=variant, base_image=base_image, ca_bundle=ca_bundle, host_network=host_network,
                echo=terminal.echo)
