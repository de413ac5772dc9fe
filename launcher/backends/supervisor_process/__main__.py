"""``python -m launcher.backends.supervisor_process ...``: the supervisor process (``main.main``), ended by
``detach.end`` (its exit handlers run; the interpreter's finalization, which daemon threads can abort, does not)."""

from launcher.backends.supervisor_process.main import main
from launcher.supervision.detach import end

end(main())
