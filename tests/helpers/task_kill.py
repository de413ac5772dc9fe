"""What a test runs in a task's container to kill its program as a crash would, on every container backend."""

#: Run in a task's container (``python -c``: pods/exec, docker exec): SIGKILL to the task's program, as a crash
#: ends it: the child of the agent's zygote (the agent's child that imported TensorFlow and forks each run), else the
#: child of the task's agent (a Kubernetes pod's is the child of PID 1, the image's tini; a compose container's the child of that tini,
#: under Docker's init; a task without an agent: the child of PID 1 itself); never a standby
#: (still called by a line on its stdin, a pipe), the zygote, or the agent: one that has not started the program
#: yet says so (``NO_PROGRAM``) and nothing is killed.
KILL_9_TASK = """
import os, signal
def children(of):
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and open(f"/proc/{p}/stat").read().rpartition(")")[2].split()[1] == str(of)]
def standby(pid):
    return os.readlink(f"/proc/{pid}/fd/0").startswith("pipe:")
def runs(pid, module):
    return module in open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
top = children(1)
agents = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc"))) if runs(pid, b"launcher.worker.agent")]
below = [pid for agent in agents for pid in children(agent)]
zygotes = [pid for pid in below if runs(pid, b"launcher.worker.zygote")]
program = ([pid for zygote in zygotes for pid in children(zygote)] if zygotes else
           [pid for pid in below if not standby(pid)] if agents else top)
victims = program
print("killed" if victims else "no program yet", flush=True)  # said first: the kill may end this exec too
for pid in victims:
    os.kill(pid, signal.SIGKILL)
"""
#: What ``KILL_9_TASK`` says when the task's program is not running yet (its agent starting it).
NO_PROGRAM = "no program yet"
#: ``kill -9`` of PID 1's child (a pod's agent itself): its container ends, so its pod is lost and its Job replaced
#: (no restart in place).
KILL_9_AGENT = KILL_9_TASK.replace("victims = program", "victims = top")
