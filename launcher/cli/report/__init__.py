"""``tfcluster report``: a run's history (``launcher.supervision.history``) drawn as one static HTML page.

``timeline`` folds the history into what is drawn (lanes, spans, marks, the step rate, the loss);
``page`` renders it (pure, every text escaped). The command (``launcher.cli.commands``) only reads the
history from the backend and writes the page.
"""
