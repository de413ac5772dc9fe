"""``python -m launcher.backends.supervisor_process ...``: the supervisor process (``main.main``, ended by ``main.end``)."""

from launcher.backends.supervisor_process.main import end, main

end(main())
